// File: engine/costmodel/kernels.h
//
// The per-kernel pricing formulas of the cost model (cost_model.h), exposed
// so that the simulated backend (engine/sim/) prices one device's kernels
// with exactly the arithmetic EstimateStep uses: EstimateStep builds every
// KernelCost with these helpers, the sim builds its per-device ones with
// them too, and a uniform-routing sim step therefore equals EstimateStep's
// figure up to the sampling noise of the routing (tests/engine/sim).
//
//   KernelRates r = EffectiveRates(hw, Dtype::kBf16, eff, ic.injection_bandwidth);
//   KernelCost k{.name = "router", .flops = f, .weight_bytes = w, .activation_bytes = a};
//   TimeKernel(r, &k);          // compute_s, hbm_s, time_s = max(compute, hbm) + link_s
//
// Thread-safety: pure functions and plain values.
#pragma once

#include "engine/costmodel/catalog.h"
#include "engine/costmodel/cost_model.h"

namespace sy::engine::costmodel {

// Bytes per element of what is not a weight dtype choice: attention, dense
// and LM-head weights, activations and the KV cache are bf16; the
// linear-attention recurrent state is fp32.
inline constexpr double kActivationBytes = 2.0;
inline constexpr double kRecurrentStateBytes = 4.0;

// Effective per-device rates: peak x efficiency, plus a fixed floor per
// kernel (0 unless a measured KernelFit sets one).
struct KernelRates {
  double flops = 0;    // FLOP/s at the compute dtype
  double hbm = 0;      // bytes/s
  double link = 0;     // bytes/s one way (injection bandwidth)
  double floor_s = 0;  // added to every kernel priced at these rates
};
KernelRates EffectiveRates(const HardwareSpec& hw, Dtype compute_dtype, const Efficiency& e,
                           double injection_bandwidth);

// Fills k's compute_s, weight_hbm_s, hbm_s and time_s from its volumes and
// link_s: time_s = floor_s + max(compute_s, hbm_s) + link_s.
void TimeKernel(const KernelRates& r, KernelCost* k);
// TimeKernel's time_s of a kernel without link traffic, without building a
// KernelCost (the sim calls it per device, per layer, per step).
inline double KernelSeconds(const KernelRates& r, double flops, double weight_bytes,
                            double activation_bytes) {
  const double compute = flops / r.flops, hbm = (weight_bytes + activation_bytes) / r.hbm;
  return r.floor_s + (compute > hbm ? compute : hbm);
}

// The rates of the kernels a KernelProfile (catalog.h) covers; each is the
// flat rates where the profile is empty. Built once per configuration.
struct ProfiledRates {
  KernelRates attention_mha;  // full attention of kind kMha only
  KernelRates router;
  KernelRates expert;
  double per_expert_s = 0;
  double half_width = 0;
  bool serial = false;
};
ProfiledRates ProfileRates(const HardwareSpec& hw, Dtype compute_dtype, const KernelProfile& p,
                           const KernelRates& flat);
// The rates attention of `kind` is priced at.
inline const KernelRates& AttentionRates(const ProfiledRates& r, AttentionKind kind,
                                         const KernelRates& flat) {
  return kind == AttentionKind::kMha ? r.attention_mha : flat;
}
// One device's routed experts in one layer: `groups` experts with rows on
// it, `width` its share of an expert's intermediate dim (expert_inter under
// EP, expert_inter / P under TP). Fills compute_s, weight_hbm_s, hbm_s and
// time_s of *k from its volumes.
void TimeExpert(const ProfiledRates& r, double groups, double width, KernelCost* k);
// TimeExpert's time_s without a KernelCost.
double ExpertSeconds(const ProfiledRates& r, double flops, double weight_bytes,
                     double activation_bytes, double groups, double width);
// `bytes` x `hops` over the link rate (0 when either is <= 0).
double LinkSeconds(const KernelRates& r, double bytes, double hops);

// Weights (parameters) of one attention layer of `kind`.
double AttentionParams(const ModelSpec& m, AttentionKind kind);
// attention_mha | attention_mla | attention_kda | attention_gla.
const char* AttentionKernelName(AttentionKind kind);

// What one attention layer of `kind` costs per token, key and sequence.
// FLOPs of a token seeing `keys` keys: 2 x params + score_per_key x keys +
// score_per_token; HBM: the layer's weights (/ tp), the cache (KV read and
// written, or the recurrent state read and written) split over cache_split
// devices of a TP group, and the hidden state in and out.
struct AttentionTerms {
  double params = 0;
  double score_per_key = 0;        // full attention: QK^T and PV per key
  double score_per_token = 0;      // linear attention: state update and readout
  double kv_bytes_per_token = 0;   // full attention: one token's cache entry
  double state_bytes_per_seq = 0;  // linear attention: the recurrent state
  double cache_split = 1;          // TP devices the cache is split over
};
AttentionTerms AttentionTermsOf(const ModelSpec& m, AttentionKind kind, int tp);

}  // namespace sy::engine::costmodel
