#include "engine/model_executor/device_worker.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <span>

#include "engine/model_loader/checkpoint.h"

namespace sy::engine {

namespace {
constexpr int64_t kF = sizeof(float);
}  // namespace

DeviceWorker::DeviceWorker(const ModelConfig& config, const ModelRunnerOptions& options, int rank,
                           const ExpertMap* map, InProcCommunicator* comm,
                           SpanRecorder::Clock::time_point epoch)
    : config_(config),
      options_(options),
      rank_(rank),
      map_(map),
      comm_(comm),
      recorder_(rank, epoch),
      moe_(config, rank, map, comm,
           RouterSkew{.skew = options.router_skew, .drift_steps = options.skew_drift_steps}),
      first_moe_(std::min(config.first_k_dense_replace, config.layers)),
      slots_(map->device_slots(rank)) {
  if (!config.hybrid()) mha_ = std::make_unique<MhaAttention>(config);
  if (config.hybrid()) {
    // EP computes MLA scores in the same P latent blocks TP splits them into.
    mla_ = std::make_unique<MlaAttention>(config, comm->size());
    linear_ = std::make_unique<LinearAttention>(
        config,
        LinearAttentionOptions{.chunk = options.linear_chunk, .prefill = options.linear_prefill});
  }
  for (int l = 0; l < config.layers; ++l) {
    kv_layer_.push_back(config.kv_layer(l));
    state_layer_.push_back(config.state_layer(l));
  }
}

void DeviceWorker::Build() {
  const std::vector<int> local = map_->ExpertsOnDevice(rank_);
  if (options_.checkpoint != nullptr) {
    Result<ModelWeights> w = options_.checkpoint->Load(local);
    if (!w.ok()) {
      build_status_ = w.status().WithContext("device " + std::to_string(rank_));
      return;
    }
    weights_ = std::move(w).value();
  } else {
    weights_ = BuildWeights(config_, options_.seed, local);
  }
  if (Status s = BuildExperts(); !s.ok()) {
    build_status_ = s.WithContext("device " + std::to_string(rank_));
    return;
  }
  KvPoolOptions po;
  po.num_pages = options_.kv_pages_per_device;
  po.page_size = options_.page_size;
  po.layers = config_.full_attention_layers();
  if (config_.hybrid()) {
    po.latent_dim = config_.mla_latent_dim();
  } else {
    po.kv_heads = config_.kv_heads;
    po.head_dim = config_.head_dim;
  }
  pool_ = std::make_unique<KvPool>(po);
  StatePoolOptions so;
  so.slots = options_.state_slots_per_device;
  so.layers = config_.linear_layers();
  so.state_floats = config_.state_floats_per_layer() - config_.conv_state_floats();
  so.conv_floats = config_.conv_state_floats();
  so.conv_groups = so.conv_floats > 0 ? 3 * (config_.conv_kernel - 1) : 0;
  state_pool_ = std::make_unique<StatePool>(so);
}

Status DeviceWorker::BuildExperts() {
  const int moe_layers = config_.layers - first_moe_;
  if (moe_layers > 0 &&
      UnifiedExpertBuffer::CheckMap(*map_, config_.expert_inter, config_.hidden).ok()) {
    Result<std::unique_ptr<UnifiedExpertBuffer>> buf =
        UnifiedExpertBuffer::Create(rank_, *map_, config_.expert_inter, config_.hidden,
                                    std::span<LayerWeights>(weights_.layers).subspan(first_moe_));
    if (!buf.ok()) return buf.status();
    expert_buffer_ = std::move(buf).value();
  }
  expert_views_.assign(static_cast<size_t>(moe_layers) * slots_, SwigluView{});
  for (int i = 0; i < moe_layers; ++i) {
    SwigluView* row = &expert_views_[static_cast<size_t>(i) * slots_];
    if (expert_buffer_ == nullptr) {
      const LayerWeights& w = weights_.layers[first_moe_ + i];
      const std::vector<int> ids = map_->LocalExperts(first_moe_ + i, rank_);
      for (int k = 0; k < slots_; ++k) row[k] = ViewOf(w.experts[ids[k]]);
      continue;
    }
    for (int k = 0; k < slots_; ++k) {
      const EpExpertView v = expert_buffer_->EpExpert(i, k);
      row[k] = {.gate_up = v.gate_up, .down = v.down, .inter = config_.expert_inter};
    }
  }
  return Status::Ok();
}

DeviceSwitch DeviceWorker::Reshard(ParallelMode target, const FaultPlan* fault) {
  assert(expert_buffer_ != nullptr);
  DeviceSwitch out = ReshardDevice(expert_buffer_.get(), pool_.get(), state_pool_.get(),
                                   &state_scratch_, target, comm_, fault, /*rec=*/nullptr);
  if (!out.status.ok() || expert_buffer_->mode() != ParallelMode::kTP) return out;
  // The EP views stay valid (EP addresses never move); the TP alias is read
  // through views made once per switch.
  if (tp_moe_ == nullptr) {
    tp_moe_ = std::make_unique<TpMoeLayer>(
        config_, rank_, comm_,
        RouterSkew{.skew = options_.router_skew, .drift_steps = options_.skew_drift_steps});
  }
  const int moe_layers = expert_buffer_->layers(), e_count = config_.experts;
  tp_views_.resize(static_cast<size_t>(moe_layers) * e_count);
  for (int i = 0; i < moe_layers; ++i) {
    for (int e = 0; e < e_count; ++e) {
      const TpExpertView v = expert_buffer_->TpExpert(i, e);
      tp_views_[static_cast<size_t>(i) * e_count + e] = {
          .gate_up = v.gate_up, .down = v.down, .shard = v.inter_shard};
    }
  }
  return out;
}

void DeviceWorker::Forward(const BatchInput& batch, const std::vector<int>& local, bool want_logits,
                           const StepSink& sink, std::vector<int64_t>* counts) {
  const int h = config_.hidden;
  row_begin_.resize(local.size() + 1);
  int tokens = 0;
  for (size_t i = 0; i < local.size(); ++i) {
    row_begin_[i] = tokens;
    tokens += static_cast<int>(batch.seqs[local[i]].tokens.size());
  }
  row_begin_[local.size()] = tokens;
  const size_t rows = static_cast<size_t>(tokens);
  x_.resize(rows * h);
  xn_.resize(rows * h);
  moe_out_.resize(rows * h);

  seq_rows_.clear();
  for (size_t i = 0; i < local.size(); ++i) {
    const SeqInput& seq = batch.seqs[local[i]];
    seq_rows_.push_back(SeqRows{
        .row = row_begin_[i],
        .n = static_cast<int>(seq.tokens.size()),
        .start_pos = seq.start_pos,
        .pages = seq.pages.data(),
        .state_slot = seq.state_slot,
        .checkpoint_slot = seq.checkpoint_slot,
        .checkpoint_at = seq.checkpoint_slot >= 0 ? seq.checkpoint_len - seq.start_pos : 0});
  }

  moe_.set_step(batch.step);
  const bool tp = expert_buffer_ != nullptr && expert_buffer_->mode() == ParallelMode::kTP;
  if (tp) tp_moe_->set_step(batch.step);
  // The attention state follows the expert layout (parallel_switch.h).
  assert(pool_->shards() == (tp ? comm_->size() : 1));
  if (tp) BuildTpRows(batch);
  const TpBatch tpb{.rank = rank_,
                    .comm = comm_,
                    .all = tp_all_,
                    .home = tp_home_,
                    .home_row = tp_home_row_,
                    .local = tp_local_};
  CopyCheckpoints(batch, tp);
  Embed(batch, local, tokens);
  for (int l = 0; l < config_.layers; ++l) {
    const LayerWeights& w = weights_.layers[l];
    // Under TP every device joins each attention layer's collectives, also
    // without rows of its own: it runs its heads for the other homes' rows.
    if (tokens > 0 || tp) {
      {
        SpanRecorder::Scope s(&recorder_, "rmsnorm_attn", l, tokens, 4LL * tokens * h,
                              kF * (2LL * tokens * h + h));
        RmsNorm(x_.data(), w.attn_norm.data(), tokens, h, config_.rms_eps, xn_.data());
      }
      switch (config_.attention(l)) {
        case AttentionKind::kMha:
          if (tp) {
            mha_->ForwardTp(w, kv_layer_[l], l, xn_.data(), tokens, tpb, pool_.get(), x_.data(),
                            &recorder_);
          } else {
            mha_->Forward(w, kv_layer_[l], l, xn_.data(), tokens, seq_rows_, pool_.get(), x_.data(),
                          &recorder_);
          }
          break;
        case AttentionKind::kMla:
          if (tp) {
            mla_->ForwardTp(w.mla, kv_layer_[l], l, xn_.data(), tokens, tpb, pool_.get(), x_.data(),
                            &recorder_);
          } else {
            mla_->Forward(w.mla, kv_layer_[l], l, xn_.data(), tokens, seq_rows_, pool_.get(),
                          x_.data(), &recorder_);
          }
          break;
        case AttentionKind::kKda:
        case AttentionKind::kGla:
          if (tp) {
            linear_->ForwardTp(w.linear, state_layer_[l], l, xn_.data(), tokens, tpb,
                               state_pool_.get(), x_.data(), &recorder_);
          } else {
            linear_->Forward(w.linear, state_layer_[l], l, xn_.data(), tokens, seq_rows_,
                             state_pool_.get(), x_.data(), &recorder_);
          }
          break;
      }
      {
        SpanRecorder::Scope s(&recorder_, "rmsnorm_ffn", l, tokens, 4LL * tokens * h,
                              kF * (2LL * tokens * h + h));
        RmsNorm(x_.data(), w.ffn_norm.data(), tokens, h, config_.rms_eps, xn_.data());
      }
    }
    if (!config_.is_moe(l)) {
      // Dense layers have no collectives, so idle devices skip them.
      if (tokens > 0) DenseMlp(l, w, tokens);
      continue;
    }
    // Every device joins the MoE collectives, with zero tokens when idle.
    int64_t* layer_counts = counts->data() + static_cast<size_t>(l) * config_.experts;
    if (tp) {
      tp_moe_->Forward(l, w, &tp_views_[static_cast<size_t>(l - first_moe_) * config_.experts],
                       xn_.data(), tokens, moe_out_.data(), &recorder_, layer_counts);
    } else {
      moe_.Forward(l, w, &expert_views_[static_cast<size_t>(l - first_moe_) * slots_], xn_.data(),
                   tokens, moe_out_.data(), &recorder_, layer_counts);
    }
    for (size_t i = 0; i < rows * h; ++i) x_[i] += moe_out_[i];
  }
  Head(batch, local, want_logits, sink);
}

void DeviceWorker::CopyCheckpoints(const BatchInput& batch, bool tp) {
  // Under TP this device holds its block of every home's slots, so it copies
  // its block for every seq of the step, at storage ids (state_pool.h).
  const auto mine = [&](const SeqInput& seq) {
    return seq.state_copy_from >= 0 && (tp || seq.device == rank_);
  };
  int64_t copies = 0;
  for (const SeqInput& seq : batch.seqs) copies += mine(seq) ? 1 : 0;
  if (copies == 0) return;
  SpanRecorder::Scope s(&recorder_, "state_copy", -1, /*tokens=*/0, /*flops=*/0,
                        2LL * copies * state_pool_->slot_floats() * kF);
  const int slots = state_pool_->slots();
  for (const SeqInput& seq : batch.seqs) {
    if (!mine(seq)) continue;
    const int base = tp ? seq.device * slots : 0;
    state_pool_->Copy(base + seq.state_copy_from, base + seq.state_slot);
  }
}

void DeviceWorker::BuildTpRows(const BatchInput& batch) {
  const int parts = comm_->size();
  const int pages = pool_->num_pages(), slots = state_pool_->slots();
  tp_home_row_.assign(parts + 1, 0);
  for (const SeqInput& seq : batch.seqs) {
    tp_home_row_[seq.device + 1] += static_cast<int>(seq.tokens.size());
  }
  for (int d = 0; d < parts; ++d) tp_home_row_[d + 1] += tp_home_row_[d];
  tp_pages_.resize(batch.seqs.size());
  tp_all_.clear();
  tp_home_.clear();
  tp_local_.clear();
  // Home-major, each home's seqs in batch order: the order every home packs
  // its own rows in (ModelRunner hands each device its seqs in batch order).
  size_t k = 0;
  for (int d = 0; d < parts; ++d) {
    int row = tp_home_row_[d];
    for (const SeqInput& seq : batch.seqs) {
      if (seq.device != d) continue;
      std::vector<int32_t>& table = tp_pages_[k++];
      table.resize(seq.pages.size());
      for (size_t i = 0; i < seq.pages.size(); ++i) table[i] = d * pages + seq.pages[i];
      const int n = static_cast<int>(seq.tokens.size());
      const SeqRows r{
          .row = row,
          .n = n,
          .start_pos = seq.start_pos,
          .pages = table.data(),
          .state_slot = seq.state_slot >= 0 ? d * slots + seq.state_slot : -1,
          .checkpoint_slot = seq.checkpoint_slot >= 0 ? d * slots + seq.checkpoint_slot : -1,
          .checkpoint_at = seq.checkpoint_slot >= 0 ? seq.checkpoint_len - seq.start_pos : 0};
      tp_all_.push_back(r);
      tp_home_.push_back(d);
      if (d == rank_) {
        SeqRows mine = r;
        mine.row -= tp_home_row_[d];
        tp_local_.push_back(mine);
      }
      row += n;
    }
  }
}

void DeviceWorker::DenseMlp(int layer, const LayerWeights& w, int tokens) {
  const int64_t h = config_.hidden, inter = w.dense.inter;
  mlp_scratch_.resize(static_cast<size_t>(tokens) * 2 * inter);
  SpanRecorder::Scope s(&recorder_, "dense_mlp", layer, tokens, 6LL * tokens * h * inter,
                        kF * (3 * h * inter + 2LL * tokens * h + 2LL * tokens * inter));
  SwigluFfn(w.dense, xn_.data(), tokens, mlp_scratch_.data(), x_.data(), /*accumulate=*/true);
}

void DeviceWorker::Embed(const BatchInput& batch, const std::vector<int>& local, int tokens) {
  if (tokens == 0) return;
  const int h = config_.hidden;
  SpanRecorder::Scope s(&recorder_, "embed", -1, tokens, 0, kF * 2LL * tokens * h);
  float* dst = x_.data();
  for (int idx : local) {
    for (int32_t tok : batch.seqs[idx].tokens) {
      std::memcpy(dst, &weights_.embed[static_cast<size_t>(tok) * h], h * sizeof(float));
      dst += h;
    }
  }
}

void DeviceWorker::Head(const BatchInput& batch, const std::vector<int>& local, bool want_logits,
                        const StepSink& sink) {
  const int h = config_.hidden, v = config_.vocab;
  // Only the last token of a seq that samples (or whose logits are wanted) needs the head.
  int n = 0;
  head_in_.resize(local.size() * h);
  for (size_t i = 0; i < local.size(); ++i) {
    if (!want_logits && !batch.seqs[local[i]].sample) continue;
    std::memcpy(&head_in_[static_cast<size_t>(n) * h],
                &x_[static_cast<size_t>(row_begin_[i + 1] - 1) * h], h * sizeof(float));
    ++n;
  }
  if (n == 0) return;
  {
    SpanRecorder::Scope s(&recorder_, "final_norm", -1, n, 4LL * n * h, kF * (2LL * n * h + h));
    RmsNorm(head_in_.data(), weights_.final_norm.data(), n, h, config_.rms_eps, head_in_.data());
  }
  logits_.resize(static_cast<size_t>(n) * v);
  {
    SpanRecorder::Scope s(&recorder_, "lm_head", -1, n, 2LL * n * h * v,
                          kF * (static_cast<int64_t>(h) * v + static_cast<int64_t>(n) * (h + v)));
    Gemm(head_in_.data(), weights_.lm_head.data(), logits_.data(), n, h, v);
  }
  if (want_logits) {
    int j = 0;
    for (int idx : local) {
      const float* lg = &logits_[static_cast<size_t>(j++) * v];
      (*sink.logits)[idx].assign(lg, lg + v);
    }
    return;
  }
  SpanRecorder::Scope s(&recorder_, "sample", -1, n, 4LL * n * v, kF * static_cast<int64_t>(n) * v);
  sample_scratch_.resize(v);
  int j = 0;
  for (int idx : local) {
    const SeqInput& seq = batch.seqs[idx];
    if (!seq.sample) continue;
    (*sink.next_tokens)[idx] =
        SampleToken(&logits_[static_cast<size_t>(j++) * v], v, seq.temperature, seq.sample_seed,
                    sample_scratch_.data());
  }
}

}  // namespace sy::engine
