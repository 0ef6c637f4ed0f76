#include "engine/model_executor/model_runner.h"

#include <cblas.h>

#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "base/stopwatch.h"
#include "engine/distributed/inproc_communicator.h"
#include "engine/model_executor/device_worker.h"
#include "engine/model_executor/expert_mover.h"
#include "engine/model_executor/parallel_switch.h"
#include "engine/model_executor/runner_checks.h"

namespace sy::engine {

namespace {

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
  Status Validate(const BatchInput& batch) const { return ValidateBatch(batch, config_, options_); }

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
  RETURN_IF_ERROR(ValidateRunnerOptions(config, options));
  ASSIGN_OR_RETURN(ExpertMap map, StartingExpertMap(config, options));
  RETURN_IF_ERROR(CheckMemory(config, options, map.slots()));
  // Device workers are the parallelism; BLAS threads would oversubscribe.
  openblas_set_num_threads(1);
  auto runner = std::make_unique<ModelRunnerImpl>(config, options, std::move(map));
  RETURN_IF_ERROR(runner->BuildStatus());
  return std::unique_ptr<ModelRunner>(std::move(runner));
}

}  // namespace sy::engine
