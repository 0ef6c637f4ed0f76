// File: engine/model_executor/model_runner.h
//
// ModelRunner: runs one forward step of the MoE transformer over P virtual
// devices, each a worker thread that owns its shard of the weights and its own
// KvPool. Attention is data-parallel (a request's KV lives on exactly one
// device, the one the scheduler assigned); the MoE is expert-parallel: an
// ExpertMap (engine/moe/expert_map.h) places each layer's N >= E physical
// expert slots on the devices (default: device d holds experts
// {e : e % P == d}); each token is dispatched (all-to-all) to a replica of
// each of its top-k experts, computed there, and combined back
// (all-to-all) to its home device. Embedding, attention, norms, router, the
// shared expert and the LM head are replicated on every device.
// SwitchParallelism moves the engine to the tensor-parallel layout (every
// device a 1/P slice of every expert, partials all-reduced; attention state
// split by head, or MLA latent column, over all devices, attention/
// tp_batch.h) and back, between steps; outputs are bit-identical in both
// layouts.
//
//   auto runner = ModelRunner::Create(config, {.devices = 4, .seed = 1});
//   StepOutput out = runner->Step(batch, TraceLevel::kFull).value();
//
// Output for a request does not depend on P, nor on which device holds it,
// beyond float summation-order noise (tested in model_runner_test).
//
// Thread-safety: Step, the accessors and Commit/AbortStagedExpertLayer are
// called from one thread (the scheduler's, "the runner thread"); Step
// blocks until all device workers finish the step. StageExpertLayer alone
// may run on another thread, also during a Step.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/status.h"
#include "engine/attention/linear_attention.h"
#include "engine/model/config.h"
#include "engine/moe/expert_map.h"
#include "engine/parallelism/expert_buffer.h"
#include "engine/pools/kv_pool.h"
#include "engine/pools/state_move.h"
#include "engine/pools/state_pool.h"
#include "engine/trace/span_recorder.h"
#include "telemetry/protocol.h"

