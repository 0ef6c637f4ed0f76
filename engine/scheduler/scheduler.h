// File: engine/scheduler/scheduler.h
//
// Scheduler: continuous batching over P devices with data-parallel attention
// (each request's KV lives in the KvPool of one home device, and for a hybrid
// model its linear-attention state in one slot of that device's StatePool)
// and a shared per-step token budget.
//
//   Scheduler sched(options, {&runner.kv_pool(0), ...},
//                   {&runner.state_pool(0), ...});   // or {} (no linear layers)
//   sched.Submit(spec, now_us);
//   BatchInput batch = sched.Plan();
//   StepOutput out = runner.Step(batch, level).value();
//   for (Request& r : sched.Commit(out, now_us).value()) report(r);
//
// Two resource pools per device (seed 000 "Hybrid Memory Pools", seed 002
// §2.2): KV pages, which grow with the sequence, and recurrent-state slots,
// one per request whatever its length. A request needs a slot iff its
// device's StatePool has layers (options().layers > 0). The two are one
// lifecycle: admission acquires both (on the same device), finish and
// preemption release both, and chunked prefill and decode continue in the
// same slot (SeqInput::state_slot). Slots never grow, so only pages can run
// out mid-flight; slots only ever gate admission.
//
// Policy of one Plan():
//   1. decode first: every running request past prefill gets its 1 token. A
//      request that crosses a page boundary gets one more page; if its pool
//      is empty, the newest running request on that device is preempted
//      (pages and slot freed, back to the head of the queue, recomputed
//      later from position 0 in a fresh slot), which may be the request
//      itself. No request is ever dropped.
//   2. running requests still in prefill get their next chunk from what is
//      left of the budget (chunked prefill; `sample` only on the final chunk),
//      each prefill group within its share (set_prefill_group).
//   3. waiting requests are admitted FCFS while budget and max_running allow.
//      The candidate device is the one with the most free pages among those
//      with a free state slot (or needing none); it must hold the whole
//      prompt plus the reserve. When no device has a free slot, or the
//      candidate lacks pages, the head of the queue blocks the rest (no
//      overtaking, so no starvation). Admission is skipped in a step that
//      preempted.
// Prefix cache (options.prefix_cache; engine/prefix_cache/radix_cache.h), one
// RadixCache per device, since a request can only read pages of its home
// device:
//   - admission matches the request's tokens against every device's tree
//     and prefers the device with the longest hit if that hit covers at
//     least cache_threshold of the request's tokens (as SGLang's cache-aware
//     router does), else the most free pages. Short hits (a common opening
//     sentence) would otherwise pile requests onto one device, and data-
//     parallel attention waits on that device every step; long hits (a
//     rollout's repeated prompt) save a whole prefill and keep their
//     affinity. Wherever it goes, a hit there pins the node, reuses its
//     pages and (hybrid) copies its checkpoint;
//   - pages run short -> the tree's unlocked LRU leaves are evicted before
//     anything is preempted; slots run short -> its LRU checkpoints;
//   - publishing: every prefill chunk of a hybrid model snapshots the state
//     at the last page boundary it crosses into the request's checkpoint slot
//     (SeqInput::checkpoint_*), and Commit inserts that prefix (pages and
//     checkpoint) into the tree; decode snapshots at each page boundary and
//     publishes the latest one when the request finishes or is cancelled.
//     Without linear layers the same boundaries publish pages alone.
//   - checkpoint slots are opportunistic: taken only from slots nobody waits
//     for, and a boundary is skipped (never waited on) when none is free.
// The tree's pages and slots stay used after the engine drains; FlushCache()
// returns them, after which every pool is back to its initial state.
//
// Plan() changes page and slot ownership and states but not `computed`;
// Commit() advances the requests by what the step did. Plan() twice without
// Commit() replans the same work (used when a Step fails; the runner writes
// nothing for a step it refuses, so the slot state is still that of
// `computed`).
//
// Thread-safety: single-threaded; the KvPools and StatePools must not be
// touched by anyone else while the scheduler owns requests in them.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "base/status.h"
#include "engine/model_executor/model_runner.h"
#include "engine/pools/kv_pool.h"
#include "engine/pools/state_pool.h"
#include "engine/prefix_cache/radix_cache.h"
#include "engine/scheduler/rehome.h"
#include "engine/scheduler/request.h"

