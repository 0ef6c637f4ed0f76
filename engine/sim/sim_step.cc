#include "engine/sim/sim_step.h"

#include <algorithm>
#include <cmath>

#include "engine/costmodel/interconnect.h"

namespace sy::engine {

namespace {

using costmodel::kActivationBytes;
using costmodel::KernelSeconds;

constexpr double kUs = 1e6;

}  // namespace

StepPricer::StepPricer(const SimOptions& sim, const ModelConfig& config, int devices)
    : config_(config), spec_(sim.model), devices_(devices), overlap_(sim.overlap) {
  const costmodel::Interconnect ic = costmodel::DescribeInterconnect(sim.hardware, devices);
  rates_ = costmodel::EffectiveRates(sim.hardware, sim.compute_dtype, sim.efficiency,
                                     ic.injection_bandwidth);
  profiled_ = costmodel::ProfileRates(sim.hardware, sim.compute_dtype, sim.kernels, rates_);
  full_rates_ = costmodel::AttentionRates(profiled_, spec_.attention, rates_);
  allreduce_latency_us_ = sim.allreduce_latency_us;
  all_to_all_latency_us_ = sim.all_to_all_latency_us;
  hops_ = ic.all_to_all_hops;
  full_ = costmodel::AttentionTermsOf(spec_, spec_.attention, 1);
  full_tp_ = costmodel::AttentionTermsOf(spec_, spec_.attention, devices);
  linear_ = costmodel::AttentionTermsOf(spec_, spec_.linear, 1);
  linear_tp_ = costmodel::AttentionTermsOf(spec_, spec_.linear, devices);
  attn_tp_ = std::max(1, sim.attention_tp);
  full_group_ = costmodel::AttentionTermsOf(spec_, spec_.attention, attn_tp_);
  linear_group_ = costmodel::AttentionTermsOf(spec_, spec_.linear, attn_tp_);
  expert_bytes_ = 3.0 * spec_.hidden * spec_.expert_inter * costmodel::DtypeBytes(sim.weight_dtype);
  dispatch_row_bytes_ = spec_.hidden * kActivationBytes;  // bf16 rows out and back
  names_[kAttnFull] = costmodel::AttentionKernelName(spec_.attention);
  names_[kAttnLinear] = costmodel::AttentionKernelName(spec_.linear);
  names_[kAttnAllReduce] = "attention_allreduce";
  names_[kRouter] = "router";
  names_[kDispatch] = "dispatch";
  names_[kExpert] = "expert_ffn";
  names_[kCombine] = "combine";
  names_[kShared] = "shared_expert";
  names_[kDense] = "dense_ffn";
  names_[kLmHead] = "lm_head";
  weight_bytes_ = costmodel::DtypeBytes(sim.weight_dtype);
}

// The cost model's attention kernel (cost_model.cc Attention) for one
// device: 1/parts of the load's FLOPs and weights (parts 1: the device's own
// seqs at full weights under EP), the cache split over cache_split devices.
StepPricer::Cost StepPricer::Attention(const costmodel::AttentionTerms& a,
                                       const costmodel::KernelRates& r, const DeviceLoad& l,
                                       int parts) const {
  const double tokens = l.tokens;
  if (tokens <= 0) return {};
  const double p = parts;
  Cost c;
  c.flops = (tokens * 2 * a.params + a.score_per_key * l.keys + a.score_per_token * tokens) / p;
  const double weights = a.params * kActivationBytes / p;
  const double cache = a.state_bytes_per_seq > 0 ? 2 * l.seqs * a.state_bytes_per_seq
                                                 : l.kv_tokens * a.kv_bytes_per_token;
  const double act = cache / a.cache_split + 2 * tokens * spec_.hidden * kActivationBytes;
  c.bytes = weights + act;
  c.tokens = tokens;
  c.us = KernelSeconds(r, c.flops, weights, act) * kUs;
  return c;
}

void StepPricer::Emit(int d, int layer, Kernel k, double start, double end, const Cost& c) {
  if (level_ == TraceLevel::kOff) return;
  // Times are >= 0: truncating x + 0.5 rounds, cheaper than llround.
  const int64_t s = static_cast<int64_t>(start + 0.5), e = static_cast<int64_t>(end + 0.5);
  if (level_ == TraceLevel::kFull) {
    telemetry::Span span;
    span.device = d;
    span.layer = layer;
    span.name = names_[k];
    span.kind = (k == kAttnAllReduce || k == kDispatch || k == kCombine) ? "comm" : "compute";
    span.start_us = t0_us_ + s;
    span.dur_us = e - s;
    span.tokens = std::llround(c.tokens);
    span.flops = std::llround(c.flops);
    span.bytes = std::llround(c.bytes);
    spans_->push_back(std::move(span));
    return;
  }
  Acc& a = acc_[static_cast<size_t>(d) * kKernels + k];
  if (a.first_us < 0) a.first_us = s;
  a.dur_us += e - s;
  a.flops += c.flops;
  a.bytes += c.bytes;
  a.tokens += c.tokens;
}

StepTiming StepPricer::Price(const std::vector<DeviceLoad>& loads,
                             const std::vector<std::vector<int64_t>>& counts, const ExpertMap& map,
                             ParallelMode mode, TraceLevel level, int64_t t0_us,
                             std::vector<telemetry::Span>* spans) {
  const int P = devices_;
  level_ = level;
  t0_us_ = t0_us;
  spans_ = spans;
  if (level == TraceLevel::kSummary) acc_.assign(static_cast<size_t>(P) * kKernels, Acc{});
  const bool tp = mode == ParallelMode::kTP && P > 1;
  const double h = spec_.hidden, E = spec_.experts, K = spec_.top_k;
  StepTiming out;

  // Attention groups: one of all P devices (TP), groups of attn_tp_ (EP).
  const int group_size = tp ? P : attn_tp_;
  group_.assign(P / group_size, DeviceLoad{});
  for (int d = 0; d < P; ++d) {
    DeviceLoad& g = group_[d / group_size];
    g.tokens += loads[d].tokens;
    g.seqs += loads[d].seqs;
    g.keys += loads[d].keys;
    g.kv_tokens += loads[d].kv_tokens;
    g.logit_rows += loads[d].logit_rows;
  }
  double N = 0, largest_group = 0;
  for (const DeviceLoad& g : group_) {
    N += g.tokens;
    largest_group = std::max(largest_group, g.tokens);
  }
  const costmodel::AttentionTerms& full_terms = tp               ? full_tp_
                                                : group_size > 1 ? full_group_
                                                                 : full_;
  const costmodel::AttentionTerms& linear_terms = tp               ? linear_tp_
                                                  : group_size > 1 ? linear_group_
                                                                   : linear_;
  // Layer-invariant kernels, once per step.
  for (auto* v : {&attn_full_, &attn_lin_, &router_, &shared_, &dense_, &lm_}) v->assign(P, {});
  const double shared_inter = double(spec_.shared_experts) * spec_.shared_inter;
  // What the MoE side of device d sees: its home seqs' tokens, or under EP
  // with attention groups 1/T of its group's (the attention output is
  // reduce-scattered over the group, sequence parallel, as seed 000's
  // sp-rs deployment runs it).
  const bool sequence_parallel = !tp && group_size > 1;
  moe_load_.resize(P);
  for (int d = 0; d < P; ++d) {
    moe_load_[d] = loads[d];
    if (!sequence_parallel) continue;
    const DeviceLoad& g = group_[d / group_size];
    moe_load_[d].tokens = g.tokens / group_size;
    moe_load_[d].logit_rows = g.logit_rows / group_size;
  }
  for (int d = 0; d < P; ++d) {
    const DeviceLoad& l = moe_load_[d];
    const DeviceLoad& g = group_size > 1 ? group_[d / group_size] : loads[d];
    attn_full_[d] = Attention(full_terms, full_rates_, g, group_size);
    if (config_.linear_layers() > 0) attn_lin_[d] = Attention(linear_terms, rates_, g, group_size);
    const double n = l.tokens;
    if (n <= 0) continue;
    auto price = [&](Cost* c, double flops, double weights, double act,
                     const costmodel::KernelRates& r) {
      c->flops = flops;
      c->bytes = weights + act;
      c->tokens = n;
      c->us = KernelSeconds(r, flops, weights, act) * kUs;
    };
    price(&router_[d], 2 * n * h * E, h * E * kActivationBytes, n * (h + E) * kActivationBytes,
          profiled_.router);
    if (shared_inter > 0) {
      price(&shared_[d], 6 * h * shared_inter * n, 3 * h * shared_inter * weight_bytes_,
            2 * n * h * kActivationBytes, rates_);
    }
    if (spec_.dense_layers > 0) {
      price(&dense_[d], 6 * h * spec_.dense_inter * n, 3 * h * spec_.dense_inter * kActivationBytes,
            2 * n * h * kActivationBytes, rates_);
    }
    if (l.logit_rows > 0) {
      const double r = l.logit_rows;
      price(&lm_[d], 2 * r * h * spec_.vocab, h * spec_.vocab * kActivationBytes,
            r * (h + spec_.vocab) * kActivationBytes, rates_);
      lm_[d].tokens = r;
    }
  }

  t_.assign(P, 0.0);
  rows_.assign(P, 0.0);
  touched_.assign(P, 0.0);
  double comm_bytes = 0;
  auto sync = [&] { return *std::max_element(t_.begin(), t_.end()); };
  // A collective on every device: starts at the slowest device's arrival.
  auto collective = [&](int layer, Kernel k, double us, const std::vector<double>* bytes,
                        double uniform_bytes, double leave_fraction) {
    const double start = sync();
    for (int d = 0; d < P; ++d) {
      Cost c;
      c.us = us;
      c.bytes = bytes != nullptr ? (*bytes)[d] : uniform_bytes;
      comm_bytes += c.bytes * leave_fraction;
      Emit(d, layer, k, start, start + us, c);
      t_[d] = start + us;
    }
  };
  std::vector<double>& link = link_;
  link.assign(P, 0.0);
  const double ring = 2.0 * (P - 1) / P;
  const double allreduce_bytes = N * h * kActivationBytes;
  const double allreduce_us =
      allreduce_latency_us_ + costmodel::LinkSeconds(rates_, allreduce_bytes, ring) * kUs;
  // The attention all-reduce within each group (all P devices under TP);
  // groups reduce at once, the largest one sets the time.
  const double group_ring = 2.0 * (group_size - 1) / group_size;
  const double attn_reduce_bytes = largest_group * h * kActivationBytes;
  const double attn_reduce_us =
      allreduce_latency_us_ + costmodel::LinkSeconds(rates_, attn_reduce_bytes, group_ring) * kUs;

  for (int layer = 0; layer < config_.layers; ++layer) {
    const bool full = config_.is_full_attention(layer);
    const std::vector<Cost>& attn = full ? attn_full_ : attn_lin_;
    for (int d = 0; d < P; ++d) {
      if (attn[d].tokens <= 0) continue;
      Emit(d, layer, full ? kAttnFull : kAttnLinear, t_[d], t_[d] + attn[d].us, attn[d]);
      t_[d] += attn[d].us;
    }
    if (group_size > 1 && N > 0) {
      collective(layer, kAttnAllReduce, attn_reduce_us, nullptr, attn_reduce_bytes, group_ring / 2);
    }
    if (!config_.is_moe(layer)) {
      for (int d = 0; d < P; ++d) {
        if (dense_[d].tokens <= 0) continue;
        Emit(d, layer, kDense, t_[d], t_[d] + dense_[d].us, dense_[d]);
        t_[d] += dense_[d].us;
      }
      continue;
    }
    if (N <= 0) continue;
    const double moe_start = sync();
    for (int d = 0; d < P; ++d) {
      if (router_[d].tokens <= 0) continue;
      Emit(d, layer, kRouter, t_[d], t_[d] + router_[d].us, router_[d]);
      t_[d] += router_[d].us;
    }
    // Rows and touched experts per device.
    const std::vector<int64_t>& c = counts[layer];
    double all_rows = 0, all_touched = 0;
    for (int e = 0; e < spec_.experts; ++e) {
      all_rows += double(c[e]);
      all_touched += c[e] > 0 ? 1 : 0;
    }
    std::fill(rows_.begin(), rows_.end(), 0.0);
    std::fill(touched_.begin(), touched_.end(), 0.0);
    if (!tp && map.slots() == map.experts()) {  // one replica each (every device has one)
      const std::vector<int>& row = map.phy2log_row(layer);
      const std::vector<int>& dev = map.slot_device_row();
      for (int s = 0; s < map.slots(); ++s) {
        const int64_t n = c[row[s]];
        rows_[dev[s]] += double(n);
        touched_[dev[s]] += n > 0 ? 1 : 0;
      }
    } else if (!tp) {
      const std::vector<int>& row = map.phy2log_row(layer);
      for (int s = 0; s < map.slots(); ++s) {
        const int e = row[s];
        const std::span<const int> reps = map.replicas(layer, e);
        int64_t n = c[e];
        if (reps.size() > 1) {
          const int64_t r = static_cast<int64_t>(reps.size());
          const int64_t j = std::find(reps.begin(), reps.end(), s) - reps.begin();
          n = c[e] / r + (j < c[e] % r ? 1 : 0);
        }
        const int d = map.slot_device(s);
        rows_[d] += double(n);
        touched_[d] += n > 0 ? 1 : 0;
      }
    }
    // dispatch / combine: EP all-to-all, each device max(sent, received)
    // rows; TP: no dispatch (every device holds every token after the
    // attention all-reduce), combine = all-reduce of the expert partials.
    double a2a_us = 0;
    if (!tp && P > 1) {
      for (int d = 0; d < P; ++d) {
        link[d] = std::max(moe_load_[d].tokens * K, rows_[d]) * dispatch_row_bytes_;
        a2a_us = std::max(a2a_us, costmodel::LinkSeconds(rates_, link[d], hops_) * kUs);
      }
      a2a_us += all_to_all_latency_us_;
    }
    const double combine_us = tp ? allreduce_us : a2a_us;
    // Expert FFN per device.
    std::vector<Cost>& expert = expert_;
    expert.assign(P, {});
    double slowest_math = 0;
    for (int d = 0; d < P; ++d) {
      const double rows = tp ? all_rows / P : rows_[d];
      const double touched = tp ? all_touched / P : touched_[d];
      const double act_rows = tp ? all_rows : rows_[d];
      Cost& x = expert[d];
      if (rows > 0) {
        x.flops = 6 * h * spec_.expert_inter * rows;
        const double w = touched * expert_bytes_, a = act_rows * 2 * h * kActivationBytes;
        x.bytes = w + a;
        x.tokens = act_rows;
        // Experts with rows here: a slice of every touched one under TP.
        const double groups = tp ? all_touched : touched_[d];
        const double width = tp ? double(spec_.expert_inter) / P : double(spec_.expert_inter);
        x.us = costmodel::ExpertSeconds(profiled_, x.flops, w, a, groups, width) * kUs;
      }
      slowest_math = std::max(slowest_math, t_[d] + x.us + shared_[d].us);
    }
    if (overlap_ == costmodel::Overlap::kHideComm) {
      const double start = sync();
      const double block = std::max(a2a_us + combine_us, slowest_math - start);
      for (int d = 0; d < P; ++d) {
        double t = start;
        if (a2a_us > 0) {
          Emit(d, layer, kDispatch, start, start + a2a_us, Cost{a2a_us, 0, link[d], rows_[d]});
          comm_bytes += link[d] * hops_fraction();
        }
        if (expert[d].us > 0) Emit(d, layer, kExpert, t, t + expert[d].us, expert[d]);
        t += expert[d].us;
        if (shared_[d].tokens > 0) Emit(d, layer, kShared, t, t + shared_[d].us, shared_[d]);
        if (combine_us > 0) {
          const double b = tp ? allreduce_bytes : link[d];
          Emit(d, layer, kCombine, start + block - combine_us, start + block,
               Cost{combine_us, 0, b, 0});
          comm_bytes += b * (tp ? ring / 2 : hops_fraction());
        }
        t_[d] = start + block;
      }
    } else {
      if (a2a_us > 0) collective(layer, kDispatch, a2a_us, &link, 0, hops_fraction());
      for (int d = 0; d < P; ++d) {
        if (expert[d].us <= 0) continue;
        Emit(d, layer, kExpert, t_[d], t_[d] + expert[d].us, expert[d]);
        t_[d] += expert[d].us;
      }
      if (combine_us > 0) {
        if (tp) {
          collective(layer, kCombine, combine_us, nullptr, allreduce_bytes, ring / 2);
        } else {
          collective(layer, kCombine, combine_us, &link, 0, hops_fraction());
        }
      }
      for (int d = 0; d < P; ++d) {
        if (shared_[d].tokens <= 0) continue;
        Emit(d, layer, kShared, t_[d], t_[d] + shared_[d].us, shared_[d]);
        t_[d] += shared_[d].us;
      }
    }
    out.moe_us += sync() - moe_start;
  }
  for (int d = 0; d < P; ++d) {
    if (lm_[d].tokens <= 0) continue;
    Emit(d, -1, kLmHead, t_[d], t_[d] + lm_[d].us, lm_[d]);
    t_[d] += lm_[d].us;
  }
  out.duration_us = sync();
  out.comm_bytes = std::llround(comm_bytes);

  if (level == TraceLevel::kSummary) {
    for (int d = 0; d < P; ++d) {
      for (int k = 0; k < kKernels; ++k) {
        const Acc& a = acc_[static_cast<size_t>(d) * kKernels + k];
        if (a.first_us < 0) continue;
        telemetry::Span span;
        span.device = d;
        span.layer = -1;
        span.name = names_[k];
        span.kind = (k == kAttnAllReduce || k == kDispatch || k == kCombine) ? "comm" : "compute";
        span.start_us = t0_us_ + a.first_us;
        span.dur_us = a.dur_us;
        span.tokens = std::llround(a.tokens);
        span.flops = std::llround(a.flops);
        span.bytes = std::llround(a.bytes);
        spans->push_back(std::move(span));
      }
    }
  }
  return out;
}

}  // namespace sy::engine