namespace sy::engine {

class Checkpoint;

struct ModelRunnerOptions {
  int devices = 4;
  uint64_t seed = 1;  // built weights are a pure function of (config, seed)
  // When set, weights are loaded from it instead (its config must equal the
  // runner's); it must outlive Create.
  const Checkpoint* checkpoint = nullptr;
  int kv_pages_per_device = 512;
  int page_size = 16;
  // Recurrent-state slots per device (hybrid models; ignored otherwise):
  // the most requests a device can hold at once.
  int state_slots_per_device = 64;
  // KDA/GLA layers: tokens per chunk of the chunk-wise prefill, and whether
  // prefill uses it or the token-by-token recurrence (benchmarks compare).
  int linear_chunk = 64;
  PrefillMode linear_prefill = PrefillMode::kChunked;
  // Routed-expert placement (engine/moe/expert_map.h): phy2log rows, one per
  // model layer (dense layers' rows are ignored), N = row length >= experts
  // physical slots, N / devices on each device (device-major). Empty: the
  // round-robin map without redundant experts. N > experts gives N - E
  // redundant experts (exact copies). INVALID_ARGUMENT from Create for a row
  // ExpertMap::DeviceMajor refuses. (The "= {}" lets designated
  // initializers omit the field under -Wmissing-field-initializers.)
  std::vector<std::vector<int>> expert_phy2log = {};
  // Skewed routing (issue 6: makes load imbalance visible on tiny models): a
  // router bias skew * log(1 / (rank + 1)) added to every MoE layer's logits,
  // where rank is the expert's place in a pseudo-random order fixed by
  // (layer, step / drift_steps) (EpMoeLayer's RouterSkew), so the hot experts
  // differ by layer, fall on devices by chance and move every drift_steps
  // steps (0: never). skew = 0 (default) adds nothing and changes no number.
  double router_skew = 0.0;
  int skew_drift_steps = 0;
};

// Rebalance figures for one layer (StageExpertLayer + CommitExpertLayer).
struct ExpertMoveStats {
  int layer = 0;
  int experts_moved = 0;     // slots whose logical expert changed, over all devices
  int64_t bytes_copied = 0;  // expert weight bytes written into staging slots
  int64_t peer_bytes = 0;    // of which read from another device's memory
  double stage_ms = 0;       // StageExpertLayer wall time
  double commit_ms = 0;      // CommitExpertLayer wall time (the serving pause)
};

// One switch of the routed experts' layout (SwitchParallelism). Times are
// wall-clock ms, the max over devices of each phase summed over layers.
struct SwitchStats {
  ParallelMode from = ParallelMode::kEP;
  ParallelMode to = ParallelMode::kEP;
  int layers = 0;         // MoE layers resharded (0 when already in `to`)
  double weights_ms = 0;  // the reshard: permute + exchange + place (+ votes)
  double permute_ms = 0, exchange_ms = 0, place_ms = 0;
  double state_ms = 0;       // KV pages + recurrent-state slots (state_reshard.h), wall time
  double other_ms = 0;       // the rest: layout swap, checksum verification
  double rollback_ms = 0;    // after a failure
  double total_ms = 0;       // the whole pause, wall clock
  int64_t bytes_moved = 0;   // weight payload bytes sent between devices, all devices
  double gbps = 0;           // bytes_moved / weights_ms, GB/s
  int64_t state_bytes = 0;   // KV / state payload bytes sent between devices, all devices
  double state_gbps = 0;     // state_bytes / state_ms, GB/s
  int kv_pages = 0;          // used KV pages moved, all homes (each moves once, split P ways)
  int state_slots = 0;       // used recurrent-state slots moved, all homes
  bool rolled_back = false;  // a failure: every device is back in `from`, checksums equal
};

// One request's slice of a step: a prompt chunk (prefill) or one token (decode).
struct SeqInput {
  int64_t request_id = 0;
  int device = 0;               // home device (DP attention rank)
  std::vector<int32_t> tokens;  // the new tokens, positions start_pos.. start_pos+n-1
  int start_pos = 0;            // tokens already in the KV cache for this request
  std::vector<int32_t> pages;   // page table; covers start_pos + tokens.size() positions
  int state_slot = -1;          // recurrent-state slot on `device` (hybrid models), else -1
  // Prefix cache, hybrid models only (seed 002 §2.1; -1 / 0 otherwise). The
  // scheduler decides, the runner copies tensor contents on the device's
  // worker before the first layer:
  // state_copy_from: before this step, copy this slot (a prefix-cache
  //   checkpoint on `device`, holding the state after exactly start_pos
  //   tokens) into state_slot, which it overwrites whole; the checkpoint is
  //   only read. REQUIRES: start_pos > 0 (a seq at 0 starts from zeros).
  int state_copy_from = -1;
  // checkpoint_slot: snapshot the linear-attention state after the first
  //   `checkpoint_len` tokens of the sequence (recurrent and conv state of
  //   every linear layer) into this slot on `device`, overwriting it whole.
  //   The seq's own outputs and state_slot are unchanged by this (up to float
  //   rounding). REQUIRES: start_pos < checkpoint_len <= start_pos + tokens.size().
  int checkpoint_slot = -1;
  int checkpoint_len = 0;
  bool sample = true;        // produce a next token (false for a non-final prefill chunk)
  float temperature = 0.0f;  // 0: greedy
  uint64_t sample_seed = 0;  // temperature sampling RNG seed for this position
};

struct BatchInput {
  int64_t step = 0;
  std::vector<SeqInput> seqs;
};

struct SeqOutput {
  int64_t request_id = 0;
  int32_t next_token = -1;  // -1 when !sample
};

struct StepOutput {
  std::vector<SeqOutput> outputs;                   // same order as BatchInput::seqs
  std::vector<std::vector<int64_t>> expert_counts;  // [layer][expert] routed tokens this step
  std::vector<telemetry::Span> spans;               // all devices; empty at TraceLevel::kOff
  int64_t comm_bytes = 0;                           // bytes moved by collectives this step
};

class ModelRunner {
 public:
  // INVALID_ARGUMENT if the config is invalid, devices < 1, a pool size is
  // < 1, expert_phy2log is refused by ExpertMap::DeviceMajor (its message),
  // router_skew is negative or not finite, or skew_drift_steps < 0.
  static Result<std::unique_ptr<ModelRunner>> Create(const ModelConfig& config,
                                                     const ModelRunnerOptions& options);
  virtual ~ModelRunner() = default;

