// File: engine/moe/tp_moe.h
//
// TpMoeLayer: one device's share of a tensor-parallel MoE block (Moebius'
// TP layout, seed 003 §2): rank r of P holds slice r of EVERY routed
// expert's intermediate dimension (s = I/P columns of gate and of up, the
// same s rows of down), and every token is computed by every rank:
//
//   router     this rank's own tokens, exactly as EpMoeLayer (MoeRouter in
//              moe_common.h: the same router, skew and counts), on the
//              token's home device
//   tp_gather  all-to-all with the same payload to every peer (the ranks
//              hold different token counts): each row [ids (top_k) | x (H)].
//              The routing weights stay home: the weighting happens there.
//   expert     every (token, k) pair of every rank, grouped by expert (in
//              source-rank, token order), runs this rank's slice (SwigluSlice)
//   tp_allreduce  Communicator::AllReduceSum of the per-(token, k) partials
//              [T_total x top_k x H] in the grouped order (the same on every
//              rank), summed in rank order
//   reduce     each home device weights its own tokens' rows and combines
//              them exactly as EpMoeLayer does (CombineTopK: k in order, then
//              the shared expert)
//
// Outputs equal EpMoeLayer's bit for bit (tp_moe_test), because EP computes
// each expert as the same P slices in place and sums them in the same rank
// order (ep_moe.h). That is why the all-reduce carries one row per (token,
// k) instead of the weighted sum per token: summing sum_k w_k y_k,r locally
// and then over r would add the same numbers in another association (over k
// first, then r), which differs from EP (r first, then k) in the last bits,
// and a last bit is enough to flip a greedy token a few steps later. The
// price is top_k times the bytes of a summed all-reduce (T_total x top_k x H
// floats instead of T_total x H), the cost of two layouts whose outputs are
// equal; a layer that may differ in the last bits could sum first.
//
// Every device calls Forward for every MoE layer, also with zero tokens (it
// still joins both collectives and computes slices of the other ranks'
// tokens).
//
//   TpMoeLayer moe(config, rank, &comm);
//   // experts: config.experts views, this rank's slice of each (e.g. the
//   // UnifiedExpertBuffer's TP alias, engine/parallelism/expert_buffer.h)
//   moe.Forward(layer, weights.layers[layer], experts, x_norm, tokens, out, &rec, counts);
//
// Thread-safety: one instance per rank, used only on that rank's thread.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/distributed/communicator.h"
#include "engine/model/config.h"
#include "engine/model/weights.h"
#include "engine/moe/moe_common.h"
#include "engine/trace/span_recorder.h"

namespace sy::engine {

// Rank r's slice of one routed expert: gate_up [H x 2s] (per row the gate
// columns [r*s, (r+1)*s) of the expert, then its up columns I + [r*s,
// (r+1)*s)) and down [s x H] (the expert's down rows [r*s, (r+1)*s)).
struct TpSliceView {
  const float* gate_up = nullptr;
  const float* down = nullptr;
  int shard = 0;  // s = I / P
};

class TpMoeLayer {
 public:
  // `comm` must outlive the layer. REQUIRES: config.expert_inter % comm->size() == 0.
  TpMoeLayer(const ModelConfig& config, int rank, Communicator* comm, RouterSkew skew = {});

  // The step number the skew's drift reads (BatchInput::step).
  void set_step(int64_t step) { router_.set_step(step); }

  // x: [tokens x H] post-norm hidden states of this rank's tokens.
  // out: [tokens x H], overwritten with routed + shared expert output.
  // counts (may be null): counts[e] += this rank's (token, k) pairs routed to e.
  // REQUIRES: experts has config.experts entries, each this rank's slice of
  // that expert of `layer` with shard == expert_inter / P; the weights stay
  // unchanged for the call; every rank calls Forward for the same layer.
  void Forward(int layer, const LayerWeights& w, const TpSliceView* experts, const float* x,
               int tokens, float* out, SpanRecorder* rec, int64_t* counts);

  // Routing of the last Forward: this rank's ids [tokens x top_k] (for tests).
  const std::vector<int32_t>& last_ids() const { return router_.ids(); }
  // Tokens of all ranks in the last Forward (the rows every rank computed).
  int last_total_tokens() const { return total_tokens_; }
  // Floats this rank all-reduced in the last Forward: T_total * top_k * H.
  int64_t last_allreduce_floats() const { return static_cast<int64_t>(yout_.size()); }

 private:
  // Packs this rank's rows and exchanges them; fills src_rows_/src_off_.
  void Gather(const float* x, int tokens, SpanRecorder* rec, int layer);
  // Groups every rank's (token, k) pairs by expert and runs the slices into yout_.
  void RunSlices(const TpSliceView* experts, SpanRecorder* rec, int layer);
  const float* SourceRows(int src) const;

  const ModelConfig config_;
  const int rank_;
  Communicator* comm_;
  const int hidden_;
  const int top_k_;
  MoeRouter router_;
  int total_tokens_ = 0;

  // Scratch reused across layers and steps (capacity only grows).
  std::vector<float> payload_;                   // this rank's rows [ids | x]
  std::vector<std::vector<float>> send_, recv_;  // tp_gather payloads per peer
  std::vector<int> src_rows_, src_off_;          // per source rank: tokens, first global token
  std::vector<int> expert_rows_, expert_off_;    // per expert: grouped rows, first row
  std::vector<int> pos_;                         // global (token, k) -> grouped row
  std::vector<float> xin_;                       // grouped input rows [T_total * top_k x H]
  std::vector<float> yout_;                      // grouped partials, then their sum
  std::vector<float> act_, routed_;
};

}  // namespace sy::engine
