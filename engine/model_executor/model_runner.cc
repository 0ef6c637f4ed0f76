#include "engine/model_executor/model_runner.h"

#include <cblas.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "base/stopwatch.h"
#include "engine/distributed/inproc_communicator.h"
#include "engine/model_executor/device_worker.h"
#include "engine/model_executor/expert_mover.h"
#include "engine/model_executor/parallel_switch.h"

namespace sy::engine {

namespace {

std::string SeqName(size_t i, const SeqInput& s) {
  return "seq " + std::to_string(i) + " (request " + std::to_string(s.request_id) + ")";
}

// The prefix-cache fields of one seq (SeqInput::state_copy_from,
// checkpoint_slot, checkpoint_len), given `slots` state slots per device
// (0 for a model without linear layers).
Status ValidatePrefixFields(size_t i, const SeqInput& s, int slots) {
  const std::string name = SeqName(i, s);
  const std::string range = " is outside [0, " + std::to_string(slots) + ")";
  if (s.checkpoint_slot == -1 && s.checkpoint_len != 0) {
    return InvalidArgument(name + ": checkpoint_len " + std::to_string(s.checkpoint_len) +
                           " is set without a checkpoint_slot");
  }
  for (const auto& [field, slot] : {std::pair{"state_copy_from", s.state_copy_from},
                                    std::pair{"checkpoint_slot", s.checkpoint_slot}}) {
    if (slot == -1) continue;
    const std::string what = name + ": " + field + " " + std::to_string(slot);
    if (slots == 0)
      return InvalidArgument(what + " is set but the model has no linear-attention layers");
    if (slot < 0 || slot >= slots) return InvalidArgument(what + range);
    if (slot == s.state_slot) return InvalidArgument(what + " equals its state_slot");
  }
  if (s.state_copy_from != -1 && s.state_copy_from == s.checkpoint_slot) {
    return InvalidArgument(name + ": state_copy_from and checkpoint_slot are both slot " +
                           std::to_string(s.state_copy_from));
  }
  if (s.state_copy_from != -1 && s.start_pos == 0) {
    return InvalidArgument(name + ": state_copy_from " + std::to_string(s.state_copy_from) +
                           " needs start_pos > 0 (a seq at position 0 starts from a zeroed slot)");
  }
  const int64_t end = static_cast<int64_t>(s.start_pos) + s.tokens.size();
  if (s.checkpoint_slot != -1 && (s.checkpoint_len <= s.start_pos || s.checkpoint_len > end)) {
    return InvalidArgument(name + ": checkpoint_len " + std::to_string(s.checkpoint_len) +
                           " is outside (start_pos " + std::to_string(s.start_pos) + ", " +
                           std::to_string(end) + "]");
  }
  return Status::Ok();
}

// Across the seqs of one batch: on each device, every slot is written by at
// most one seq (its state_slot or its checkpoint_slot), and no copy source is
// written in the same step (a published checkpoint is read-only; several
// seqs may copy the same one).
Status ValidateSlotsAcrossSeqs(const BatchInput& batch) {
  struct Use {
    int device, slot;
    size_t seq;
    bool operator<(const Use& o) const {
      return device != o.device ? device < o.device : slot != o.slot ? slot < o.slot : seq < o.seq;
    }
  };
  std::vector<Use> written;
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    const SeqInput& s = batch.seqs[i];
    written.push_back({s.device, s.state_slot, i});
    if (s.checkpoint_slot != -1) written.push_back({s.device, s.checkpoint_slot, i});
  }
  std::sort(written.begin(), written.end());
  for (size_t j = 1; j < written.size(); ++j) {
    const Use &a = written[j - 1], &b = written[j];
    if (a.device == b.device && a.slot == b.slot) {
      return InvalidArgument("state slot " + std::to_string(a.slot) + " on device " +
                             std::to_string(a.device) + " is written by both " +
                             SeqName(a.seq, batch.seqs[a.seq]) + " and " +
                             SeqName(b.seq, batch.seqs[b.seq]));
    }
  }
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    const SeqInput& s = batch.seqs[i];
    if (s.state_copy_from == -1) continue;
    auto it = std::lower_bound(written.begin(), written.end(), Use{s.device, s.state_copy_from, 0});
    if (it != written.end() && it->device == s.device && it->slot == s.state_copy_from) {
      return InvalidArgument(SeqName(i, s) + ": state_copy_from " +
                             std::to_string(s.state_copy_from) + " on device " +
                             std::to_string(s.device) + " is written in the same step by " +
                             SeqName(it->seq, batch.seqs[it->seq]));
    }
  }
  return Status::Ok();
}

