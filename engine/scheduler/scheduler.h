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
//      left of the budget (chunked prefill; `sample` only on the final chunk).
//   3. waiting requests are admitted FCFS while budget and max_running allow.
//      The candidate device is the one with the most free pages among those
//      with a free state slot (or needing none); it must hold the whole
//      prompt plus the reserve. When no device has a free slot, or the
//      candidate lacks pages, the head of the queue blocks the rest (no
//      overtaking, so no starvation). Admission is skipped in a step that
//      preempted.
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

  // INVALID_ARGUMENT naming the first bad field.
  Status Validate() const;
};

// What the last Plan() scheduled, for telemetry.
struct PlanStats {
  int prefill_tokens = 0;
  int decode_tokens = 0;
  int batch_requests = 0;
  int preempted = 0;
  int admitted = 0;
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

  int devices() const { return static_cast<int>(pools_.size()); }
  int running() const { return static_cast<int>(running_.size()); }
  int waiting() const { return static_cast<int>(waiting_.size()); }
  int running_on(int device) const;
  // True when requests on `device` hold a recurrent-state slot.
  bool needs_slot(int device) const;
  bool idle() const { return running_.empty() && waiting_.empty(); }
  int64_t step() const { return step_; }
  int64_t finished_total() const { return finished_total_; }
  int64_t generated_total() const { return generated_total_; }
  int64_t preempted_total() const { return preempted_total_; }
  const PlanStats& last_plan() const { return last_plan_; }
  const SchedulerOptions& options() const { return options_; }

 private:
  // Grows r's page table to cover `positions`; preempts on exhaustion.
  // Returns false if r itself was preempted.
  bool EnsurePages(Request* r, int positions);
  void Preempt(Request* r);
  // Returns r's pages and slot to its device's pools.
  void Release(Request* r);
  // Admission candidate: most free pages among the devices with a free slot
  // (or needing none); -1 if every device is out of slots.
  int PickDevice() const;
  // Appends r's next `n` tokens to the batch and remembers them for Commit.
  void AddSeq(BatchInput* batch, Request* r, int n);

  struct Planned {
    Request* request;
    int tokens;
    bool sample;
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
  std::deque<std::unique_ptr<Request>> waiting_;
  std::vector<std::unique_ptr<Request>> running_;  // in admission order (oldest first)
  std::vector<Planned> planned_;                   // parallel to the last Plan's seqs
  PlanStats last_plan_;
};

}  // namespace sy::engine