  // INVALID_ARGUMENT if a seq names a bad device, a token outside the vocab,
  // a page table too short for its positions, or (hybrid models) no valid
  // state slot; or if its prefix-cache fields are wrong: state_copy_from or
  // checkpoint_slot set on a model without linear layers, outside the
  // device's slots, equal to its state_slot or to each other,
  // state_copy_from with start_pos == 0, checkpoint_len outside
  // (start_pos, start_pos + tokens.size()] or set without a checkpoint_slot;
  // or if, on one device, a slot is written by two seqs (state_slot or
  // checkpoint_slot) or a copy source is written in the same step. Nothing
  // is written then. A seq with start_pos == 0 starts from a zeroed state
  // slot; one with state_copy_from from a copy of that slot.
  virtual Result<StepOutput> Step(const BatchInput& batch, TraceLevel level) = 0;

  // Full next-token logits of the last token of each seq (for tests and
  // sampling checks), also for seqs with sample=false. This is a full forward:
  // it writes K/V exactly as Step does. Same validation as Step.
  virtual Result<std::vector<std::vector<float>>> Logits(const BatchInput& batch) = 0;

  virtual const ModelConfig& config() const = 0;
  virtual int devices() const = 0;
  virtual KvPool& kv_pool(int device) = 0;
  // Recurrent-state pool of `device`; empty (0 slots) for models without linear layers.
  virtual StatePool& state_pool(int device) = 0;
  // expert id -> device of its first replica in the first MoE layer.
  virtual std::vector<int> expert_device() const = 0;
  // The live placement; changes only in CommitExpertLayer.
  virtual const ExpertMap& expert_map() const = 0;

  // Live expert rebalance, one layer at a time (engine/eplb/rebalancer.h
  // drives it). StageExpertLayer copies, on every device, the weights of
  // `layer`'s new row into that device's staging slot (the spare slot of
  // its UnifiedExpertBuffer), reading each expert from this device if it
  // holds it under the current map, else from the device of its first
  // replica. It may run on any thread WHILE Step runs on the runner thread:
  // it only reads live expert slots (which Step only reads) and writes
  // staging slots (which Step never reads). CommitExpertLayer, on the runner
  // thread between steps, copies each device's staging slot over its live
  // slot of `layer` and replaces the map row; its time is the serving pause.
  // At most one layer is staged at a time: Stage(l), Commit(l), Stage(l')...
  // FAILED_PRECONDITION (nothing changed) when the devices hold unequal slot
  // counts (no unified buffer: N % devices != 0, or the shape does not fit
  // one), when the experts are in the TP layout, when another layer is
  // staged and not committed (Stage) or none is (Commit), or for a dense
  // layer; INVALID_ARGUMENT for a row ExpertMap::SetLayer refuses.
  // Only slots whose expert changes are staged and copied (experts_moved,
  // bytes_copied). Commit also fails (FAILED_PRECONDITION, the staging
  // dropped) when the expert buffers were resharded since the Stage.
  // `fail_after_bytes` >= 0 injects a failure (tests): staging stops once
  // it has copied that many bytes (if the layer needs more) and returns
  // UNAVAILABLE "injected ..."; the map and every live slot are unchanged
  // and nothing is staged. AbortStagedExpertLayer during a Stage on another
  // thread makes that Stage stop and return UNAVAILABLE "... aborted".
  virtual Result<ExpertMoveStats> StageExpertLayer(int layer, const std::vector<int>& phy2log_row,
                                                   int64_t fail_after_bytes = -1) = 0;
  virtual Result<ExpertMoveStats> CommitExpertLayer(int layer) = 0;
  // Drops a staged, uncommitted row (nothing live changes). OK when none.
  virtual void AbortStagedExpertLayer() = 0;
  virtual SpanRecorder::Clock::time_point epoch() const = 0;