// Runs P DeviceWorkers on P persistent threads. The runner thread publishes a
// job, bumps the generation and waits until every worker has finished it; a
// worker holds no lock while it computes.
class ModelRunnerImpl final : public ModelRunner {
 public:
  ModelRunnerImpl(const ModelConfig& config, const ModelRunnerOptions& options, ExpertMap map)
      : config_(config),
        options_(options),
        epoch_(SpanRecorder::Clock::now()),
        map_(std::move(map)),
        comm_(options.devices) {
    for (int d = 0; d < options.devices; ++d) {
      workers_.push_back(std::make_unique<DeviceWorker>(config, options, d, &map_, &comm_, epoch_));
    }
    local_.resize(options.devices);
    counts_.resize(options.devices);
    for (int d = 0; d < options.devices; ++d) {
      threads_.emplace_back([this, d] { Loop(d); });
    }
    job_ = Job{JobKind::kBuild};
    RunJob();
    for (const auto& w : workers_) buffers_.push_back(w->expert_buffer());
    mover_ = std::make_unique<ExpertMover>(&map_, buffers_);
  }

  ~ModelRunnerImpl() override {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

  Result<StepOutput> Step(const BatchInput& batch, TraceLevel level) override {
    RETURN_IF_ERROR(poisoned_);
    RETURN_IF_ERROR(Validate(batch));
    StepOutput out;
    out.outputs.resize(batch.seqs.size());
    next_tokens_.assign(batch.seqs.size(), -1);
    Run(batch, level, /*want_logits=*/false);
    for (size_t i = 0; i < batch.seqs.size(); ++i) {
      out.outputs[i].request_id = batch.seqs[i].request_id;
      out.outputs[i].next_token = next_tokens_[i];
    }
    out.expert_counts.assign(config_.layers, std::vector<int64_t>(config_.experts, 0));
    for (int d = 0; d < devices(); ++d) {
      for (int l = 0; l < config_.layers; ++l) {
        for (int e = 0; e < config_.experts; ++e) {
          out.expert_counts[l][e] += counts_[d][static_cast<size_t>(l) * config_.experts + e];
        }
      }
      std::vector<telemetry::Span>& spans = workers_[d]->recorder().mutable_spans();
      out.spans.insert(out.spans.end(), std::make_move_iterator(spans.begin()),
                       std::make_move_iterator(spans.end()));
      spans.clear();
    }
    out.comm_bytes = last_comm_bytes_;
    return out;
  }

  Result<std::vector<std::vector<float>>> Logits(const BatchInput& batch) override {
    RETURN_IF_ERROR(poisoned_);
    RETURN_IF_ERROR(Validate(batch));
    std::vector<std::vector<float>> logits(batch.seqs.size());
    logits_ = &logits;
    Run(batch, TraceLevel::kOff, /*want_logits=*/true);
    logits_ = nullptr;
    return logits;
  }

  // The first device whose weights failed to load, else OK.
  Status BuildStatus() const {
    for (const auto& w : workers_) RETURN_IF_ERROR(w->build_status());
    return Status::Ok();
  }

  const ModelConfig& config() const override { return config_; }
  int devices() const override { return options_.devices; }
  KvPool& kv_pool(int device) override { return workers_[device]->pool(); }
  StatePool& state_pool(int device) override { return workers_[device]->state_pool(); }
  std::vector<int> expert_device() const override {
    const int layer = std::min(map_.first_moe(), map_.layers() - 1);
    std::vector<int> out(config_.experts);
    for (int e = 0; e < config_.experts; ++e) {
      out[e] = map_.slot_device(map_.replicas(layer, e)[0]);
    }
    return out;
  }
  const ExpertMap& expert_map() const override { return map_; }
  Result<ExpertMoveStats> StageExpertLayer(int layer, const std::vector<int>& phy2log_row,
                                           int64_t fail_after_bytes) override {
    return mover_->Stage(layer, phy2log_row, fail_after_bytes);
  }
  Result<ExpertMoveStats> CommitExpertLayer(int layer) override { return mover_->Commit(layer); }
  void AbortStagedExpertLayer() override { mover_->Abort(); }
  SpanRecorder::Clock::time_point epoch() const override { return epoch_; }

  ParallelMode parallel_mode() const override {
    return buffers_[0] != nullptr ? buffers_[0]->mode() : ParallelMode::kEP;
  }
  const SwitchStats& last_switch() const override { return last_switch_; }
  const UnifiedExpertBuffer* expert_buffer(int device) const override { return buffers_[device]; }

  Result<SwitchStats> SwitchParallelism(ParallelMode target, const FaultPlan* fault) override {
    RETURN_IF_ERROR(poisoned_);
    const ParallelMode from = parallel_mode();
    if (from == target) return SwitchStats{.from = from, .to = target};
    const SteadyClock::time_point t0 = SteadyClock::now();
    RETURN_IF_ERROR(CheckSwitch(config_, map_, buffers_));
    if (Status s = mover_->Pause(); !s.ok()) {
      return FailedPrecondition("cannot switch parallelism: " + s.message());
    }
    switches_.assign(devices(), DeviceSwitch{});
    job_ = Job{.kind = JobKind::kReshard, .target = target, .fault = fault};
    RunJob();
    mover_->Resume();
    const Status s = FoldSwitch(from, target, switches_, MsSince(t0), &last_switch_);
    if (s.code() == StatusCode::kInternal) poisoned_ = s;
    if (!s.ok()) return s;
    return last_switch_;
  }

  Status MoveRequestState(const std::vector<StateMove>& moves) override {
    RETURN_IF_ERROR(poisoned_);
    std::vector<KvPool*> kv;
    std::vector<StatePool*> state;
    for (int d = 0; d < devices(); ++d) {
      kv.push_back(&kv_pool(d));
      state.push_back(&state_pool(d));
    }
    return engine::MoveRequestState(moves, kv, state);
  }

 private:
  enum class JobKind { kBuild, kForward, kReshard };
  struct Job {
    JobKind kind = JobKind::kForward;
    const BatchInput* batch = nullptr;
    TraceLevel level = TraceLevel::kOff;
    bool want_logits = false;
    ParallelMode target = ParallelMode::kEP;  // kReshard
    const FaultPlan* fault = nullptr;         // kReshard
  };

  // Checks everything the workers would otherwise trust; on error nothing
  // has been written to any pool.
  Status Validate(const BatchInput& batch) const {
    std::vector<int64_t> ids;
    ids.reserve(batch.seqs.size());
    for (size_t i = 0; i < batch.seqs.size(); ++i) {
      const SeqInput& s = batch.seqs[i];
      if (s.device < 0 || s.device >= devices()) {
        return InvalidArgument(SeqName(i, s) + ": device " + std::to_string(s.device) +
                               " is outside [0, " + std::to_string(devices()) + ")");
      }
      if (s.tokens.empty()) return InvalidArgument(SeqName(i, s) + ": has no tokens");
      if (s.start_pos < 0) {
        return InvalidArgument(SeqName(i, s) + ": start_pos " + std::to_string(s.start_pos) +
                               " is negative");
      }
      const int64_t end = static_cast<int64_t>(s.start_pos) + s.tokens.size();
      if (end > config_.max_seq) {
        return InvalidArgument(SeqName(i, s) + ": start_pos " + std::to_string(s.start_pos) +
                               " + " + std::to_string(s.tokens.size()) +
                               " tokens exceeds max_seq " + std::to_string(config_.max_seq));
      }
      for (size_t t = 0; t < s.tokens.size(); ++t) {
        if (s.tokens[t] < 0 || s.tokens[t] >= config_.vocab) {
          return InvalidArgument(SeqName(i, s) + ": token " + std::to_string(s.tokens[t]) +
                                 " at index " + std::to_string(t) + " is outside the vocab [0, " +
                                 std::to_string(config_.vocab) + ")");
        }
      }
      const int need = KvPool::PagesFor(static_cast<int>(end), options_.page_size);
      if (static_cast<int>(s.pages.size()) < need) {
        return InvalidArgument(SeqName(i, s) + ": page table has " +
                               std::to_string(s.pages.size()) + " pages, " + std::to_string(need) +
                               " needed for " + std::to_string(end) + " positions at page_size " +
                               std::to_string(options_.page_size));
      }
      for (int p = 0; p < need; ++p) {
        if (s.pages[p] < 0 || s.pages[p] >= options_.kv_pages_per_device) {
          return InvalidArgument(SeqName(i, s) + ": page id " + std::to_string(s.pages[p]) +
                                 " at index " + std::to_string(p) + " is outside [0, " +
                                 std::to_string(options_.kv_pages_per_device) + ")");
        }
      }
      if (config_.linear_layers() > 0 &&
          (s.state_slot < 0 || s.state_slot >= options_.state_slots_per_device)) {
        return InvalidArgument(SeqName(i, s) + ": state slot " + std::to_string(s.state_slot) +
                               " is outside [0, " +
                               std::to_string(options_.state_slots_per_device) +
                               ") (the model has linear-attention layers)");
      }
      RETURN_IF_ERROR(ValidatePrefixFields(
          i, s, config_.linear_layers() > 0 ? options_.state_slots_per_device : 0));
      if (!std::isfinite(s.temperature) || s.temperature < 0.0f) {
        return InvalidArgument(SeqName(i, s) + ": temperature " + std::to_string(s.temperature) +
                               " must be finite and >= 0");
      }
      ids.push_back(s.request_id);
    }
    std::sort(ids.begin(), ids.end());
    auto dup = std::adjacent_find(ids.begin(), ids.end());
    if (dup != ids.end()) {
      return InvalidArgument("request " + std::to_string(*dup) +
                             " appears more than once in the batch");
    }
    if (config_.linear_layers() > 0) RETURN_IF_ERROR(ValidateSlotsAcrossSeqs(batch));
    return Status::Ok();
  }

  void Run(const BatchInput& batch, TraceLevel level, bool want_logits) {
    for (auto& l : local_) l.clear();
    for (size_t i = 0; i < batch.seqs.size(); ++i) {
      local_[batch.seqs[i].device].push_back(static_cast<int>(i));
    }
    for (auto& c : counts_) c.assign(static_cast<size_t>(config_.layers) * config_.experts, 0);
    int64_t before = 0;
    for (int d = 0; d < devices(); ++d) before += comm_.bytes_sent(d);
    job_ =
        Job{.kind = JobKind::kForward, .batch = &batch, .level = level, .want_logits = want_logits};
    RunJob();
    int64_t after = 0;
    for (int d = 0; d < devices(); ++d) after += comm_.bytes_sent(d);
    last_comm_bytes_ = after - before;
  }

  // Publishes job_ to every worker and blocks until all have finished it.
  void RunJob() {
    std::unique_lock<std::mutex> lk(mu_);
    pending_ = devices();
    ++generation_;
    wake_.notify_all();
    done_.wait(lk, [this] { return pending_ == 0; });
  }

  void Loop(int d) {
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lk(mu_);
        wake_.wait(lk, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
      }
      DeviceWorker& w = *workers_[d];
      if (job_.kind == JobKind::kBuild) {
        w.Build();
      } else if (job_.kind == JobKind::kReshard) {
        switches_[d] = w.Reshard(job_.target, job_.fault);
      } else {
        w.recorder().Reset(job_.level);
        w.Forward(*job_.batch, local_[d], job_.want_logits, StepSink{&next_tokens_, logits_},
                  &counts_[d]);
      }
      std::lock_guard<std::mutex> lk(mu_);
      if (--pending_ == 0) done_.notify_one();
    }
  }