namespace sy::engine {

struct SchedulerOptions {
  // Tokens fed to the model per step (decode tokens + prefill chunks). Larger
  // budgets raise prefill throughput but lengthen the step every running
  // request waits on, i.e. TPOT jitter while long prompts are admitted.
  int max_batch_tokens = 512;
  // Requests running at once across all devices. More means higher decode
  // throughput and more KV pages held; must be <= max_batch_tokens so every
  // running request's decode token always fits in the budget.
  int max_running = 128;
  // Free pages a device must keep after admitting a prompt. Headroom for the
  // decode growth of requests already running there: more reserve means fewer
  // preemptions (wasted recompute) but lower KV occupancy.
  int admission_reserve_pages = 4;
  // Longest sequence (prompt + output) and vocabulary size; take them from
  // the ModelConfig. Prompts are validated against them at Submit.
  int max_seq = 1024;
  int vocab = 260;
  // EOS token that finishes a request (tokenizer.h kEosToken).
  int32_t eos_token = 257;
  // Reuse KV pages (and recurrent-state checkpoints) of earlier requests
  // with the same token prefix. Off: every request prefills from position 0.
  bool prefix_cache = true;
  // Placement among devices (see "Prefix cache" above): a hit decides the
  // device only if it covers >= cache_threshold of the request's tokens
  // (0.3: the default of SGLang's model gateway, cache_aware policy).
  double cache_threshold = 0.3;

  // INVALID_ARGUMENT naming the first bad field.
  Status Validate() const;
};

// A request sent back to the queue by Plan() for lack of KV pages.
struct Retraction {
  int64_t id = 0;
  int device = -1;   // where it ran
  int computed = 0;  // tokens it had computed (to be recomputed, less any cache hit)
};

// What the last Plan() scheduled, for telemetry.
struct PlanStats {
  int prefill_tokens = 0;
  int decode_tokens = 0;
  int batch_requests = 0;
  int preempted = 0;
  int admitted = 0;
  int cache_hit_tokens = 0;           // prompt tokens admitted requests reused from the cache
  int cache_query_tokens = 0;         // prompt tokens of the requests admitted
  std::vector<Retraction> retracted;  // this plan, in order
};

// One device's prefix cache, for telemetry (zeros when the cache is off).
struct CacheStats {
  RadixCacheStats tree;
  int64_t hit_tokens = 0;    // since start, this device
  int64_t query_tokens = 0;  // since start, this device
};

class Scheduler {
 public:
  // REQUIRES: options.Validate() is OK; pools non-empty, all with the same
  // page_size; state_pools empty (no device has linear layers) or one per
  // device (state_pools[d] is device d's); every pool outlives the scheduler.
  Scheduler(const SchedulerOptions& options, std::vector<KvPool*> pools,
            std::vector<StatePool*> state_pools = {});
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;
  // Frees the pages and state slots of every request still running.
  ~Scheduler();

  // Queues a request; returns its id (1, 2, ...). INVALID_ARGUMENT if the
  // prompt is empty, has a token outside the vocab, leaves no room under
  // max_seq, max_new_tokens < 1, or the request could not fit on any one
  // device even alone: its KV pages in the KvPool and, where the device needs
  // one, a slot in its StatePool (it would never be admitted). Nothing is
  // queued then.
  Result<int64_t> Submit(RequestSpec spec, int64_t arrival_us);

  // The next step's batch: decode seqs first, then prefill chunks. Empty when
  // there is nothing to do.
  BatchInput Plan();
  // Applies `out` (for the batch of the last Plan) at time `now_us` and
  // returns the requests that finished, with their pages and slots freed.
  // INTERNAL (nothing applied) if `out` does not match the planned batch.
  Result<std::vector<Request>> Commit(const StepOutput& out, int64_t now_us);

