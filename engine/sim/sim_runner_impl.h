// File: engine/sim/sim_runner_impl.h
//
// SimRunner: the ModelRunner of sim_runner.h (internal; CreateSimRunner is
// the way in). sim_runner.cc holds construction and Step; sim_moves.cc the
// between-step operations that move weights or state (StageExpertLayer /
// CommitExpertLayer, SwitchParallelism, MoveRequestState), each priced by
// the cost model and paid on the VirtualClock.
//
// Thread-safety: as ModelRunner. StageExpertLayer may run on another thread
// during Step: it reads map_ (which only CommitExpertLayer, on the runner
// thread, writes) and the staging state, guarded by mu_.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "engine/model_executor/model_runner.h"
#include "engine/sim/routing_model.h"
#include "engine/sim/sim_runner.h"
#include "engine/sim/sim_step.h"

namespace sy::engine {

class SimRunner final : public ModelRunner {
 public:
  SimRunner(const ModelConfig& config, const ModelRunnerOptions& options, const SimOptions& sim,
            ExpertMap map, RoutingModel routing);

  Result<StepOutput> Step(const BatchInput& batch, TraceLevel level) override;
  Result<std::vector<std::vector<float>>> Logits(const BatchInput& batch) override;
  const ModelConfig& config() const override { return config_; }
  int devices() const override { return options_.devices; }
  KvPool& kv_pool(int device) override { return *kv_[device]; }
  StatePool& state_pool(int device) override { return *state_[device]; }
  std::vector<int> expert_device() const override;
  const ExpertMap& expert_map() const override { return map_; }
  Result<ExpertMoveStats> StageExpertLayer(int layer, const std::vector<int>& phy2log_row,
                                           int64_t fail_after_bytes) override;
  Result<ExpertMoveStats> CommitExpertLayer(int layer) override;
  void AbortStagedExpertLayer() override;
  SpanRecorder::Clock::time_point epoch() const override { return epoch_; }
  ParallelMode parallel_mode() const override { return mode_; }
  int prefill_group() const override { return AttentionDevices(mode_); }
  Result<SwitchStats> SwitchParallelism(ParallelMode target, const FaultPlan* fault) override;
  Status CheckLayoutCapacity(ParallelMode target) const override;
  std::vector<int> LayoutOverflowPages(ParallelMode target) const override;
  Status MoveRequestState(const std::vector<StateMove>& moves) override;
  const SwitchStats& last_switch() const override { return last_switch_; }
  const UnifiedExpertBuffer* expert_buffer(int) const override { return nullptr; }

 private:
  enum class Staging { kIdle, kStaged, kPaused };
  // The CPU runner's CheckSwitch (parallel_switch.h) for the sim's shape.
  Status CheckSwitch() const;
  // ExpertMover::CheckBuffers: FAILED_PRECONDITION unless live moves can run.
  Status CheckLiveMoves() const;
  // Bytes of one used KV page and one used state slot as the accelerator
  // holds them (bf16 KV or latent, fp32 recurrent state).
  double PageBytes() const;
  double SlotBytes() const;
  // Advances the clock by `ms` of simulated pause.
  void Pause(double ms);
  // Devices a request's attention runs on in `mode` (TP: P; EP:
  // attention_tp), the devices its KV cache is split over there (the cost
  // model's cache_split: min(T, kv_heads) for MHA, 1 for an MLA latent),
  // and the KV pages a device's pool may hold (sim_runner.h "KV capacity").
  int AttentionDevices(ParallelMode mode) const;
  int KvSplit(ParallelMode mode) const;
  int KvCapacity(ParallelMode mode) const;

  const ModelConfig config_;
  const ModelRunnerOptions options_;
  const SimOptions sim_;
  const SpanRecorder::Clock::time_point epoch_;
  ExpertMap map_;  // written only by CommitExpertLayer (runner thread)
  ParallelMode mode_ = ParallelMode::kEP;
  std::vector<std::unique_ptr<KvPool>> kv_;
  std::vector<std::unique_ptr<StatePool>> state_;
  RoutingModel routing_;
  StepPricer pricer_;
  SwitchStats last_switch_;
  uint64_t reshards_ = 0;  // switches that changed the layout

  // Step scratch.
  std::vector<DeviceLoad> loads_;
  std::vector<std::vector<int64_t>> counts_;

  std::mutex mu_;
  // Guarded by mu_.
  Staging staging_ = Staging::kIdle;
  int staged_layer_ = -1;
  uint64_t staged_at_reshards_ = 0;
  std::optional<ExpertMap> staged_map_;
  std::vector<int> staged_slots_;  // per device: slots whose expert changes
  ExpertMoveStats staged_stats_;
};

}  // namespace sy::engine
