// File: engine/moe/ep_moe.h
//
// EpMoeLayer: one device's share of an expert-parallel MoE block, in the
// DeepEP shape (seed 004) / scatter -> expert FFN -> gather (seed 000 §1):
//
//   router    softmax top-k, or the sigmoid grouped top-k with expert bias
//             when config.router == kSigmoidGrouped (router.h), over this
//             device's tokens (home device)
//   dispatch  all-to-all: each (token, k) pair goes to the device owning
//             expert ids[t,k] as a row [expert, slot, weight | hidden x H]
//   expert    each device groups the rows it received by local expert and runs
//             one SwiGLU GEMM chain per expert (M = rows for that expert),
//             scaling each output row by its routing weight
//   combine   all-to-all back: rows [slot | y x H] return to their home device
//   reduce    home sums the k weighted outputs of a token in rank order k=0..K-1
//             (fixed order: the result does not depend on P or the placement)
//             and adds the shared expert
//
// Every device calls Forward for every MoE layer, also with zero tokens (an
// idle DP rank still joins both all-to-alls, as in SGLang DP attention).
//
//   EpMoeLayer moe(config, rank, &layout, &comm);
//   moe.Forward(layer, weights.layers[layer], x_norm, tokens, out, &rec, counts);
//   // or with the routed experts read elsewhere (the UnifiedExpertBuffer's EP
//   // alias, engine/parallelism/expert_buffer.h), one SwigluView per expert id:
//   moe.Forward(layer, weights.layers[layer], views, x_norm, tokens, out, &rec, counts);
//
// Thread-safety: one instance per rank, used only on that rank's thread.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/distributed/communicator.h"
#include "engine/model/config.h"
#include "engine/model/weights.h"
#include "engine/moe/layout.h"
#include "engine/trace/span_recorder.h"

namespace sy::engine {

// A routed expert's weights as EpMoeLayer reads them, wherever they live:
// gate_up [H x 2I] (columns [0, I) gate, [I, 2I) up) and down [I x H],
// exactly as SwigluWeights stores them. inter == 0: not on this device.
struct SwigluView {
  const float* gate_up = nullptr;
  const float* down = nullptr;
  int inter = 0;
  bool present() const { return inter > 0; }
};

// The view of weights held in SwigluWeights' own vectors.
inline SwigluView ViewOf(const SwigluWeights& w) {
  return {.gate_up = w.gate_up.data(), .down = w.down.data(), .inter = w.inter};
}

class EpMoeLayer {
 public:
  // `layout` and `comm` must outlive the layer.
  EpMoeLayer(const ModelConfig& config, int rank, const ExpertLayout* layout, Communicator* comm);

  // x: [tokens x H] post-norm hidden states of this rank's tokens.
  // out: [tokens x H], overwritten with routed + shared expert output.
  // counts (may be null): counts[e] += tokens of this rank routed to expert e.
  // REQUIRES: w.experts[e].present() for every e this rank owns; with the
  // sigmoid router, w.expert_bias holds config.experts values.
  void Forward(int layer, const LayerWeights& w, const float* x, int tokens, float* out,
               SpanRecorder* rec, int64_t* counts);
  // The same, with routed expert e read from experts[e] instead of
  // w.experts[e] (router, bias and shared expert still come from w).
  // REQUIRES: experts has config.experts entries; experts[e].present() with
  // inter == config.expert_inter for every e this rank owns; the pointed-to
  // weights stay unchanged for the call.
  void Forward(int layer, const LayerWeights& w, const SwigluView* experts, const float* x,
               int tokens, float* out, SpanRecorder* rec, int64_t* counts);

  // Routing of the last Forward: ids/weights [tokens x top_k] (for tests).
  const std::vector<int32_t>& last_ids() const { return ids_; }
  // Rows this rank's experts computed in the last Forward.
  int last_expert_rows() const { return static_cast<int>(row_src_.size()); }

 private:
  void Route(const LayerWeights& w, const float* x, int tokens, SpanRecorder* rec, int layer,
             int64_t* counts);
  void RunExperts(const SwigluView* experts, SpanRecorder* rec, int layer);
  void Reduce(const LayerWeights& w, const float* x, int tokens, float* out, SpanRecorder* rec,
              int layer);

  const ModelConfig config_;
  const int rank_;
  const ExpertLayout* layout_;
  Communicator* comm_;
  const int hidden_;
  const int top_k_;

  // Scratch reused across layers and steps (capacity only grows).
  std::vector<float> logits_;
  std::vector<int32_t> ids_;
  std::vector<float> weights_;
  std::vector<std::vector<float>> send_, recv_;  // dispatch payloads per peer
  std::vector<std::vector<float>> back_, ret_;   // combine payloads per peer
  std::vector<int> expert_rows_;                 // rows received per expert id
  std::vector<int> expert_offset_;
  std::vector<int> row_src_;  // grouped row -> source rank
  std::vector<int> row_idx_;  // grouped row -> row index within that source's payload
  std::vector<float> row_w_;  // grouped row -> routing weight
  std::vector<int32_t> row_slot_;
  std::vector<float> xin_, yout_, act_;
  std::vector<float> routed_;      // [tokens * top_k x H] weighted expert outputs by slot
  std::vector<SwigluView> views_;  // the vector-backed Forward's views of w.experts
};

// Floats per dispatched row: expert id, slot, weight, then the hidden vector.
inline constexpr int kDispatchHeader = 3;
// Floats per combined row: slot, then the weighted expert output.
inline constexpr int kCombineHeader = 1;

}  // namespace sy::engine
