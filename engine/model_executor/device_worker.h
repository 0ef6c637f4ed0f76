// File: engine/model_executor/device_worker.h
//
// DeviceWorker: everything one virtual device owns (its weight shard, its
// KvPool, its SpanRecorder, its EP MoE layer and its scratch) and the forward
// pass it runs for the sequences homed on it. ModelRunner (model_runner.cc)
// owns P of these plus one thread each and wakes them once per step; this
// file knows nothing about threads.
//
// Forward for the device's sequences, in order, per step:
//   state_copy (prefix-cache hits: StatePool::Copy of each seq's
//   state_copy_from into its state_slot) -> embed -> L x [rmsnorm_attn, attention(+residual),
//   rmsnorm_ffn, FFN(+residual)]
//   -> final_norm, lm_head, sample on the last token of each sequence that needs it.
// Attention by the layer's kind (config.attention(l)): MHA (attention/mha.h,
// paged K/V), MLA (attention/mla.h, the latent KV pool), KDA/GLA
// (attention/linear_attention.h, the recurrent-state pool). In the TP
// layout each kind runs its ForwardTp over a TpBatch of every seq of the
// step (attention/tp_batch.h): the pools are read sharded (this device's
// block of every home's pages and slots) and every device joins every
// attention layer, rows or not.
// FFN: EP MoE (router, dispatch, expert_ffn, combine, shared_expert) or, for
// the first first_k_dense_replace layers, a dense SwiGLU MLP. A seq's
// checkpoint_slot / checkpoint_len reach the linear layers as SeqRows'
// checkpoint_slot / checkpoint_at (= checkpoint_len - start_pos).
// A device with no sequences still runs every MoE layer (its collectives).
//
// Routed experts: the device builds (or loads) every expert the ExpertMap
// places in its slots (ExpertMap::ExpertsOnDevice). When the model has MoE
// layers and every device holds the same number of slots (map.uniform()),
// Build moves them into a UnifiedExpertBuffer (engine/parallelism/
// expert_buffer.h; the expert vectors are freed) and the EP MoE layer reads
// them through its EP alias; otherwise (e.g. the round-robin map of P = 3
// over 8 experts) they stay in LayerWeights::experts. Either way EpMoeLayer
// gets one SwigluView per MoE layer per local slot, built once: the buffer's
// addresses never move, so the views survive a round trip TP->EP and a live
// expert move (UnifiedExpertBuffer::CommitStaged copies in place).
//
// Parallel mode (ModelRunner::SwitchParallelism): the buffer's mode is the
// device's layout, and the pools' shards follow it (1 in EP, P in TP). EP runs the MoE layers with
// EpMoeLayer over expert_views_; TP with TpMoeLayer over tp_views_ (E slices per MoE layer into the
// buffer's TP alias), built by Reshard after each switch to TP. Expert
// counts are taken at routing time on the home device in both modes, so
// they are the same whatever the layout.
//
// Thread-safety: Build, Forward and Reshard run on the device's own thread only; the
// accessors are for the runner thread between steps, except that the
// buffer's staging slot (UnifiedExpertBuffer::StagingExpert) may be written
// and its EP alias read from another thread during Forward: Forward never
// touches the staging slot and only reads the alias.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/attention/linear_attention.h"
#include "engine/attention/mha.h"
#include "engine/attention/mla.h"
#include "engine/attention/seq_rows.h"
#include "engine/attention/tp_batch.h"
#include "engine/distributed/inproc_communicator.h"
#include "engine/model/attention.h"
#include "engine/model/config.h"
#include "engine/model/layers.h"
#include "engine/model/weights.h"
#include "engine/model_executor/model_runner.h"
#include "engine/model_executor/parallel_switch.h"
#include "engine/moe/ep_moe.h"
#include "engine/moe/expert_map.h"
#include "engine/moe/tp_moe.h"
#include "engine/parallelism/expert_buffer.h"
#include "engine/pools/kv_pool.h"
#include "engine/pools/state_pool.h"
#include "engine/trace/span_recorder.h"

namespace sy::engine {

// Where a device writes the results for the seqs it owns; indexed by the
// seq's position in BatchInput::seqs, so devices never write the same entry.
struct StepSink {
  std::vector<int32_t>* next_tokens = nullptr;        // filled when sampling
  std::vector<std::vector<float>>* logits = nullptr;  // filled when logits are requested
};

class DeviceWorker {
 public:
  DeviceWorker(const ModelConfig& config, const ModelRunnerOptions& options, int rank,
               const ExpertMap* map, InProcCommunicator* comm,
               SpanRecorder::Clock::time_point epoch);

