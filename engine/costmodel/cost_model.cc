#include "engine/costmodel/cost_model.h"

#include "engine/costmodel/kernels.h"

#include <algorithm>
#include <cmath>

namespace sy::engine::costmodel {
namespace {

constexpr double kBf16 = kActivationBytes;  // attention/dense weights, activations, KV cache
constexpr int64_t kDecodeContext = 4096;

struct Ctx {
  const HardwareSpec& hw;
  const ModelSpec& m;
  const StepOptions& o;
  int P, tp, dp;
  double N;    // tokens
  double S;    // sequences
  double L;    // context (prefill: prompt length)
  double hop;  // all-to-all hop factor
  KernelRates rates;
  ProfiledRates profiled;
};

// Fills the times of `k` from its volumes.
void Time(const Ctx& c, KernelCost& k) { TimeKernel(c.rates, &k); }

// Link time of `bytes` at the injection bandwidth, times `hops`.
double LinkSeconds(const Ctx& c, double bytes, double hops) {
  return costmodel::LinkSeconds(c.rates, bytes, hops);
}

KernelCost Attention(const Ctx& c, AttentionKind kind, int layers) {
  const ModelSpec& m = c.m;
  KernelCost k{.name = AttentionKernelName(kind), .layers = layers};
  const AttentionTerms a = AttentionTermsOf(m, kind, c.tp);
  const bool prefill = c.o.phase == Phase::kPrefill;
  // Mean keys a query sees: causal prefill (L + 1) / 2, decode L.
  const double ctx = prefill ? (c.L + 1) / 2 : c.L;
  const double score = a.score_per_key * ctx + a.score_per_token;
  k.flops = c.N * (2 * a.params + score) / c.P;
  k.weight_bytes = a.params * kBf16 / c.tp;
  const double group_tokens = c.N / c.dp, group_seqs = c.S / c.dp;
  double cache = 0;
  if (a.state_bytes_per_seq > 0) {
    cache = 2 * group_seqs * a.state_bytes_per_seq;  // read and write the recurrent state
  } else if (prefill) {
    cache = group_tokens * a.kv_bytes_per_token;  // write the prompt's KV
  } else {
    cache = group_seqs * (c.L * a.kv_bytes_per_token + a.kv_bytes_per_token);  // read, write one
  }
  k.activation_bytes = cache / a.cache_split + 2 * group_tokens * m.hidden * kBf16;
  TimeKernel(AttentionRates(c.profiled, kind, c.rates), &k);
  return k;
}

}  // namespace

KernelRates EffectiveRates(const HardwareSpec& hw, Dtype compute_dtype, const Efficiency& e,
                           double injection_bandwidth) {
  return {.flops = hw.peak_flops(compute_dtype) * e.compute,
          .hbm = hw.hbm_bandwidth() * e.hbm,
          .link = injection_bandwidth * e.link};
}

void TimeKernel(const KernelRates& r, KernelCost* k) {
  k->compute_s = k->flops / r.flops;
  k->weight_hbm_s = k->weight_bytes / r.hbm;
  k->hbm_s = (k->weight_bytes + k->activation_bytes) / r.hbm;
  k->time_s = r.floor_s + std::max(k->compute_s, k->hbm_s) + k->link_s;
}

ProfiledRates ProfileRates(const HardwareSpec& hw, Dtype compute_dtype, const KernelProfile& p,
                           const KernelRates& flat) {
  ProfiledRates r{.attention_mha = flat, .router = flat, .expert = flat};
  if (p.empty()) return r;
  auto rates = [&](const KernelFit& f) {
    return KernelRates{.flops = hw.peak_flops(compute_dtype) * f.compute,
                       .hbm = hw.hbm_bandwidth() * f.hbm,
                       .link = flat.link,
                       .floor_s = f.floor_us * 1e-6};
  };
  r.attention_mha = rates(p.attention);
  r.router = rates(p.router);
  r.expert = rates(p.expert);
  r.per_expert_s = p.per_expert_us * 1e-6;
  r.half_width = p.half_width;
  r.serial = p.serial;
  return r;
}

namespace {

// Small per-expert GEMMs fill few tiles: w / (w + half_width) of the rate.
double ExpertComputeSeconds(const ProfiledRates& r, double flops, double width) {
  const double fill = r.half_width > 0 && width > 0 ? width / (width + r.half_width) : 1.0;
  return flops / (r.expert.flops * fill);
}

double ExpertTime(const ProfiledRates& r, double compute_s, double hbm_s, double groups) {
  const double body = r.serial ? compute_s + hbm_s : std::max(compute_s, hbm_s);
  return r.expert.floor_s + groups * r.per_expert_s + body;
}

}  // namespace

void TimeExpert(const ProfiledRates& r, double groups, double width, KernelCost* k) {
  k->compute_s = ExpertComputeSeconds(r, k->flops, width);
  k->weight_hbm_s = k->weight_bytes / r.expert.hbm;
  k->hbm_s = (k->weight_bytes + k->activation_bytes) / r.expert.hbm;
  k->time_s = ExpertTime(r, k->compute_s, k->hbm_s, groups) + k->link_s;
}

// Per device, per MoE layer, per step in the sim: no KernelCost built.
double ExpertSeconds(const ProfiledRates& r, double flops, double weight_bytes,
                     double activation_bytes, double groups, double width) {
  return ExpertTime(r, ExpertComputeSeconds(r, flops, width),
                    (weight_bytes + activation_bytes) / r.expert.hbm, groups);
}

double LinkSeconds(const KernelRates& r, double bytes, double hops) {
  if (bytes <= 0 || hops <= 0) return 0;
  return bytes * hops / r.link;
}

// Attention weights of one layer (params). MLA without its small norms/gate.
double AttentionParams(const ModelSpec& m, AttentionKind kind) {
  const double h = m.hidden;
  switch (kind) {
    case AttentionKind::kMha: {
      const double q = double(m.heads) * m.head_dim, kv = double(m.kv_heads) * m.head_dim;
      return h * (q + 2 * kv) + q * h;
    }
    case AttentionKind::kMla: {
      const double qk = double(m.heads) * (m.qk_nope_head_dim + m.qk_rope_head_dim);
      double p = m.q_lora_rank > 0 ? h * m.q_lora_rank + double(m.q_lora_rank) * qk : h * qk;
      p += h * (m.kv_lora_rank + m.qk_rope_head_dim);
      p += double(m.kv_lora_rank) * m.heads * (m.qk_nope_head_dim + m.v_head_dim);
      return p + double(m.heads) * m.v_head_dim * h;
    }
    case AttentionKind::kKda:
    case AttentionKind::kGla:
      return 6 * h * m.heads * m.linear_head_dim;  // q, k, v, f, g, o
  }
  return 0;
}

const char* AttentionKernelName(AttentionKind kind) {
  switch (kind) {
    case AttentionKind::kMha:
      return "attention_mha";
    case AttentionKind::kMla:
      return "attention_mla";
    case AttentionKind::kKda:
      return "attention_kda";
    case AttentionKind::kGla:
      return "attention_gla";
  }
  return "attention";
}

AttentionTerms AttentionTermsOf(const ModelSpec& m, AttentionKind kind, int tp) {
  AttentionTerms a;
  a.params = AttentionParams(m, kind);
  if (kind == AttentionKind::kMha) {
    a.score_per_key = 4.0 * m.heads * m.head_dim;
    a.kv_bytes_per_token = 2.0 * m.kv_heads * m.head_dim * kBf16;
    a.cache_split = std::min(tp, m.kv_heads);
  } else if (kind == AttentionKind::kMla) {
    a.score_per_key = 2.0 * m.heads * (m.qk_nope_head_dim + m.qk_rope_head_dim + m.v_head_dim);
    a.kv_bytes_per_token = double(m.kv_lora_rank + m.qk_rope_head_dim) * kBf16;  // not split
  } else {
    const double d = m.linear_head_dim;
    a.score_per_token = 4.0 * m.heads * d * d;  // state update k^T v and readout q S
    a.state_bytes_per_seq = m.heads * d * d * kRecurrentStateBytes;
    a.cache_split = std::min(tp, m.heads);
  }
  return a;
}

const KernelCost* StepCost::Find(const std::string& name) const {
  for (const KernelCost& k : kernels) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

Result<StepCost> EstimateStep(const HardwareSpec& hw, const ModelSpec& m, const StepOptions& o) {
  RETURN_IF_ERROR(m.Validate());
  if (o.tokens < 1) return InvalidArgument("tokens must be >= 1");
  if (o.ep < 1 || o.tp < 1 || o.devices < 0) {
    return InvalidArgument("ep and tp must be >= 1 and devices >= 0");
  }
  const int P = o.devices > 0 ? o.devices : std::max(o.ep, o.tp);
  if (o.ep != 1 && o.ep != P) {
    return InvalidArgument("ep must be 1 (experts tensor parallel) or equal to the devices (" +
                           std::to_string(P) + ", expert parallel); got " + std::to_string(o.ep));
  }
  if (P % o.tp != 0) {
    return InvalidArgument("tp " + std::to_string(o.tp) + " must divide the devices " +
                           std::to_string(P));
  }
  if (o.ep == P && P > 1 && m.experts % P != 0) {
    return InvalidArgument("expert parallel needs the devices (" + std::to_string(P) +
                           ") to divide the experts (" + std::to_string(m.experts) + ")");
  }
  const Efficiency& e = o.efficiency;
  for (double f : {e.compute, e.hbm, e.link}) {
    if (!(f > 0 && f <= 1)) return InvalidArgument("efficiency factors must be in (0, 1]");
  }
  if (o.bts < 0) return InvalidArgument("bts must be >= 0");
  if (o.context < 0) return InvalidArgument("context must be >= 0");

  StepCost out;
  out.devices = P;
  out.dp = P / o.tp;
  out.interconnect = DescribeInterconnect(hw, P);
  out.hop_factor = o.hops == HopModel::kAverageHops ? out.interconnect.all_to_all_hops : 1.0;
  out.hbm_capacity = hw.hbm_capacity();
  Ctx c{hw,
        m,
        o,
        P,
        o.tp,
        out.dp,
        double(o.tokens),
        0,
        0,
        out.hop_factor,
        EffectiveRates(hw, o.compute_dtype, o.efficiency, out.interconnect.injection_bandwidth),
        {}};
  c.profiled = ProfileRates(hw, o.compute_dtype, o.kernels, c.rates);
  if (o.phase == Phase::kPrefill) {
    c.L = o.context > 0 ? double(o.context) : c.N;
    c.S = std::max(1.0, c.N / c.L);
  } else {
    c.L = o.context > 0 ? double(o.context) : double(kDecodeContext);
    c.S = c.N;
  }
  const double h = m.hidden, N = c.N, K = m.top_k, E = m.experts;
  const bool ep_layout = o.ep == P && P > 1;
  const double wb = DtypeBytes(o.weight_dtype), db = DtypeBytes(o.dispatch_dtype);

  std::vector<KernelCost>& ks = out.kernels;
  ks.push_back(Attention(c, m.attention, m.full_attention_layers()));
  if (m.linear_layers() > 0) ks.push_back(Attention(c, m.linear, m.linear_layers()));
  if (o.tp > 1) {  // o_proj partial sums over the TP group (ring all-reduce)
    KernelCost k{.name = "attention_allreduce", .layers = m.layers, .communication = true};
    k.link_bytes = N / out.dp * h * kBf16;
    k.link_s = LinkSeconds(c, k.link_bytes, 2.0 * (o.tp - 1) / o.tp);
    Time(c, k);
    ks.push_back(k);
  }
  const int moe = m.moe_layers();
  {
    KernelCost k{.name = "router", .layers = moe};
    k.flops = 2 * (N / P) * h * E;
    k.weight_bytes = h * E * kBf16;
    k.activation_bytes = (N / P) * (h + E) * kBf16;
    TimeKernel(c.profiled.router, &k);
    ks.push_back(k);
  }
  const double rows = N * K / P;  // routed rows a device sends (and, balanced, receives)
  KernelCost dispatch{.name = "dispatch", .layers = moe, .communication = true};
  KernelCost combine{.name = "combine", .layers = moe, .communication = true};
  if (ep_layout) {  // all-to-all out and back (seed 000 §1)
    dispatch.link_bytes = combine.link_bytes = rows * h * db;
    dispatch.link_s = combine.link_s = LinkSeconds(c, rows * h * db, c.hop);
  } else if (P > 1) {  // TP layout: all-gather across DP groups, all-reduce after (seed 003)
    dispatch.link_bytes = N * h * db;
    dispatch.link_s = LinkSeconds(c, dispatch.link_bytes, double(out.dp - 1) / out.dp);
    combine.link_bytes = N * h * kBf16;
    combine.link_s = LinkSeconds(c, combine.link_bytes, 2.0 * (P - 1) / P);
  }
  Time(c, dispatch);
  Time(c, combine);
  {
    KernelCost k{.name = "expert_ffn", .layers = moe};
    k.flops = 6 * h * m.expert_inter * N * K / P;
    // Each expert is read once per token-staging tile, and only if any row
    // reaches it: P(no row) = (1 - 1/E)^(N*K) with uniform routing.
    const double rows_per_expert = N * K / E;
    const double tiles = o.bts > 0 ? std::max(1.0, std::ceil(rows_per_expert / o.bts)) : 1.0;
    const double touched = 1 - std::pow(1 - 1 / E, N * K);
    k.weight_bytes = E * 3 * h * m.expert_inter * wb / P * touched * tiles;
    k.activation_bytes = (ep_layout ? rows : N * K) * 2 * h * kBf16;
    // Experts with rows on a device: its E/P under EP, a slice of every
    // touched one under TP.
    const double groups = (ep_layout ? E / P : E) * touched;
    TimeExpert(c.profiled, groups, ep_layout ? m.expert_inter : double(m.expert_inter) / P, &k);
    ks.push_back(dispatch);
    ks.push_back(k);
    ks.push_back(combine);
  }
  if (m.shared_experts > 0) {
    KernelCost k{.name = "shared_expert", .layers = moe};
    const double r = o.shared_rows == SharedRows::kRoutedRows ? rows : N / P;
    const double inter = double(m.shared_experts) * m.shared_inter;
    k.flops = 6 * h * inter * r;
    k.weight_bytes = 3 * h * inter * wb;
    k.activation_bytes = 2 * r * h * kBf16;
    Time(c, k);
    ks.push_back(k);
  }
  if (m.dense_layers > 0) {
    KernelCost k{.name = "dense_ffn", .layers = m.dense_layers};
    k.flops = 6 * h * m.dense_inter * N / P;
    k.weight_bytes = 3 * h * m.dense_inter * kBf16;
    k.activation_bytes = 2 * (N / P) * h * kBf16;
    Time(c, k);
    ks.push_back(k);
  }
  {
    KernelCost k{.name = "lm_head", .layers = 1};
    const double logit_rows = o.phase == Phase::kPrefill ? c.S : N;  // last token per prompt
    k.flops = 2 * (logit_rows / P) * h * m.vocab;
    k.weight_bytes = h * m.vocab * kBf16;
    k.activation_bytes = (logit_rows / P) * (h + m.vocab) * kBf16;
    Time(c, k);
    ks.push_back(k);
  }

  // Overlap rule: one MoE block, then the whole step.
  auto t = [&](const char* name) {
    const KernelCost* k = out.Find(name);
    return k ? k->time_s : 0.0;
  };
  const double comm = t("dispatch") + t("combine");
  const double math = t("expert_ffn") + t("shared_expert");
  out.moe_layer_s =
      t("router") + (o.overlap == Overlap::kHideComm ? std::max(comm, math) : comm + math);
  out.step_s = out.moe_layer_s * moe;
  for (const KernelCost& k : ks) {
    const bool moe_block = k.name == "router" || k.name == "dispatch" || k.name == "expert_ffn" ||
                           k.name == "combine" || k.name == "shared_expert";
    if (!moe_block) out.step_s += k.time_s * k.layers;
  }

  // Resident weights per device: attention (TP-sharded), experts (1/P each),
  // shared, dense, router, embedding + LM head.
  double w = 0;
  w += AttentionParams(m, m.attention) * kBf16 / o.tp * m.full_attention_layers();
  if (m.linear_layers() > 0) w += AttentionParams(m, m.linear) * kBf16 / o.tp * m.linear_layers();
  w += moe * (E * 3 * h * m.expert_inter * wb / P + h * E * kBf16 +
              3 * h * double(m.shared_experts) * m.shared_inter * wb);
  w += m.dense_layers * 3 * h * double(m.dense_inter) * kBf16;
  w += 2 * h * m.vocab * kBf16;
  out.weight_bytes_per_device = w;
  return out;
}

Result<ReshardCost> EstimateReshard(const HardwareSpec& hw, const ModelSpec& m,
                                    const ReshardOptions& o) {
  RETURN_IF_ERROR(m.Validate());
  const int P = o.devices;
  if (P < 2) return InvalidArgument("a reshard needs devices >= 2, got " + std::to_string(P));
  if (m.experts % P != 0) {
    return InvalidArgument("the devices (" + std::to_string(P) + ") must divide the experts (" +
                           std::to_string(m.experts) + ") for the EP layout");
  }
  if (!(o.link_efficiency > 0 && o.link_efficiency <= 1)) {
    return InvalidArgument("link efficiency must be in (0, 1]");
  }
  ReshardCost r;
  r.devices = P;
  const Interconnect ic = DescribeInterconnect(hw, P);
  r.expert_bytes_per_device = double(m.moe_layers()) * m.experts * 3.0 * m.hidden * m.expert_inter *
                              DtypeBytes(o.weight_dtype) / P;
  r.bytes_moved = r.expert_bytes_per_device * (P - 1) / P;
  r.hop_factor = ic.all_to_all_hops;
  r.effective_bandwidth = ic.injection_bandwidth * o.link_efficiency;
  r.time_s = r.effective_bandwidth > 0
                 ? r.expert_bytes_per_device * r.hop_factor / r.effective_bandwidth
                 : 0;
  return r;
}

double MemoryOptimalDenseTp(const ModelSpec& m, int64_t tokens_per_device, double k) {
  const double n_param = 3.0 * m.hidden * m.dense_inter;
  const double n_hidden = double(tokens_per_device) * m.dense_inter;
  return std::sqrt(n_param / ((1 + k) * n_hidden));
}

}  // namespace sy::engine::costmodel
