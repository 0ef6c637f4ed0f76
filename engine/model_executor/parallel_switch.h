// File: engine/model_executor/parallel_switch.h
//
// The runner side of a TP <-> EP switch (ModelRunner::SwitchParallelism
// implements its contract with these), in three parts, so that
// model_runner.cc only publishes the job:
//
//   CheckSwitch     runner thread, before anything moves: the refusals
//                   (FAILED_PRECONDITION with the reason, nothing changed)
//   ReshardDevice   each device thread at once: checksum of the active
//                   expert layout, the weights (UnifiedExpertBuffer::Reshard,
//                   a collective), then the request state (ReshardState:
//                   KV pages and recurrent-state slots, by head / latent
//                   block, engine/parallelism/state_reshard.h), and after a
//                   failure the checksum again
//   FoldSwitch      runner thread: the devices' figures into one SwitchStats
//                   and the outcome (OK, UNAVAILABLE rolled back, or INTERNAL
//                   when a rollback left a checksum changed)
//
// Failure atomicity: each half rolls itself back on every rank (its votes
// make a failure anywhere a failure everywhere). A weights failure leaves
// the state untouched; a state failure (state rolled back) is followed by
// the inverse weight reshard, so every device ends in the old layout; the
// weight checksum then proves the weights are bit-identical and the state
// reshard's own checksums prove every used page and slot is.
//
// Thread-safety: CheckSwitch and FoldSwitch on the runner thread between
// steps; ReshardDevice on device `buffer->rank()`'s thread, all P together.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "engine/distributed/communicator.h"
#include "engine/model/config.h"
#include "engine/model_executor/model_runner.h"
#include "engine/moe/expert_map.h"
#include "engine/parallelism/expert_buffer.h"
#include "engine/parallelism/state_reshard.h"
#include "engine/pools/kv_pool.h"
#include "engine/pools/state_move.h"
#include "engine/pools/state_pool.h"

namespace sy::engine {

// One device's part of a switch.
struct DeviceSwitch {
  Status status;                 // Reshard's
  ReshardStats stats;            // Reshard's last_stats(), also after a failure
  StateReshardStats state;       // ReshardState's (zeros when it did not run)
  double revert_ms = 0;          // the inverse weight reshard after a state failure
  uint64_t checksum_before = 0;  // active layout before the reshard
  uint64_t checksum_after = 0;   // the same layout after a failed reshard (rolled back)
  double checksum_ms = 0;        // both checksum passes
};

// How KV heads may lie across P devices under TP attention.
enum class KvHeadSplit {
  kEven,    // P divides the KV heads: the CPU runner's pools split them evenly
  kRepeat,  // also kv_heads dividing P, each head held by P / kv_heads devices
            // (Qwen3-235B: 4 KV heads on 8 GPUs), as real TP serving and the
            // cost model do: the simulated runner's rule
};

// The refusals of a switch that depend only on the model, the expert map and
// P, common to every runner (the CPU runner's CheckSwitch, the SimRunner's):
// FAILED_PRECONDITION naming the reason when P does not divide the experts
// or expert_inter, the map has redundant experts (N > E: the TP layout holds
// each expert once), or TP attention cannot split the state evenly (the MLA
// latent row or linear-attention heads of a hybrid model, the KV heads of
// another under `kv`). Every message starts "cannot switch parallelism: ".
Status CheckSwitchLayout(const ModelConfig& config, const ExpertMap& map, int devices,
                         KvHeadSplit kv);

// CheckSwitchLayout (KvHeadSplit::kEven) and then a device without a
// unified buffer (the model has no MoE layer, or the devices hold unequal
// slot counts). `buffers`: one per device, null where none.
Status CheckSwitch(const ModelConfig& config, const ExpertMap& map,
                   const std::vector<UnifiedExpertBuffer*>& buffers);

// On the device's thread, every device together (Reshard is a collective).
// `rec` may be null.
// `scratch`: the device's state-reshard buffers, kept between switches.
DeviceSwitch ReshardDevice(UnifiedExpertBuffer* buffer, KvPool* kv, StatePool* state,
                           StateReshardScratch* scratch, ParallelMode target, Communicator* comm,
                           const FaultPlan* fault, SpanRecorder* rec);

// Folds the devices' parts (all P, rank order) into *stats (phase ms: max
// over devices; bytes_moved / state_bytes: sums of bytes_sent; gbps =
// bytes_moved / weights_ms, state_gbps = state_bytes / state_ms; kv_pages /
// state_slots: sums over homes; other_ms: total_ms - weights_ms - state_ms
// - rollback_ms, at least the checksum passes).
// `total_ms`: the wall time of the whole switch. OK when every device
// resharded. Else, when every device's checksum_after equals its
// checksum_before: the first failed device's status (UNAVAILABLE from
// Reshard, naming layer, phase and rank) with stats->rolled_back. A
// checksum that differs: INTERNAL naming the device (the weights are not
// what they were: the caller must stop serving).
Status FoldSwitch(ParallelMode from, ParallelMode to, const std::vector<DeviceSwitch>& devices,
                  double total_ms, SwitchStats* stats);

// Copies re-homed requests' state (Algorithm 4 step 2, engine/scheduler/
// rehome.h) between steps, on the runner thread: each move's pages and slot
// from its old home's ids to its new home's. Sharded pools (TP): on every
// device its block, storage page from * N + p -> to * N + p' (no
// communication: every device already holds its block of every home).
// Unsharded (EP): whole pages from the old home's pool into the new one's.
// INVALID_ARGUMENT (nothing copied) for a device, page or slot out of range
// or page lists of different lengths. REQUIRES: no step runs; the
// destinations are free and distinct from every source (Scheduler::Rehome).
Status MoveRequestState(const std::vector<StateMove>& moves, const std::vector<KvPool*>& kv,
                        const std::vector<StatePool*>& state);

// MoveRequestState's refusals, for `devices` homes of `pages` KV pages and
// `slots` state slots each (0: the model has no recurrent state), so that
// every runner refuses the same moves with the same words.
Status CheckStateMoves(const std::vector<StateMove>& moves, int devices, int pages, int slots);

}  // namespace sy::engine
