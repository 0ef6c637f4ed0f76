#include "engine/model_executor/expert_mover.h"

#include <chrono>
#include <cstring>
#include <string>
#include <utility>

#include "base/stopwatch.h"

namespace sy::engine {

namespace {

using Clock = SteadyClock;

}  // namespace

ExpertMover::ExpertMover(ExpertMap* map, std::vector<UnifiedExpertBuffer*> buffers)
    : map_(map), buffers_(std::move(buffers)) {}

Status ExpertMover::CheckBuffers() const {
  for (size_t d = 0; d < buffers_.size(); ++d) {
    if (buffers_[d] == nullptr) {
      return FailedPrecondition(
          "live expert moves need a unified expert buffer on every device, and device " +
          std::to_string(d) + " has none (the devices hold unequal expert slot counts: " +
          std::to_string(map_->slots()) + " slots over " + std::to_string(map_->devices()) +
          " devices, or the model has no MoE layer)");
    }
    if (buffers_[d]->mode() != ParallelMode::kEP) {
      return FailedPrecondition("live expert moves need the experts in the EP layout; device " +
                                std::to_string(d) + " holds them in " +
                                std::string(ParallelModeName(buffers_[d]->mode())));
    }
  }
  return Status::Ok();
}

Result<ExpertMoveStats> ExpertMover::Stage(int layer, const std::vector<int>& phy2log_row,
                                           int64_t fail_after_bytes) {
  const Clock::time_point t0 = Clock::now();
  std::optional<ExpertMap> next;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (state_ == State::kStaging) {
      return FailedPrecondition("cannot stage layer " + std::to_string(layer) +
                                ": staging of layer " + std::to_string(layer_) + " is in progress");
    }
    if (state_ == State::kStaged) {
      return FailedPrecondition("cannot stage layer " + std::to_string(layer) + ": layer " +
                                std::to_string(layer_) +
                                " is staged and not committed (commit or abort it first)");
    }
    if (state_ == State::kPaused) {
      return FailedPrecondition("cannot stage layer " + std::to_string(layer) +
                                ": a parallelism switch is in progress");
    }
    if (layer >= 0 && layer < map_->first_moe()) {
      return FailedPrecondition("layer " + std::to_string(layer) +
                                " is a dense layer: it has no routed experts to move");
    }
    RETURN_IF_ERROR(CheckBuffers());
    next = *map_;
    RETURN_IF_ERROR(next->SetLayer(layer, phy2log_row));
    state_ = State::kStaging;
    layer_ = layer;
    cancel_.store(false);
  }

  // Unlocked: only live slots and the map (both unchanged until Commit,
  // which waits for kStaged) are read, only staging slots written.
  const ExpertMap& live = *map_;
  const int i = layer - live.first_moe();
  const int devices = live.devices();
  const int64_t expert_bytes = buffers_[0]->expert_floats() * static_cast<int64_t>(sizeof(float));
  ExpertMoveStats stats{.layer = layer};
  std::vector<std::vector<int>> changed(devices);
  std::vector<uint64_t> reshards(devices);
  Status failure;
  for (int d = 0; d < devices && failure.ok(); ++d) {
    reshards[d] = buffers_[d]->reshards();
    const int first = live.device_first_slot(d), slots = live.device_slots(d);
    for (int k = 0; k < slots; ++k) {
      const int e = next->phy2log(layer, first + k);
      if (live.phy2log(layer, first + k) == e) continue;
      if (cancel_.load()) {
        failure = Unavailable("staging of layer " + std::to_string(layer) + " aborted");
        break;
      }
      // The source: this device's own copy if it has one, else the first replica.
      int src_dev = -1, src_k = -1;
      for (int j = 0; j < slots; ++j) {
        if (live.phy2log(layer, first + j) == e) {
          src_dev = d;
          src_k = j;
          break;
        }
      }
      if (src_dev < 0) {
        const int s = live.replicas(layer, e)[0];
        src_dev = live.slot_device(s);
        src_k = s - live.device_first_slot(src_dev);
      }
      const float* src = buffers_[src_dev]->EpExpert(i, src_k).gate_up;
      int64_t n = expert_bytes;
      if (fail_after_bytes >= 0 && stats.bytes_copied + n > fail_after_bytes) {
        n = fail_after_bytes - stats.bytes_copied;
        failure = Unavailable("injected failure staging layer " + std::to_string(layer) +
                              " after " + std::to_string(fail_after_bytes) + " bytes");
      }
      std::memcpy(buffers_[d]->StagingExpert(k), src, static_cast<size_t>(n));
      stats.bytes_copied += n;
      if (src_dev != d) stats.peer_bytes += n;
      if (!failure.ok()) break;
      stats.experts_moved += 1;
      changed[d].push_back(k);
    }
  }
  stats.stage_ms = MsSince(t0);