  // Removes a waiting or running request and returns it finished with
  // FinishReason::kCancelled (its computed prefix is published to the cache,
  // its pages and slots released). NOT_FOUND for an unknown or already
  // finished id. REQUIRES: not between Plan() and its Commit().
  Result<Request> Cancel(int64_t id, int64_t now_us);

  // Re-homing before a TP -> EP switch (rehome.h). RehomeItems lists the
  // running requests (admission order) with their pages; RehomeCapacities
  // what each device could hold (its pages and slots, counting what the
  // cache could evict). Rehome applies new homes (parallel to
  // RehomeItems(); equal entries stay): for each mover it allocates its
  // pages and slot on the new home (evicting cache there if needed), drops
  // its cache lock and unpublished checkpoint, frees its old pages and
  // slot, and returns the copies the runner must make before the next
  // step. Every allocation happens before any free, so no copy's
  // destination is another's source. A mover that does not fit stays home
  // (not an error). INVALID_ARGUMENT (nothing changed) for a size mismatch
  // or a device out of range; FAILED_PRECONDITION (nothing changed) between
  // a Plan() that scheduled seqs and its Commit(), whose batch holds the old
  // page tables. The runner must make the copies before the next step writes
  // anything: sources are already free (or unpinned in the old tree) and the
  // next Plan() may hand them out again.
  std::vector<RehomeItem> RehomeItems() const;
  std::vector<RehomeCapacity> RehomeCapacities() const;
  Result<std::vector<StateMove>> Rehome(const std::vector<int>& new_home);

  // Evicts every unlocked node of every device's cache; returns pages freed.
  // Once idle(), the pools are then exactly as constructed.
  int FlushCache();
  // Evicts `device`'s unlocked cached pages, least recently used first,
  // until `pages` more are free (whole leaves, so possibly a few more) or
  // none is left to evict; before a switch to a layout that holds fewer
  // pages. Returns the pages freed (0 with the cache off).
  int EvictCachePages(int device, int pages);
  bool prefix_cache() const { return !caches_.empty(); }
  CacheStats cache_stats(int device) const;

  // Devices [k*g, (k+1)*g) form prefill group k: each group takes at most
  // max(1, max_batch_tokens * g / P) prefill tokens per step (decode tokens
  // are not capped per group). g = P, the default, is one group with the
  // whole budget. Data-parallel attention runs a step as long as its
  // slowest group, so a shared budget one device can take whole makes
  // everyone wait on that device's prompt; SGLang divides
  // chunked_prefill_size by dp_size for the same reason. Admission skips
  // devices whose group's share is spent, unless a cache hit decides the
  // device (then the request waits for it). REQUIRES: g >= 1 divides P.
  void set_prefill_group(int g);
  int prefill_group() const { return prefill_group_; }
  int devices() const { return static_cast<int>(pools_.size()); }
  int running() const { return static_cast<int>(running_.size()); }
  int waiting() const { return static_cast<int>(waiting_.size()); }
  int running_on(int device) const;
  // The requests themselves, for progress reports: running in admission
  // order, waiting in queue order. Valid until the next Plan/Commit/Cancel.
  std::vector<const Request*> running_requests() const;
  std::vector<const Request*> waiting_requests() const;
  // Prompt tokens not yet prefilled: the rest of every running request's
  // chunked prompt and every waiting one's beyond the longest prefix a
  // device's cache holds now (a preempted request counts what it must
  // recompute), capped at max_batch_tokens, so at most what one step may
  // prefill. For the switch policy, which wants the load the next step
  // faces, arrivals included, before that step runs: a multi-turn request
  // whose history is cached costs only its new turn.
  int pending_prefill_tokens() const;
  // True when requests on `device` hold a recurrent-state slot.
  bool needs_slot(int device) const;
  bool idle() const { return running_.empty() && waiting_.empty(); }
  int64_t step() const { return step_; }
  int64_t finished_total() const { return finished_total_; }
  int64_t generated_total() const { return generated_total_; }
  int64_t preempted_total() const { return preempted_total_; }
  int64_t cancelled_total() const { return cancelled_total_; }
  int64_t cache_hit_tokens_total() const;
  const PlanStats& last_plan() const { return last_plan_; }
  const SchedulerOptions& options() const { return options_; }

