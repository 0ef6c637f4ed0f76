#include "engine/moe/ep_moe.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cmath>
#include <cstring>

#include "engine/model/layers.h"
#include "engine/moe/router.h"

namespace sy::engine {

namespace {

// Integers travel inside float payloads bit-for-bit (never converted).
float IntBits(int32_t v) { return std::bit_cast<float>(v); }
int32_t BitsInt(float f) { return std::bit_cast<int32_t>(f); }

}  // namespace

EpMoeLayer::EpMoeLayer(const ModelConfig& config, int rank, const ExpertMap* map,
                       Communicator* comm, RouterSkew skew)
    : config_(config),
      rank_(rank),
      map_(map),
      comm_(comm),
      hidden_(config.hidden),
      top_k_(config.top_k),
      skew_(skew) {
  assert(map->devices() == comm->size() && map->experts() == config.experts);
  send_.resize(comm->size());
  recv_.resize(comm->size());
  back_.resize(comm->size());
  ret_.resize(comm->size());
}

void EpMoeLayer::Forward(int layer, const LayerWeights& w, const float* x, int tokens, float* out,
                         SpanRecorder* rec, int64_t* counts) {
  views_.clear();
  for (int e : map_->LocalExperts(layer, rank_)) views_.push_back(ViewOf(w.experts[e]));
  Forward(layer, w, views_.data(), x, tokens, out, rec, counts);
}

void EpMoeLayer::Forward(int layer, const LayerWeights& w, const SwigluView* slots, const float* x,
                         int tokens, float* out, SpanRecorder* rec, int64_t* counts) {
  Route(w, x, tokens, rec, layer, counts);
  comm_->AllToAll(rank_, send_, &recv_, rec, "dispatch", layer);
  RunExperts(slots, rec, layer);
  comm_->AllToAll(rank_, back_, &ret_, rec, "combine", layer);
  Reduce(w, x, tokens, out, rec, layer);
}

void EpMoeLayer::Route(const LayerWeights& w, const float* x, int tokens, SpanRecorder* rec,
                       int layer, int64_t* counts) {
  const int h = hidden_, e_count = config_.experts;
  for (auto& s : send_) s.clear();
  ids_.resize(static_cast<size_t>(tokens) * top_k_);
  weights_.resize(ids_.size());
  if (tokens == 0) return;
  SpanRecorder::Scope span(
      rec, "router", layer, tokens, 2LL * tokens * h * e_count + 4LL * tokens * e_count,
      4LL * (static_cast<int64_t>(h) * e_count + static_cast<int64_t>(tokens) * h));
  logits_.resize(static_cast<size_t>(tokens) * e_count);
  Gemm(x, w.router.data(), logits_.data(), tokens, h, e_count);
  if (skew_.skew != 0.0) AddSkew(layer, tokens);
  if (config_.router == RouterKind::kSigmoidGrouped) {
    // routed_scaling_factor is applied here, inside the router, and nowhere else.
    const GroupedRouting r{.experts = e_count,
                           .top_k = top_k_,
                           .n_group = config_.n_group,
                           .topk_group = config_.topk_group,
                           .renormalize = config_.norm_topk_prob,
                           .scaling = config_.routed_scaling_factor};
    RouteGroupedSigmoid(logits_.data(), w.expert_bias.data(), tokens, r, ids_.data(),
                        weights_.data());
  } else {
    RouteTopK(logits_.data(), tokens, e_count, top_k_, config_.norm_topk_prob, ids_.data(),
              weights_.data());
  }
  // Layout pass (DeepEP's "notify" metadata): the j-th row for expert e goes
  // to the replica ExpertMap::Replica picks, as that device's local slot.
  sent_.assign(e_count, 0);
  for (int t = 0; t < tokens; ++t) {
    const float* xr = x + static_cast<size_t>(t) * h;
    for (int k = 0; k < top_k_; ++k) {
      const int slot = t * top_k_ + k;
      const int e = ids_[slot];
      if (counts) counts[e] += 1;
      const int phys = map_->Replica(layer, e, sent_[e]++, rank_);
      const int dev = map_->slot_device(phys);
      std::vector<float>& buf = send_[dev];
      buf.push_back(IntBits(phys - map_->device_first_slot(dev)));
      buf.push_back(IntBits(slot));
      buf.push_back(weights_[slot]);
      buf.insert(buf.end(), xr, xr + h);
    }
  }
}

void EpMoeLayer::AddSkew(int layer, int tokens) {
  const int e_count = config_.experts;
  const int64_t drift = skew_.drift_steps > 0 ? step_ / skew_.drift_steps : 0;
  // The hot order is a pseudo-random permutation per (layer, drift epoch):
  // experts sorted by a hash, so hot experts land on devices as chance has it
  // (a fixed stride would spread them evenly over a round-robin placement).
  skew_rank_.resize(e_count);
  for (int e = 0; e < e_count; ++e) skew_rank_[e] = e;
  const auto key = [&](int e) {
    uint64_t z = (static_cast<uint64_t>(layer) << 40) ^ (static_cast<uint64_t>(drift) << 16) ^
                 static_cast<uint64_t>(e);
    z += 0x9E3779B97F4A7C15ULL;  // splitmix64 finaliser
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  };
  std::sort(skew_rank_.begin(), skew_rank_.end(),
            [&](int a, int b) { return key(a) < key(b); });
  skew_bias_.resize(e_count);
  for (int rank = 0; rank < e_count; ++rank) {
    skew_bias_[skew_rank_[rank]] =
        static_cast<float>(skew_.skew * std::log(1.0 / static_cast<double>(rank + 1)));
  }
  for (int t = 0; t < tokens; ++t) {
    float* lg = &logits_[static_cast<size_t>(t) * e_count];
    for (int e = 0; e < e_count; ++e) lg[e] += skew_bias_[e];
  }
}

void EpMoeLayer::RunExperts(const SwigluView* slots, SpanRecorder* rec, int layer) {
  const int h = hidden_, p = comm_->size();
  const int s_count = map_->device_slots(rank_);
  const size_t row = kDispatchHeader + h;
  slot_rows_.assign(s_count, 0);
  int total = 0;
  for (int s = 0; s < p; ++s) {
    const size_t n = recv_[s].size() / row;
    for (size_t i = 0; i < n; ++i) {
      const int ls = BitsInt(recv_[s][i * row]);
      assert(ls >= 0 && ls < s_count && "a row was dispatched to a slot this device lacks");
      slot_rows_[ls] += 1;
    }
    total += static_cast<int>(n);
    back_[s].resize(n * (kCombineHeader + h));
  }
  row_src_.resize(total);
  row_idx_.resize(total);
  row_w_.resize(total);
  row_slot_.resize(total);
  if (total == 0) return;

  SpanRecorder::Scope span(rec, "expert_ffn", layer, total);
  // Group rows by local slot (stable: by source rank, then arrival order).
  slot_offset_.assign(s_count + 1, 0);
  for (int k = 0; k < s_count; ++k) slot_offset_[k + 1] = slot_offset_[k] + slot_rows_[k];
  std::vector<int>& cursor = slot_rows_;  // reused as the per-slot fill cursor
  for (int k = 0; k < s_count; ++k) cursor[k] = slot_offset_[k];
  xin_.resize(static_cast<size_t>(total) * h);
  for (int s = 0; s < p; ++s) {
    const size_t n = recv_[s].size() / row;
    for (size_t i = 0; i < n; ++i) {
      const float* r = &recv_[s][i * row];
      const int g = cursor[BitsInt(r[0])]++;
      row_src_[g] = s;
      row_idx_[g] = static_cast<int>(i);
      row_slot_[g] = BitsInt(r[1]);
      row_w_[g] = r[2];
      std::memcpy(&xin_[static_cast<size_t>(g) * h], r + kDispatchHeader, h * sizeof(float));
    }
  }
  yout_.resize(static_cast<size_t>(total) * h);
  const int inter = config_.expert_inter;
  int64_t bytes = 0;
  for (int k = 0; k < s_count; ++k) {
    const int off = slot_offset_[k], n = slot_offset_[k + 1] - off;
    if (n == 0) continue;
    const SwigluView& ew = slots[k];
    assert(ew.present() && "a token was dispatched to a slot without weights");
    assert(ew.inter == inter);
    act_.resize(std::max(act_.size(), static_cast<size_t>(n) * 2 * inter));
    // SwigluFfn's kernels on the view: the same calls on the same numbers.
    Gemm(&xin_[static_cast<size_t>(off) * h], ew.gate_up, act_.data(), n, h, 2 * inter);
    SiluMul(act_.data(), n, inter);
    GemmLda(act_.data(), 2 * inter, ew.down, &yout_[static_cast<size_t>(off) * h], n, inter, h);
    bytes += 3LL * h * inter * sizeof(float);
  }
  // Weighted outputs back into each source's combine payload, in its dispatch order.
  for (int g = 0; g < total; ++g) {
    float* dst = &back_[row_src_[g]][static_cast<size_t>(row_idx_[g]) * (kCombineHeader + h)];
    dst[0] = IntBits(row_slot_[g]);
    const float* y = &yout_[static_cast<size_t>(g) * h];
    const float wt = row_w_[g];
    for (int i = 0; i < h; ++i) dst[kCombineHeader + i] = y[i] * wt;
  }
  span.set_flops(6LL * total * h * inter);
  span.set_bytes(bytes + 2LL * total * h * static_cast<int64_t>(sizeof(float)));
}

void EpMoeLayer::Reduce(const LayerWeights& w, const float* x, int tokens, float* out,
                        SpanRecorder* rec, int layer) {
  if (tokens == 0) return;
  const int h = hidden_;
  const int s_inter = w.shared.present() ? w.shared.inter : 0;
  SpanRecorder::Scope span(
      rec, "shared_expert", layer, tokens, 6LL * tokens * h * s_inter + 1LL * tokens * top_k_ * h,
      4LL * (3LL * h * s_inter + static_cast<int64_t>(tokens) * h * (top_k_ + 2)));
  routed_.resize(static_cast<size_t>(tokens) * top_k_ * h);
  const size_t row = kCombineHeader + h;
  for (const std::vector<float>& buf : ret_) {
    const size_t n = buf.size() / row;
    for (size_t i = 0; i < n; ++i) {
      const int slot = BitsInt(buf[i * row]);
      std::memcpy(&routed_[static_cast<size_t>(slot) * h], &buf[i * row + kCombineHeader],
                  h * sizeof(float));
    }
  }
  // Fixed summation order (top-k rank) keeps the result independent of P.
  for (int t = 0; t < tokens; ++t) {
    float* o = out + static_cast<size_t>(t) * h;
    const float* r0 = &routed_[static_cast<size_t>(t) * top_k_ * h];
    std::memcpy(o, r0, h * sizeof(float));
    for (int k = 1; k < top_k_; ++k) {
      const float* rk = r0 + static_cast<size_t>(k) * h;
      for (int i = 0; i < h; ++i) o[i] += rk[i];
    }
  }
  if (s_inter > 0) {
    act_.resize(std::max(act_.size(), static_cast<size_t>(tokens) * 2 * s_inter));
    SwigluFfn(w.shared, x, tokens, act_.data(), out, /*accumulate=*/true);
  }
}

}  // namespace sy::engine
