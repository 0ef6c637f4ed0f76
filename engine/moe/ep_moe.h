// File: engine/moe/ep_moe.h
//
// EpMoeLayer: one device's share of an expert-parallel MoE block, in the
// DeepEP shape (seed 004) / scatter -> expert FFN -> gather (seed 000 §1):
//
//   router    softmax top-k, or the sigmoid grouped top-k with expert bias
//             when config.router == kSigmoidGrouped (router.h), over this
//             device's tokens (home device)
//   dispatch  all-to-all: each (token, k) pair goes to one replica of expert
//             ids[t,k] (ExpertMap::Replica: the j-th row this rank routes to
//             e in this layer goes to replica (j + rank) mod replicas), as a
//             row [local slot on the receiver, slot, weight | hidden x H]
//   expert    each device groups the rows it received by local slot and runs
//             the slot's SwiGLU (M = rows for that slot) as P intermediate
//             slices (moe_common.h SwigluSlice, K = I/P rows of down each)
//             summed in rank order, then scales each output row by its
//             routing weight. The slices are the TP layout's arithmetic
//             (tp_moe.h): both layouts give bit-identical outputs. One slice
//             (the whole expert) when P does not divide expert_inter
//   combine   all-to-all back: rows [slot | y x H] return to their home device
//   reduce    home sums the k weighted outputs of a token in rank order k=0..K-1
//             (fixed order: the result does not depend on P or the placement)
//             and adds the shared expert
//
// Every device calls Forward for every MoE layer, also with zero tokens (an
// idle DP rank still joins both all-to-alls, as in SGLang DP attention).
//
// Skewed routing (RouterSkew, issue 6): a bias added to the router logits
// before top-k so that a few experts get most tokens; zero skew adds nothing.
//
//   EpMoeLayer moe(config, rank, &map, &comm);
//   moe.Forward(layer, weights.layers[layer], x_norm, tokens, out, &rec, counts);
//   // or with the routed experts read elsewhere (the UnifiedExpertBuffer's EP
//   // alias, engine/parallelism/expert_buffer.h), one SwigluView per LOCAL
//   // SLOT of this rank in `layer` (ExpertMap::LocalExperts order):
//   moe.Forward(layer, weights.layers[layer], views, x_norm, tokens, out, &rec, counts);
//
// Thread-safety: one instance per rank, used only on that rank's thread. The
// map is read during Forward; whoever changes it does so between Forwards.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/distributed/communicator.h"
#include "engine/model/config.h"
#include "engine/model/weights.h"
#include "engine/moe/expert_map.h"
#include "engine/moe/moe_common.h"
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
  // `map` and `comm` must outlive the layer. REQUIRES: map->devices() ==
  // comm->size(), map->experts() == config.experts.
  EpMoeLayer(const ModelConfig& config, int rank, const ExpertMap* map, Communicator* comm,
             RouterSkew skew = {});

  // The step number the skew's drift reads (BatchInput::step); no effect
  // without skew.
  void set_step(int64_t step) { router_.set_step(step); }

  // x: [tokens x H] post-norm hidden states of this rank's tokens.
  // out: [tokens x H], overwritten with routed + shared expert output.
  // counts (may be null): counts[e] += tokens of this rank routed to
  // logical expert e.
  // REQUIRES: w.experts[e].present() for every e in this rank's slots of
  // `layer`; with the sigmoid router, w.expert_bias holds config.experts values.
  void Forward(int layer, const LayerWeights& w, const float* x, int tokens, float* out,
               SpanRecorder* rec, int64_t* counts);
  // The same, with the routed expert of local slot k read from slots[k]
  // instead of w.experts (router, bias and shared expert still come from w).
  // REQUIRES: slots has map->device_slots(rank) entries, each present() with
  // inter == config.expert_inter and holding the expert
  // map->LocalExperts(layer, rank)[k]; the pointed-to weights stay
  // unchanged for the call.
  void Forward(int layer, const LayerWeights& w, const SwigluView* slots, const float* x,
               int tokens, float* out, SpanRecorder* rec, int64_t* counts);

  // Routing of the last Forward: ids/weights [tokens x top_k] (for tests).
  const std::vector<int32_t>& last_ids() const { return router_.ids(); }
  // Rows this rank's experts computed in the last Forward.
  int last_expert_rows() const { return static_cast<int>(row_src_.size()); }

 private:
  // Routes (MoeRouter) and lays the dispatch rows out per destination.
  void Route(const LayerWeights& w, const float* x, int tokens, SpanRecorder* rec, int layer,
             int64_t* counts);
  void RunExperts(const SwigluView* slots, SpanRecorder* rec, int layer);
  void Reduce(const LayerWeights& w, const float* x, int tokens, float* out, SpanRecorder* rec,
              int layer);

  const ModelConfig config_;
  const int rank_;
  const ExpertMap* map_;
  Communicator* comm_;
  const int hidden_;
  const int top_k_;
  const int slices_;  // P when P divides expert_inter, else 1
  MoeRouter router_;

  // Scratch reused across layers and steps (capacity only grows).
  std::vector<std::vector<float>> send_, recv_;  // dispatch payloads per peer
  std::vector<std::vector<float>> back_, ret_;   // combine payloads per peer
  std::vector<int> sent_;                        // rows sent per logical expert (replica choice)
  std::vector<int> slot_rows_;                   // rows received per local slot
  std::vector<int> slot_offset_;
  std::vector<int> row_src_;  // grouped row -> source rank
  std::vector<int> row_idx_;  // grouped row -> row index within that source's payload
  std::vector<float> row_w_;  // grouped row -> routing weight
  std::vector<int32_t> row_slot_;
  std::vector<float> xin_, yout_, slice_, act_;
  std::vector<float> routed_;      // [tokens * top_k x H] weighted expert outputs by slot
  std::vector<SwigluView> views_;  // the vector-backed Forward's views of w.experts
};

// Floats per dispatched row: the receiver's local slot index, the token's
// (token, k) slot, weight, then the hidden vector.
inline constexpr int kDispatchHeader = 3;
// Floats per combined row: slot, then the weighted expert output.
inline constexpr int kCombineHeader = 1;

}  // namespace sy::engine
