#include "engine/moe/ep_moe.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cmath>
#include <cstring>

#include "engine/model/layers.h"

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
      slices_(config.expert_inter % comm->size() == 0 ? comm->size() : 1),
      router_(config, skew) {
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
  router_.Route(layer, w, x, tokens, rec, counts);
  if (tokens == 0) return;
  const std::vector<int32_t>& ids = router_.ids();
  const std::vector<float>& weights = router_.weights();
  // Layout pass (DeepEP's "notify" metadata): the j-th row for expert e goes
  // to the replica ExpertMap::Replica picks, as that device's local slot.
  sent_.assign(e_count, 0);
  for (int t = 0; t < tokens; ++t) {
    const float* xr = x + static_cast<size_t>(t) * h;
    for (int k = 0; k < top_k_; ++k) {
      const int slot = t * top_k_ + k;
      const int e = ids[slot];
      const int phys = map_->Replica(layer, e, sent_[e]++, rank_);
      const int dev = map_->slot_device(phys);
      std::vector<float>& buf = send_[dev];
      buf.push_back(IntBits(phys - map_->device_first_slot(dev)));
      buf.push_back(IntBits(slot));
      buf.push_back(weights[slot]);
      buf.insert(buf.end(), xr, xr + h);
    }
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
  const int inter = config_.expert_inter, shard = inter / slices_;
  int64_t bytes = 0;
  for (int k = 0; k < s_count; ++k) {
    const int off = slot_offset_[k], n = slot_offset_[k + 1] - off;
    if (n == 0) continue;
    const SwigluView& ew = slots[k];
    assert(ew.present() && "a token was dispatched to a slot without weights");
    assert(ew.inter == inter);
    const float* xk = &xin_[static_cast<size_t>(off) * h];
    float* yk = &yout_[static_cast<size_t>(off) * h];
    const int64_t cells = static_cast<int64_t>(n) * h;
    if (slice_.size() < static_cast<size_t>(cells)) slice_.resize(cells);
    // Slice r of the expert in place (columns r*s.. of gate and of up, rows
    // r*s.. of down), summed in rank order: exactly TpMoeLayer's numbers.
    for (int r = 0; r < slices_; ++r) {
      SwigluSlice(xk, n, h, ew.gate_up + r * shard, ew.gate_up + inter + r * shard, 2 * inter,
                  ew.down + static_cast<size_t>(r) * shard * h, shard, &act_,
                  r == 0 ? yk : slice_.data());
      if (r > 0) SumSlices(yk, slice_.data(), cells);
    }
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
  CombineTopK(config_, w, x, tokens, routed_.data(), &act_, out, rec, layer);
}

}  // namespace sy::engine