  // The layout (Moebius, seed 003; docs/PARALLELISM.md).
  // EP: each device owns whole experts (ExpertMap), tokens go to them by
  // all-to-all; attention is data-parallel (a request's KV pages and state
  // slot live on its home device). TP: every device holds a 1/P slice of
  // every expert's intermediate dimension (the UnifiedExpertBuffer's TP
  // alias), computes its slice for every device's tokens, and the slices
  // are all-reduced; every device holds its block of every request's
  // attention state (MHA: KV heads; MLA: latent columns; KDA/GLA: heads)
  // and runs that block's attention core for every request. In both, a
  // request's home device runs its embedding, norms, projections, router,
  // shared expert and LM head, and page tables and slot ids mean the same.
  // Greedy outputs are the same in both layouts.
  virtual ParallelMode parallel_mode() const = 0;
  // Consecutive devices that share each request's per-token work in the
  // current layout (its projections and attention). The scheduler caps each
  // such group's prefill tokens per step at its share of the step budget
  // (Scheduler::set_prefill_group), so data-parallel attention is not made
  // to wait on one device that took a whole budget of prompt. This default,
  // the CPU runner's, is one group (the budget uncapped per device): its
  // home devices run a request's projections in both layouts, so they could
  // gain from the cap too, but it was made for the sim's clusters and has
  // not been measured on the CPU backend.
  virtual int prefill_group() const { return devices(); }
  // Runner thread, between steps: reshards every device's expert buffer to
  // `target` (UnifiedExpertBuffer::Reshard on all device threads at once),
  // then its KV pages and state slots (ReshardState, engine/parallelism/
  // state_reshard.h), and runs later steps in that layout (engine/
  // model_executor/parallel_switch.h). Already in `target`: OK, layers 0,
  // nothing runs. FAILED_PRECONDITION, nothing changed, when the shape has
  // no unified buffer or cannot be TP (replicas, P not dividing E,
  // expert_inter, kv_heads, the MLA latent row or the linear heads) or an
  // expert layer is being staged or is staged ("a rebalance is in
  // progress"); while the switch runs, StageExpertLayer on another thread is
  // refused. UNAVAILABLE (the reshard's message) when the switch failed
  // part-way (`fault`, tests; FaultPlan::part picks weights or state):
  // every device rolled back, its weight checksum verified equal to the one
  // taken before and every used page and slot verified unchanged, still in
  // the old layout; last_switch() says rolled_back. INTERNAL if a checksum
  // differs after a rollback (a bug: Step and Logits then return that
  // INTERNAL). Costs one checksum pass over the weights (other_ms), two
  // after a failure, and one over the used state each way.
  virtual Result<SwitchStats> SwitchParallelism(ParallelMode target,
                                                const FaultPlan* fault = nullptr) = 0;
  // Seed 003 §7.1's capacity check, before a switch is started: OK when
  // `target` can hold every resident request's KV pages and state slots,
  // else FAILED_PRECONDITION saying which device overflows (what
  // SwitchParallelism would refuse with). This runner's pools hold the same
  // pages in both readings, so always OK here; the sim's TP layout holds
  // fewer when KV heads are replicated (engine/sim/sim_runner.h).
  virtual Status CheckLayoutCapacity(ParallelMode target) const {
    (void)target;
    return Status::Ok();
  }
  // Per device, the KV pages in use beyond what `target` holds (0 where
  // they fit; empty: both layouts hold the same pages, as here). Pages the
  // prefix cache holds unpinned count as in use: the engine evicts that many
  // of them before a switch (docs/SIMULATION.md "Capacity check").
  virtual std::vector<int> LayoutOverflowPages(ParallelMode target) const {
    (void)target;
    return {};
  }
  // Runner thread, between steps: carries out re-homed requests' copies
  // (Scheduler::Rehome, engine/scheduler/rehome.h) in either layout
  // (parallel_switch.h MoveRequestState). INVALID_ARGUMENT, nothing
  // copied, for an id out of range.
  virtual Status MoveRequestState(const std::vector<StateMove>& moves) = 0;
  // The figures of the last SwitchParallelism that ran a reshard, also of a
  // failed one (a Result that is an error carries no value): phases,
  // bytes_moved, rolled_back. Default SwitchStats before any.
  virtual const SwitchStats& last_switch() const = 0;
  // Device `device`'s routed-expert storage (null where the shape has none),
  // for figures: bytes(), Checksum(), the layout's memory. Read only, on the
  // runner thread between steps.
  virtual const UnifiedExpertBuffer* expert_buffer(int device) const = 0;
};

}  // namespace sy::engine
