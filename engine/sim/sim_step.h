// File: engine/sim/sim_step.h
//
// StepPricer: the timeline of one simulated step on P devices (internal to
// the SimRunner, sim_runner.h; docs/SIMULATION.md). It prices each device's
// kernels with the cost model's formulas (engine/costmodel/kernels.h) from
// what that device does in the step, and lays them out per device:
//
//   per layer:  attention (DP under EP: the device's home seqs, or with
//               SimOptions::attention_tp = T, 1/T of its group's seqs; TP:
//               1/P of every seq) -> [TP, or T > 1: attention all-reduce over
//               the P or T devices] -> router -> dispatch
//               -> expert_ffn -> combine -> shared_expert   (MoE layer)
//               or dense_ffn                                  (dense layer)
//   then        lm_head on each device's sampled rows.
//
// A compute kernel starts when its device is free; a collective (dispatch,
// combine, all-reduce) starts when the LAST device reaches it and lasts as
// long as its slowest device's transfer, so a device that waits shows idle
// time before it. Under EP, device d's expert_ffn computes the rows routed
// to the slots the ExpertMap gives it (a replicated expert's rows split
// evenly over its replicas), and its dispatch/combine transfer is
// max(rows it sends, rows it receives): a hot expert makes its device the
// straggler of both. Under TP every device computes 1/P of every row.
// Overlap::kHideComm runs each MoE block as max(dispatch + combine, the
// slowest device's expert + shared) after the router.
//
// Everything layer-invariant (attention, router, shared, dense, LM head per
// device) is priced once per step; per MoE layer the cost is O(slots +
// devices). Scratch buffers are kept between steps.
//
// Thread-safety: none (the runner thread).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/costmodel/kernels.h"
#include "engine/model/config.h"
#include "engine/moe/expert_map.h"
#include "engine/parallelism/expert_buffer.h"
#include "engine/sim/sim_runner.h"
#include "engine/trace/span_recorder.h"
#include "telemetry/protocol.h"

namespace sy::engine {

// What one device's home seqs bring to a step (data-parallel quantities).
struct DeviceLoad {
  double tokens = 0;      // new tokens
  double seqs = 0;        // seqs with at least one token
  double logit_rows = 0;  // seqs with sample = true (one LM-head row each)
  double keys = 0;        // sum over new tokens of the keys each sees (position + 1)
  double kv_tokens = 0;   // sum over seqs of start_pos + tokens: KV read and written
};

// The figures of one priced step.
struct StepTiming {
  double duration_us = 0;  // the slowest device's end (LM head included), no overhead
  double moe_us = 0;       // time spent in MoE blocks (router to shared expert), slowest device
  int64_t comm_bytes = 0;  // bytes the collectives moved off their devices
};

class StepPricer {
 public:
  // REQUIRES: sim's specs valid, devices >= 1, config == SimModelConfig(sim.model).
  StepPricer(const SimOptions& sim, const ModelConfig& config, int devices);

  // Prices one step. `loads`: per device; `counts`: [layers][experts] routed
  // rows (dense layers ignored); `map`: the live placement (EP). Spans at
  // `level` are appended to *spans with start times offset by t0_us (the
  // virtual clock at the step's start).
  StepTiming Price(const std::vector<DeviceLoad>& loads,
                   const std::vector<std::vector<int64_t>>& counts, const ExpertMap& map,
                   ParallelMode mode, TraceLevel level, int64_t t0_us,
                   std::vector<telemetry::Span>* spans);

  // Bytes of one routed expert's weights (3 x hidden x expert_inter at the
  // weight dtype), for the rebalance and switch pricing.
  double expert_bytes() const { return expert_bytes_; }
  const costmodel::KernelRates& rates() const { return rates_; }
  double all_to_all_hops() const { return hops_; }

 private:
  enum Kernel {
    kAttnFull,
    kAttnLinear,
    kAttnAllReduce,
    kRouter,
    kDispatch,
    kExpert,
    kCombine,
    kShared,
    kDense,
    kLmHead,
    kKernels
  };
  struct Cost {
    double us = 0, flops = 0, bytes = 0, tokens = 0;
  };
  struct Acc {  // kSummary: one kernel of one device over the step
    int64_t first_us = -1, dur_us = 0;
    double flops = 0, bytes = 0, tokens = 0;
  };

  // One device's 1/parts of the attention of `l` (a device's, a group's or
  // every seq's load).
  Cost Attention(const costmodel::AttentionTerms& a, const costmodel::KernelRates& r,
                 const DeviceLoad& l, int parts) const;
  // Records kernel k of device d in layer `layer` over [start, end) µs.
  void Emit(int d, int layer, Kernel k, double start, double end, const Cost& c);

  const ModelConfig config_;
  const costmodel::ModelSpec spec_;
  const int devices_;
  const costmodel::Overlap overlap_;
  costmodel::KernelRates rates_;       // the flat Efficiency rates
  costmodel::ProfiledRates profiled_;  // SimOptions::kernels (flat where empty)
  costmodel::KernelRates full_rates_;  // full attention's
  double allreduce_latency_us_ = 0, all_to_all_latency_us_ = 0;
  double hops_ = 0;  // all-to-all hop factor
  costmodel::AttentionTerms full_, linear_, full_tp_, linear_tp_;
  // EP layout: attention tensor parallel within groups of attn_tp_ devices
  // (SimOptions::attention_tp), data parallel across them.
  int attn_tp_ = 1;
  costmodel::AttentionTerms full_group_, linear_group_;
  double expert_bytes_ = 0, dispatch_row_bytes_ = 0, weight_bytes_ = 2;
  // The share of an all-to-all's bytes that leaves its device (uniform
  // destinations): (P - 1) / P. For comm_bytes, not for time (hops_ is).
  double hops_fraction() const { return double(devices_ - 1) / devices_; }
  const char* names_[kKernels] = {};

  // Per step (scratch kept between steps).
  TraceLevel level_ = TraceLevel::kOff;
  int64_t t0_us_ = 0;
  std::vector<telemetry::Span>* spans_ = nullptr;
  std::vector<Acc> acc_;   // [device * kKernels + kernel]
  std::vector<double> t_;  // per device: its clock within the step, µs
  std::vector<Cost> attn_full_, attn_lin_, router_, shared_, dense_, lm_;  // per device
  std::vector<DeviceLoad> group_;                                          // per attention group
  std::vector<DeviceLoad> moe_load_;  // per device: what its router, experts and LM head see
  std::vector<double> rows_, touched_, link_;  // per device, one MoE layer
  std::vector<Cost> expert_;                   // per device, one MoE layer
};

}  // namespace sy::engine