  std::lock_guard<std::mutex> lk(mu_);
  if (failure.ok() && cancel_.load()) {
    failure = Unavailable("staging of layer " + std::to_string(layer) + " aborted");
  }
  if (!failure.ok()) {
    state_ = State::kIdle;
    layer_ = -1;
    return failure;
  }
  state_ = State::kStaged;
  next_ = std::move(next);
  changed_ = std::move(changed);
  reshards_ = std::move(reshards);
  stats_ = stats;
  return stats;
}

Result<ExpertMoveStats> ExpertMover::Commit(int layer) {
  const Clock::time_point t0 = Clock::now();
  std::lock_guard<std::mutex> lk(mu_);
  if (state_ == State::kIdle || state_ == State::kPaused) {
    return FailedPrecondition("cannot commit layer " + std::to_string(layer) +
                              ": no expert layer is staged");
  }
  if (state_ == State::kStaging) {
    return FailedPrecondition("cannot commit layer " + std::to_string(layer) +
                              ": staging of layer " + std::to_string(layer_) +
                              " is still in progress");
  }
  if (layer != layer_) {
    return FailedPrecondition("cannot commit layer " + std::to_string(layer) + ": layer " +
                              std::to_string(layer_) + " is the one staged");
  }
  Status ready = CheckBuffers();
  for (size_t d = 0; d < buffers_.size() && ready.ok(); ++d) {
    if (buffers_[d]->reshards() != reshards_[d]) {
      ready = FailedPrecondition("cannot commit layer " + std::to_string(layer) +
                                 ": the expert buffers were resharded since it was staged "
                                 "(the staging is lost; stage it again)");
    }
  }
  if (!ready.ok()) {
    state_ = State::kIdle;
    layer_ = -1;
    next_.reset();
    return ready;
  }
  const int i = layer - map_->first_moe();
  for (size_t d = 0; d < buffers_.size(); ++d) buffers_[d]->CommitStaged(i, changed_[d], *next_);
  *map_ = std::move(*next_);
  next_.reset();
  state_ = State::kIdle;
  layer_ = -1;
  ExpertMoveStats stats = stats_;
  stats.commit_ms = MsSince(t0);
  return stats;
}

Status ExpertMover::Pause() {
  std::lock_guard<std::mutex> lk(mu_);
  if (state_ == State::kStaging) {
    return FailedPrecondition("a rebalance is in progress: layer " + std::to_string(layer_) +
                              " is being staged");
  }
  if (state_ == State::kStaged) {
    return FailedPrecondition("a rebalance is in progress: layer " + std::to_string(layer_) +
                              " is staged and not committed (commit or abort it first)");
  }
  state_ = State::kPaused;
  return Status::Ok();
}

void ExpertMover::Resume() {
  std::lock_guard<std::mutex> lk(mu_);
  if (state_ == State::kPaused) state_ = State::kIdle;
}

void ExpertMover::Abort() {
  std::lock_guard<std::mutex> lk(mu_);
  if (state_ == State::kStaging) {
    cancel_.store(true);
  } else if (state_ == State::kStaged) {
    state_ = State::kIdle;
    layer_ = -1;
    next_.reset();
  }
}

}  // namespace sy::engine