 private:
  // Grows r's page table to cover `positions`; evicts cached pages, then
  // preempts, on exhaustion. Returns false if r itself was preempted.
  bool EnsurePages(Request* r, int positions);
  void Preempt(Request* r);
  // Returns r's pages and slots to its device's pools; with `publish`, its
  // computed prefix goes to the cache first.
  void Release(Request* r, bool publish);
  // Appends r's next `n` tokens to the batch and remembers them for Commit.
  void AddSeq(BatchInput* batch, Request* r, int n);
  // Moves r (running) out of running_ as a finished value.
  Request Retire(Request* r, FinishReason why, int64_t now_us);

  // prefix_sharing.cc: admission and the cache.
  // The longest prefix of r's tokens that a device's cache would give it if
  // admitted now (0 with the cache off); touches no cache.
  int CachedTokens(const Request& r) const;
  struct Placement {
    int device = -1;
    RadixCache::Match hit;
  };
  // Where the queue head goes: the longest hit among devices that can hold
  // it now (evicting cached pages/slots if needed), then most free pages.
  // The returned hit is already pinned. device -1: it must wait.
  Placement PickDevice(const Request& r);
  // Prefill tokens device d's group may still take in this Plan.
  int PrefillRoom(int d) const { return prefill_left_[d / prefill_group_]; }
  // Device d could take r now, reusing hit_pages cached pages.
  bool Fits(const Request& r, int d, int hit_pages) const;
  // Free pages (or slots) on device d, counting what the cache could evict.
  int AvailablePages(int d) const;
  int AvailableSlots(int d) const;
  // Takes the placement: the pinned hit, pages and slot. REQUIRES the
  // placement came from PickDevice for r in this Plan.
  void Admit(Request* r, Placement p);
  // The checkpoint boundary of r's next n tokens (0: none) and, for a hybrid
  // model, makes sure r has a checkpoint slot for it (0 if it cannot have one).
  int PlanCheckpoint(Request* r, int n);
  // Inserts r's tokens [0, len) (pages, and the checkpoint slot when
  // `with_slot`) into its device's cache and re-points r at the tree's pages.
  void Publish(Request* r, int len, bool with_slot);
  // Commit-time cache work for one planned seq.
  void CommitCheckpoint(Request* r, int ckpt_len, bool decode);

  struct Planned {
    Request* request;
    int tokens;
    bool sample;
    int ckpt_len;  // checkpoint boundary taken this step (0: none)
    bool decode;   // a decode token (publishes at finish) vs a prefill chunk (at once)
  };

  SchedulerOptions options_;
  std::vector<KvPool*> pools_;
  std::vector<StatePool*> state_pools_;  // empty, or parallel to pools_
  int page_size_;
  int64_t next_id_ = 1;
  int64_t step_ = 0;
  int64_t finished_total_ = 0;
  int64_t generated_total_ = 0;
  int64_t preempted_total_ = 0;
  int64_t cancelled_total_ = 0;
  std::vector<std::unique_ptr<RadixCache>> caches_;  // one per device, or empty (cache off)
  std::vector<int64_t> hit_tokens_, query_tokens_;   // per device
  std::deque<std::unique_ptr<Request>> waiting_;
  std::vector<std::unique_ptr<Request>> running_;  // in admission order (oldest first)
  std::vector<Planned> planned_;                   // parallel to the last Plan's seqs
  PlanStats last_plan_;
  int prefill_group_;              // set_prefill_group
  std::vector<int> prefill_left_;  // per group, this Plan: prefill tokens it may still take
};

}  // namespace sy::engine
