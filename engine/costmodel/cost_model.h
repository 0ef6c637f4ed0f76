// File: engine/costmodel/cost_model.h
//
// An analytic cost model of one MoE serving step on P devices of a
// HardwareSpec (seed 000 §1; seed 003 §3.3, A1; seed 004), and of the
// TP <-> EP expert reshard (seed 003 eq. 6, 9-11). Every figure is per
// device; docs/COSTMODEL.md derives each formula and compares with the seeds.
//
//   StepOptions o{.phase = Phase::kPrefill, .tokens = 16384, .ep = 32,
//                 .compute_dtype = Dtype::kFp8, .weight_dtype = Dtype::kFp8};
//   ASSIGN_OR_RETURN(StepCost c, EstimateStep(hw, model, o));
//   for (const KernelCost& k : c.kernels) ...;   c.step_s
//   ASSIGN_OR_RETURN(ReshardCost r, EstimateReshard(hw, model, {.devices = 8}));
//
// Layout. P = devices (0: max(ep, tp)). Attention is tensor parallel over
// `tp` devices and data parallel over dp = P / tp groups; the routed experts
// are either expert parallel (ep == P: E/P whole experts per device, tokens
// reach them by all-to-all) or tensor parallel (ep == 1: every expert's
// intermediate dim split P ways, tokens all-gathered, outputs all-reduced:
// seed 003's TP layout). Shared experts, dense FFN layers, the router and the
// LM head are data parallel (full weights, N/P rows each).
//
// Per kernel and layer: compute_s = FLOPs / (peak(dtype) x eff.compute);
// hbm_s = (weight + activation bytes) / (HBM bandwidth x eff.hbm);
// link_s = bytes x hop factor / (injection bandwidth x eff.link);
// time_s = max(compute_s, hbm_s) + link_s (a kernel streams HBM under its
// math; a collective is pure link time). The efficiency factors default to 1:
// the figures are then the seeds' ideal lower bounds. With a KernelProfile
// (StepOptions::kernels) the kernels it covers take its measured rates and
// floors instead (catalog.h).
//
// Overlap rule (Overlap): kSerial adds every kernel of a layer; kHideComm
// takes an MoE block as router + max(dispatch + combine, expert + shared):
// the all-to-all runs under the expert math, as Fused MoE V2 (seed 000 §4)
// and two-batch overlap (seed 004) do. Step = sum over layers + LM head.
//
// Thread-safety: pure functions of their arguments.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/costmodel/catalog.h"
#include "engine/costmodel/interconnect.h"

