// File: console/collect/kernel_trace.h
//
// What the Kernels view reads out of spans and kernel stats, as pure
// functions so they are tested without a panel:
//
//   * KernelWindowRows: KernelStats of several steps -> one row per kernel
//     (share of summed time, per-call mean, time per step mean/p50/p99).
//   * CommOverlapPerDevice: one step's spans -> per device, how much
//     communication ran while the same device computed (hidden) and how much
//     did not (exposed, on the critical path). Seed 000 section 6 reads a
//     MoE kernel this way: "most scatter/gather traffic is hidden under the
//     routed expert window; only the scatter lead and gather tail remain".
//   * LayerKindBreakdown: one step's spans -> time per layer, split into
//     compute and comm (and the exposed part of that comm).
//
// Times are microseconds. Overlap is measured on each device's own
// timeline: comm on device 0 is not hidden by compute on device 1.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "console/collect/snapshot.h"
#include "telemetry/protocol.h"

namespace sy::console {

// One row per (name, kind) over `steps`, by total time descending (ties by
// name). Per step, a kernel's time is its total over the devices that
// reported in that step divided by their number; steps where it did not run
// count as 0 for its mean and percentiles. Empty input gives no rows.
std::vector<KernelRow> KernelWindowRows(const std::deque<telemetry::KernelStats>& steps);

struct CommOverlap {
  int device = 0;
  int64_t compute_us = 0;  // union of the device's compute spans
  int64_t comm_us = 0;     // union of its comm spans
  int64_t hidden_us = 0;   // comm time during which the device also computed
  int64_t exposed_us = 0;  // comm_us - hidden_us
  int64_t busy_us = 0;     // union of both: time the device did anything
};

// One entry per device that has spans, ordered by device.
std::vector<CommOverlap> CommOverlapPerDevice(const std::vector<telemetry::Span>& spans);
// The devices' figures summed (device = -1).
CommOverlap CommOverlapTotal(const std::vector<CommOverlap>& per_device);

struct LayerKindRow {
  int layer = -1;          // -1: kernels outside the layer stack (embed, lm_head, ...)
  int64_t compute_us = 0;  // summed span durations over all devices
  int64_t comm_us = 0;
  int64_t exposed_us = 0;  // the part of comm_us not overlapped by the
                           // same device's compute
  int kernels = 0;         // spans
  std::string top;         // the compute kernel with the most time here
};

// Layers in ascending order, then -1 last. Durations are summed over
// devices (not unions), so overlapping spans both count.
std::vector<LayerKindRow> LayerKindBreakdown(const std::vector<telemetry::Span>& spans);

}  // namespace sy::console
