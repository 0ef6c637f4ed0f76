#include "engine/moe/tp_moe.h"

#include <bit>
#include <cassert>
#include <cstring>

namespace sy::engine {

TpMoeLayer::TpMoeLayer(const ModelConfig& config, int rank, Communicator* comm, RouterSkew skew)
    : config_(config),
      rank_(rank),
      comm_(comm),
      hidden_(config.hidden),
      top_k_(config.top_k),
      router_(config, skew) {
  assert(config.expert_inter % comm->size() == 0);
  send_.resize(comm->size());
  recv_.resize(comm->size());
}

void TpMoeLayer::Forward(int layer, const LayerWeights& w, const TpSliceView* experts,
                         const float* x, int tokens, float* out, SpanRecorder* rec,
                         int64_t* counts) {
  router_.Route(layer, w, x, tokens, rec, counts);
  Gather(x, tokens, rec, layer);
  RunSlices(experts, rec, layer);
  comm_->AllReduceSum(rank_, &yout_, rec, "tp_allreduce", layer);
  if (tokens == 0) return;
  // Home: weight this rank's own (token, k) rows, then EpMoeLayer's combine.
  const int h = hidden_;
  routed_.resize(static_cast<size_t>(tokens) * top_k_ * h);
  const std::vector<float>& wt = router_.weights();
  const int first = src_off_[rank_] * top_k_;
  for (int j = 0; j < tokens * top_k_; ++j) {
    const float* y = &yout_[static_cast<size_t>(pos_[first + j]) * h];
    float* dst = &routed_[static_cast<size_t>(j) * h];
    const float wj = wt[j];
    for (int i = 0; i < h; ++i) dst[i] = y[i] * wj;
  }
  CombineTopK(config_, w, x, tokens, routed_.data(), &act_, out, rec, layer);
}

const float* TpMoeLayer::SourceRows(int src) const {
  return src == rank_ ? payload_.data() : recv_[src].data();
}

void TpMoeLayer::Gather(const float* x, int tokens, SpanRecorder* rec, int layer) {
  const int h = hidden_, p = comm_->size();
  const size_t row = static_cast<size_t>(top_k_) + h;
  payload_.resize(static_cast<size_t>(tokens) * row);
  const std::vector<int32_t>& ids = router_.ids();
  for (int t = 0; t < tokens; ++t) {
    float* r = &payload_[t * row];
    // Integers travel inside float payloads bit for bit (never converted).
    for (int k = 0; k < top_k_; ++k) r[k] = std::bit_cast<float>(ids[t * top_k_ + k]);
    std::memcpy(r + top_k_, x + static_cast<size_t>(t) * h, h * sizeof(float));
  }
  // The same payload to every peer; none to itself (read from payload_).
  for (int d = 0; d < p; ++d) {
    if (d == rank_) {
      send_[d].clear();
    } else {
      send_[d].assign(payload_.begin(), payload_.end());
    }
  }
  comm_->AllToAll(rank_, send_, &recv_, rec, "tp_gather", layer);
  src_rows_.resize(p);
  src_off_.resize(p + 1);
  src_off_[0] = 0;
  for (int s = 0; s < p; ++s) {
    src_rows_[s] = s == rank_ ? tokens : static_cast<int>(recv_[s].size() / row);
    src_off_[s + 1] = src_off_[s] + src_rows_[s];
  }
  total_tokens_ = src_off_[p];
}

void TpMoeLayer::RunSlices(const TpSliceView* experts, SpanRecorder* rec, int layer) {
  const int h = hidden_, p = comm_->size(), e_count = config_.experts;
  const size_t row = static_cast<size_t>(top_k_) + h;
  const int pairs = total_tokens_ * top_k_;
  // Group (token, k) pairs by expert, stable in (source rank, token) order:
  // the order in which EpMoeLayer's owner receives an expert's rows.
  expert_rows_.assign(e_count, 0);
  for (int s = 0; s < p; ++s) {
    const float* rows = SourceRows(s);
    for (int t = 0; t < src_rows_[s]; ++t) {
      for (int k = 0; k < top_k_; ++k) expert_rows_[std::bit_cast<int32_t>(rows[t * row + k])]++;
    }
  }
  expert_off_.assign(e_count + 1, 0);
  for (int e = 0; e < e_count; ++e) expert_off_[e + 1] = expert_off_[e] + expert_rows_[e];
  std::vector<int>& cursor = expert_rows_;  // reused as the per-expert fill cursor
  for (int e = 0; e < e_count; ++e) cursor[e] = expert_off_[e];
  pos_.resize(pairs);
  xin_.resize(static_cast<size_t>(pairs) * h);
  for (int s = 0; s < p; ++s) {
    const float* rows = SourceRows(s);
    for (int t = 0; t < src_rows_[s]; ++t) {
      const float* r = rows + t * row;
      for (int k = 0; k < top_k_; ++k) {
        const int g = cursor[std::bit_cast<int32_t>(r[k])]++;
        pos_[(src_off_[s] + t) * top_k_ + k] = g;
        std::memcpy(&xin_[static_cast<size_t>(g) * h], r + top_k_, h * sizeof(float));
      }
    }
  }
  // Exactly T_total * top_k rows on every rank: AllReduceSum needs equal lengths.
  yout_.resize(static_cast<size_t>(pairs) * h);
  if (pairs == 0) return;
  const int shard = experts[0].shard;
  SpanRecorder::Scope span(rec, "expert_ffn", layer, pairs, 6LL * pairs * h * shard);
  int64_t bytes = 0;
  for (int e = 0; e < e_count; ++e) {
    const int off = expert_off_[e], n = expert_off_[e + 1] - off;
    if (n == 0) continue;
    const TpSliceView& v = experts[e];
    assert(v.shard == config_.expert_inter / p);
    SwigluSlice(&xin_[static_cast<size_t>(off) * h], n, h, v.gate_up, v.gate_up + v.shard,
                2 * v.shard, v.down, v.shard, &act_, &yout_[static_cast<size_t>(off) * h]);
    bytes += 3LL * h * v.shard * static_cast<int64_t>(sizeof(float));
  }
  span.set_bytes(bytes + 2LL * pairs * h * static_cast<int64_t>(sizeof(float)));
}

}  // namespace sy::engine