namespace sy::engine::costmodel {

enum class Phase { kPrefill, kDecode };
enum class Overlap { kSerial, kHideComm };
// kAverageHops: all-to-all bytes x the topology's hop factor (seed 000's
// "avg-hop adjusted" bound). kInjectionOnly: hop factor 1 (seed 000's
// "injection bandwidth, ignoring hops and contention" bound).
enum class HopModel { kAverageHops, kInjectionOnly };
// Rows the shared expert runs on per device. kLocalTokens: the device's N/P
// tokens, once each. kRoutedRows: N x top_k / P, the routed rows, as seed
// 000 §1 counts it (412.3 GFLOP at 16,384 tokens, ep=32); see the docs.
enum class SharedRows { kLocalTokens, kRoutedRows };

// Fractions of peak a kernel reaches. 1.0 = ideal (the seeds' lower bounds).
struct Efficiency {
  double compute = 1.0;
  double hbm = 1.0;
  double link = 1.0;
};

struct StepOptions {
  Phase phase = Phase::kPrefill;
  int64_t tokens = 0;   // tokens in the step over all devices (decode: sequences)
  int64_t context = 0;  // prefill: prompt length (0: one prompt of `tokens`);
                        // decode: KV tokens per sequence (0: 4096)
  int ep = 1;
  int tp = 1;
  int devices = 0;                      // 0: max(ep, tp)
  Dtype compute_dtype = Dtype::kBf16;   // peak FLOP/s used for every kernel
  Dtype weight_dtype = Dtype::kBf16;    // routed and shared expert weights
  Dtype dispatch_dtype = Dtype::kBf16;  // rows sent by dispatch and combine
  // Attention, dense FFN, router, LM head weights and every other activation
  // are bf16; the KV cache bf16; linear-attention state fp32.
  int bts = 0;  // token-staging tile: expert weights are re-read once per
                // ceil(rows per expert / bts) tiles (seed 000); 0: read once
  Efficiency efficiency;
  // Measured rates and floors of attention (mha), router and experts, in
  // place of `efficiency` for those kernels (HardwareSpec::measured). Empty:
  // the flat factors everywhere.
  KernelProfile kernels = {};
  Overlap overlap = Overlap::kSerial;
  HopModel hops = HopModel::kAverageHops;
  SharedRows shared_rows = SharedRows::kLocalTokens;
};

// One kernel, per device, per layer it runs in.
struct KernelCost {
  std::string name;  // attention_mla | attention_mha | attention_gla | attention_kda |
                     // attention_allreduce | router | dispatch | expert_ffn | combine |
                     // shared_expert | dense_ffn | lm_head
  int layers = 0;    // layers per step it runs in (1 for lm_head)
  bool communication = false;
  double flops = 0;
  double weight_bytes = 0;      // HBM bytes of weights read
  double activation_bytes = 0;  // HBM bytes of activations, KV and state moved
  double link_bytes = 0;        // bytes this device sends (before the hop factor)
  double compute_s = 0;
  double weight_hbm_s = 0;  // weight_bytes alone over the HBM bandwidth
  double hbm_s = 0;
  double link_s = 0;
  double time_s = 0;  // floor + max(compute_s, hbm_s) + link_s (TimeExpert: catalog.h's rule)
};

struct StepCost {
  int devices = 0;
  int dp = 0;  // attention data-parallel groups (devices / tp)
  Interconnect interconnect;
  double hop_factor = 0;  // the one applied to all-to-all bytes
  std::vector<KernelCost> kernels;
  double moe_layer_s = 0;              // one MoE block after the overlap rule
  double step_s = 0;                   // the whole step
  double weight_bytes_per_device = 0;  // resident weights (memory, not traffic)
  double hbm_capacity = 0;             // per device

  // The kernel named `name`, or nullptr.
  const KernelCost* Find(const std::string& name) const;
};

// INVALID_ARGUMENT naming the option for tokens < 1, ep/tp/devices < 1, ep
// other than 1 or P, tp not dividing P, E not divisible by P under EP, a bad
// efficiency (not in (0, 1]) or bts < 0; the model's own Validate errors.
Result<StepCost> EstimateStep(const HardwareSpec& hw, const ModelSpec& model,
                              const StepOptions& options);

struct ReshardOptions {
  int devices = 8;                    // P, EP degree == TP degree
  Dtype weight_dtype = Dtype::kBf16;  // seed 003 eq. 10: BF16
  double link_efficiency = 0.70;      // seed 003 eq. 11: 70% of NVLink
};

struct ReshardCost {
  int devices = 0;
  double expert_bytes_per_device = 0;  // eq. 6/10: moe_layers * E * 3*H*I * bytes / P
  double bytes_moved = 0;              // eq. 9: (P-1)/P of it leaves the device
  double hop_factor = 0;               // all-to-all hops (switch: (P-1)/P)
  double effective_bandwidth = 0;      // injection x link_efficiency, bytes/s
  double time_s = 0;                   // eq. 11: expert bytes x hops / effective bw
};

// The weight-only TP <-> EP reshard (KV migration is not modelled).
// INVALID_ARGUMENT when devices < 2, E % P != 0 (seed 003 requires P | E), or
// link_efficiency not in (0, 1].
Result<ReshardCost> EstimateReshard(const HardwareSpec& hw, const ModelSpec& model,
                                    const ReshardOptions& options);

// Seed 004: per-device memory N_param / TP + (1 + k) N_hidden_state * TP is
// least at TP = sqrt(N_param / ((1 + k) N_hidden_state)). For a dense FFN
// layer: N_param = 3 * hidden * dense_inter, N_hidden_state = tokens per
// device * dense_inter. REQUIRES: the model has dense layers, tokens >= 1.
double MemoryOptimalDenseTp(const ModelSpec& model, int64_t tokens_per_device, double k);

}  // namespace sy::engine::costmodel
