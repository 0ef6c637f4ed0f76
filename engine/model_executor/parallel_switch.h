// File: engine/model_executor/parallel_switch.h
//
// The runner side of a TP <-> EP switch of the routed experts
// (ModelRunner::SwitchParallelism implements its contract with these), in
// three parts, so that model_runner.cc only publishes the job:
//
//   CheckSwitch     runner thread, before anything moves: the refusals
//                   (FAILED_PRECONDITION with the reason, nothing changed)
//   ReshardDevice   each device thread at once: checksum of the active
//                   layout, UnifiedExpertBuffer::Reshard (collective), and
//                   after a failure the checksum again (the buffer has rolled
//                   back: it must be bit-identical to before)
//   FoldSwitch      runner thread: the devices' figures into one SwitchStats
//                   and the outcome (OK, UNAVAILABLE rolled back, or INTERNAL
//                   when a rollback left a checksum changed)
//
// What moves: only routed-expert weights, inside each device's unified
// buffer (offset-by-one, one spare slot; engine/parallelism/expert_buffer.h).
// Attention, KV pages, recurrent state, the router and the shared expert
// stay where they are: attention is data-parallel in both layouts here, so
// state_ms is 0 (TP attention with KV / state redistribution is not built).
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

namespace sy::engine {

// One device's part of a switch.
struct DeviceSwitch {
  Status status;                 // Reshard's
  ReshardStats stats;            // Reshard's last_stats(), also after a failure
  uint64_t checksum_before = 0;  // active layout before the reshard
  uint64_t checksum_after = 0;   // the same layout after a failed reshard (rolled back)
  double checksum_ms = 0;        // both checksum passes
};

// FAILED_PRECONDITION naming the reason when `target` cannot be reached from
// the current layout: P does not divide the experts or expert_inter, the map
// has redundant experts (N > E: the TP layout holds each expert once), a
// device has no unified buffer (the model has no MoE layer, or the devices
// hold unequal slot counts). `buffers`: one per device, null where none.
Status CheckSwitch(const ModelConfig& config, const ExpertMap& map,
                   const std::vector<UnifiedExpertBuffer*>& buffers);

// On the device's thread, every device together (Reshard is a collective).
// `rec` may be null.
DeviceSwitch ReshardDevice(UnifiedExpertBuffer* buffer, ParallelMode target, Communicator* comm,
                           const FaultPlan* fault, SpanRecorder* rec);

// Folds the devices' parts (all P, rank order) into *stats (phase ms: max
// over devices; bytes_moved: sum of bytes_sent; gbps = bytes_moved /
// weights_ms; other_ms: the checksum passes, max over devices, plus the
// layout swap: total_ms - weights_ms - rollback_ms - checksum, >= 0).
// `total_ms`: the wall time of the whole switch. OK when every device
// resharded. Else, when every device's checksum_after equals its
// checksum_before: the first failed device's status (UNAVAILABLE from
// Reshard, naming layer, phase and rank) with stats->rolled_back. A
// checksum that differs: INTERNAL naming the device (the weights are not
// what they were: the caller must stop serving).
Status FoldSwitch(ParallelMode from, ParallelMode to, const std::vector<DeviceSwitch>& devices,
                  double total_ms, SwitchStats* stats);

}  // namespace sy::engine