  // Builds (or loads from options.checkpoint) this device's weight shard and
  // its pools. Run once, on the device's thread, so that P devices build in
  // parallel; build_status() reports a checkpoint that failed to load.
  void Build();
  const Status& build_status() const { return build_status_; }

  // `map` (the runner's placement) must outlive the worker; it may change
  // only between Forwards.
  // Runs the step for seqs[i] of `batch`, i in `local` (all homed here).
  // counts: [layers x experts] routed tokens of this device's tokens, added to.
  // REQUIRES: Build() ran; the batch passed ModelRunner's validation.
  void Forward(const BatchInput& batch, const std::vector<int>& local, bool want_logits,
               const StepSink& sink, std::vector<int64_t>* counts);

  KvPool& pool() { return *pool_; }
  StatePool& state_pool() { return *state_pool_; }
  SpanRecorder& recorder() { return recorder_; }
  // The device's routed-expert storage, or null when the shape does not fit
  // one (see above). A reshard through it must not overlap a Forward, and
  // Forward runs the layout it is in.
  UnifiedExpertBuffer* expert_buffer() { return expert_buffer_.get(); }
  // The reshard job of a switch (all devices together, between steps):
  // ReshardDevice on this device's buffer, then, after a switch to TP, the
  // TP views. REQUIRES: expert_buffer() != null.
  DeviceSwitch Reshard(ParallelMode target, const FaultPlan* fault);

 private:
  // Seeds each seq's state_slot from its prefix-cache checkpoint, if any:
  // this device's seqs, or under TP its block of every seq's.
  void CopyCheckpoints(const BatchInput& batch, bool tp);
  // The step's TpBatch rows (tp_batch.h): every seq, home-major, with
  // storage page tables and slots.
  void BuildTpRows(const BatchInput& batch);
  void Embed(const BatchInput& batch, const std::vector<int>& local, int tokens);
  void DenseMlp(int layer, const LayerWeights& w, int tokens);
  void Head(const BatchInput& batch, const std::vector<int>& local, bool want_logits,
            const StepSink& sink);
  // Moves the slots' experts into expert_buffer_ when the map allows it and
  // fills expert_views_ from wherever they then live.
  Status BuildExperts();

  const ModelConfig config_;
  const ModelRunnerOptions options_;
  const int rank_;
  const ExpertMap* map_;
  InProcCommunicator* comm_;
  SpanRecorder recorder_;
  EpMoeLayer moe_;
  std::unique_ptr<TpMoeLayer> tp_moe_;  // made at the first switch to TP
  ModelWeights weights_;
  std::unique_ptr<KvPool> pool_;
  std::unique_ptr<StatePool> state_pool_;
  std::unique_ptr<MhaAttention> mha_;        // non-hybrid models only
  std::unique_ptr<MlaAttention> mla_;        // hybrid models only
  std::unique_ptr<LinearAttention> linear_;  // hybrid models only
  std::vector<int> kv_layer_, state_layer_;  // per layer: index in its pool, or -1
  std::vector<SeqRows> seq_rows_;            // this step's local seqs
  // Under TP (BuildTpRows): every seq of the step, home-major.
  std::vector<SeqRows> tp_all_, tp_local_;
  std::vector<int> tp_home_, tp_home_row_;
  std::vector<std::vector<int32_t>> tp_pages_;  // storage page tables of tp_all_
  const int first_moe_;                         // first MoE layer (= first_k_dense_replace)
  std::unique_ptr<UnifiedExpertBuffer> expert_buffer_;
  const int slots_;                       // this device's expert slots per layer
  std::vector<SwigluView> expert_views_;  // [MoE layers x slots_]
  std::vector<TpSliceView> tp_views_;     // [MoE layers x experts], valid in TP mode
  StateReshardScratch state_scratch_;     // KV / state reshard buffers, kept between switches
  Status build_status_;

  // Scratch reused across steps; capacity only grows.
  std::vector<int> row_begin_;  // first row of each local seq
  std::vector<float> x_, xn_, moe_out_, mlp_scratch_;
  std::vector<float> head_in_, logits_, sample_scratch_;
};

}  // namespace sy::engine
