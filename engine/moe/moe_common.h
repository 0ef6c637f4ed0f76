// File: engine/moe/moe_common.h
//
// The numerics the expert-parallel (ep_moe.h) and the tensor-parallel
// (tp_moe.h) MoE layers share, so that both layouts compute bit-identical
// outputs for the same tokens (Moebius, seed 003: a switch must not change a
// token). Each piece exists once and both layers call it:
//
//   MoeRouter       router GEMM, skew bias, top-k (softmax or sigmoid
//                   grouped), per-expert counts: on the token's home device
//   SwigluSlice     one expert's FFN over intermediate columns [r*s, (r+1)*s)
//                   (slice r of P): two GEMMs of N = s for gate and up, SiLU
//                   times up, one GEMM of K = s for down. EP runs it P times
//                   per expert on the whole expert (strided columns, ldb = 2I)
//                   and sums the slices in rank order; TP runs it once on its
//                   own slice (contiguous, ldb = 2s) and the Communicator's
//                   AllReduceSum sums the slices in rank order. Same shapes,
//                   same values, same order: the same bits (GemmStrided's
//                   numbers do not depend on the strides).
//   SumSlices       y += slice, element-wise: the order of
//                   InProcCommunicator::AllReduceSum (tmp = y_0; tmp += y_r).
//   CombineTopK     home device: out[t] = sum over k = 0..K-1, in that order,
//                   of the weighted outputs, then the shared expert added.
//
// Thread-safety: MoeRouter is one per rank (scratch inside); the functions
// are pure.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/model/config.h"
#include "engine/model/weights.h"
#include "engine/trace/span_recorder.h"

namespace sy::engine {

// Router bias for skewed routing: expert e of model layer l at step s gets
// skew * log(1 / (rank + 1)) added to its logit, where rank is e's place in a
// pseudo-random order of the experts fixed by (l, s / drift_steps)
// (drift_steps 0: by l alone). It does not depend on P or the placement.
// skew 0: no bias at all.
struct RouterSkew {
  double skew = 0.0;
  int drift_steps = 0;
};

class MoeRouter {
 public:
  MoeRouter(const ModelConfig& config, RouterSkew skew);

  // The step number the skew's drift reads; no effect without skew.
  void set_step(int64_t step) { step_ = step; }

  // Routes `tokens` rows of x [tokens x H] (post-norm, this device's own
  // tokens) with layer `layer`'s router: ids() / weights() [tokens x top_k]
  // afterwards, k = 0 the largest weight. counts (may be null): counts[e] +=
  // 1 per (token, k) routed to logical expert e. Records a "router" span.
  // REQUIRES: with the sigmoid router, w.expert_bias holds config.experts values.
  void Route(int layer, const LayerWeights& w, const float* x, int tokens, SpanRecorder* rec,
             int64_t* counts);

  const std::vector<int32_t>& ids() const { return ids_; }
  const std::vector<float>& weights() const { return weights_; }

 private:
  // Adds the skew bias of (layer, step_) to logits_ [tokens x E].
  void AddSkew(int layer, int tokens);

  const ModelConfig config_;
  const RouterSkew skew_;
  int64_t step_ = 0;
  std::vector<float> logits_;
  std::vector<int32_t> ids_;
  std::vector<float> weights_;
  std::vector<float> skew_bias_;  // [experts]
  std::vector<int> skew_rank_;    // [rank] -> expert, hottest first
};

// y [n x H] = slice r of one routed expert applied to x [n x H]:
//   g = x * gate [H x s], u = x * up [H x s]   (b rows of stride ldb)
//   y = (silu(g) * u) [n x s] * down [s x H]   (down rows contiguous)
// scratch: resized to hold 2 * n * s floats.
// EP: gate = gate_up + r*s, up = gate_up + I + r*s, ldb = 2I, down = down + r*s*H.
// TP: gate = gate_up_r, up = gate_up_r + s, ldb = 2s, down = down_r.
void SwigluSlice(const float* x, int n, int hidden, const float* gate, const float* up, int ldb,
                 const float* down, int shard, std::vector<float>* scratch, float* y);

// y[i] += slice[i], i < count, in the order InProcCommunicator::AllReduceSum
// adds a rank's contribution.
void SumSlices(float* y, const float* slice, int64_t count);

// out [tokens x H] = sum over k of weighted[t, k] (rows [tokens * top_k x H],
// already multiplied by their routing weight), k = 0..top_k-1 in order, plus
// the shared expert of x (w.shared, when present). act: scratch. Records the
// "shared_expert" span (tokens 0: nothing).
void CombineTopK(const ModelConfig& config, const LayerWeights& w, const float* x, int tokens,
                 const float* weighted, std::vector<float>* act, float* out, SpanRecorder* rec,
                 int layer);

}  // namespace sy::engine