  const ModelConfig config_;
  const ModelRunnerOptions options_;
  const SpanRecorder::Clock::time_point epoch_;
  // Read by the workers during a step; replaced row by row only by
  // mover_->Commit on the runner thread between steps.
  ExpertMap map_;
  InProcCommunicator comm_;
  std::vector<std::unique_ptr<DeviceWorker>> workers_;
  std::vector<UnifiedExpertBuffer*> buffers_;  // per device, null where none
  std::unique_ptr<ExpertMover> mover_;
  SwitchStats last_switch_;
  Status poisoned_;  // INTERNAL after a rollback that failed its checksum

  // Written by the runner thread before a job is published, read by workers
  // during it (the generation bump under mu_ orders the two).
  Job job_;
  std::vector<std::vector<int>> local_;  // seq indices per device
  std::vector<int32_t> next_tokens_;     // per seq, written by its home device
  std::vector<std::vector<float>>* logits_ = nullptr;
  std::vector<std::vector<int64_t>> counts_;  // per device [layers x experts]
  std::vector<DeviceSwitch> switches_;        // kReshard: per device
  int64_t last_comm_bytes_ = 0;

  std::mutex mu_;
  std::condition_variable wake_, done_;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;  // last member: joined before the rest dies
};

// Refuses a model that cannot fit in this machine's memory before trying to
// build it (ling3-tiny is 7B parameters: the OOM killer would be the only
// error message otherwise). Replicated tensors exist once per device; routed
// experts once per physical slot (N = `slots` per layer).
Status CheckMemory(const ModelConfig& c, const ModelRunnerOptions& o, int slots) {
  const int64_t expert_params = [&] {
    int64_t n = 0;
    for (int l = 0; l < c.layers; ++l) {
      if (c.is_moe(l)) n += static_cast<int64_t>(c.experts) * 3 * c.hidden * c.expert_inter;
    }
    return n;
  }();
  const double slot_params = static_cast<double>(expert_params) * slots / c.experts;
  const int64_t replicated = c.ParamCount() - expert_params;
  const int64_t kv = static_cast<int64_t>(o.kv_pages_per_device) * o.page_size *
                     c.full_attention_layers() * c.kv_floats_per_token_layer();
  const int64_t state = c.linear_layers() > 0 ? static_cast<int64_t>(o.state_slots_per_device) *
                                                    c.linear_layers() * c.state_floats_per_layer()
                                              : 0;
  const double need =
      4.0 * (static_cast<double>(replicated + kv + state) * o.devices + slot_params);
  const double have = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
  if (have > 0 && need > 0.9 * have) {
    char buf[256];
    std::snprintf(buf, sizeof(buf),
                  "model '%s' needs about %.1f GiB in fp32 on %d devices (weights and pools), "
                  "more than 90%% of this machine's %.1f GiB",
                  c.name.c_str(), need / (1 << 30), o.devices, have / (1 << 30));
    return ResourceExhausted(buf);
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<ModelRunner>> ModelRunner::Create(const ModelConfig& config,
                                                         const ModelRunnerOptions& options) {
  RETURN_IF_ERROR(config.Validate());
  if (options.devices < 1) {
    return InvalidArgument("devices must be >= 1, got " + std::to_string(options.devices));
  }
  if (options.kv_pages_per_device < 1) {
    return InvalidArgument("kv_pages_per_device must be >= 1, got " +
                           std::to_string(options.kv_pages_per_device));
  }
  if (options.page_size < 1) {
    return InvalidArgument("page_size must be >= 1, got " + std::to_string(options.page_size));
  }
  if (config.linear_layers() > 0 && options.state_slots_per_device < 1) {
    return InvalidArgument(
        "state_slots_per_device must be >= 1 for a model with linear-attention "
        "layers, got " +
        std::to_string(options.state_slots_per_device));
  }
  if (!std::isfinite(options.router_skew) || options.router_skew < 0.0) {
    return InvalidArgument("router_skew must be finite and >= 0, got " +
                           std::to_string(options.router_skew));
  }
  if (options.skew_drift_steps < 0) {
    return InvalidArgument("skew_drift_steps must be >= 0, got " +
                           std::to_string(options.skew_drift_steps));
  }
  const int first_moe = std::min(config.first_k_dense_replace, config.layers);
  std::optional<ExpertMap> map;
  if (options.expert_phy2log.empty()) {
    map = ExpertMap::RoundRobin(config.layers, first_moe, config.experts, options.devices);
  } else {
    Result<ExpertMap> m = ExpertMap::DeviceMajor(config.layers, first_moe, config.experts,
                                                 options.devices, options.expert_phy2log);
    if (!m.ok()) return m.status();
    map = std::move(m).value();
  }
  RETURN_IF_ERROR(CheckMemory(config, options, map->slots()));
  // Device workers are the parallelism; BLAS threads would oversubscribe.
  openblas_set_num_threads(1);
  auto runner = std::make_unique<ModelRunnerImpl>(config, options, std::move(*map));
  RETURN_IF_ERROR(runner->BuildStatus());
  return std::unique_ptr<ModelRunner>(std::move(runner));
}

}  // namespace sy::engine
