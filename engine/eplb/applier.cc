#include "engine/eplb/applier.h"

#include <algorithm>
#include <chrono>
#include <utility>

namespace sy::engine::eplb {

namespace {

int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

RebalanceApplier::RebalanceApplier(ModelRunner* runner) : runner_(runner) {}

RebalanceApplier::~RebalanceApplier() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    abort_ = true;
  }
  cv_.notify_all();
  if (stager_.joinable()) stager_.join();
  // A layer staged but never committed changes nothing live; drop it.
  runner_->AbortStagedExpertLayer();
}

Status RebalanceApplier::Start(const RebalancePlan& plan, std::optional<ApplierFault> fault) {
  if (active_) {
    return FailedPrecondition(
        "a rebalance is already in progress; wait for its done or failed event");
  }
  const ExpertMap& map = runner_->expert_map();
  if (static_cast<int>(plan.phy2log.size()) != map.layers()) {
    return InvalidArgument("the plan has " + std::to_string(plan.phy2log.size()) +
                           " layers, the placement " + std::to_string(map.layers()));
  }
  moves_.clear();
  old_rows_.clear();
  for (int l = 0; l < map.layers(); ++l) {
    old_rows_.push_back(map.phy2log_row(l));
    if (l >= map.first_moe() && plan.phy2log[l] != map.phy2log_row(l)) {
      moves_.push_back({.layer = l, .row = plan.phy2log[l]});
    }
  }
  fault_ = fault;
  {
    std::lock_guard<std::mutex> lk(mu_);
    staged_ = committed_ = commit_failed_ = abort_ = finished_ = false;
    events_.clear();
    longest_pause_ms_ = 0;
    layers_done_ = experts_moved_ = 0;
    bytes_ = 0;
    start_us_ = NowUs();
  }
  active_ = true;
  if (moves_.empty()) {
    Finish(ApplierEvent{.kind = ApplierEvent::Kind::kDone});
    return Status::Ok();
  }
  stager_ = std::thread([this] { StagerLoop(); });
  return Status::Ok();
}

void RebalanceApplier::StagerLoop() {
  std::vector<int> committed;
  for (const Move& m : moves_) {
    const int64_t fail_after = fault_ && fault_->layer == m.layer ? fault_->after_bytes : -1;
    std::string error;
    if (StageAndWait(m, fail_after, &error)) {
      committed.push_back(m.layer);
      continue;
    }
    ApplierEvent ev{.kind = ApplierEvent::Kind::kFailed, .failed_layer = m.layer, .error = error};
    ev.rolled_back = true;
    for (auto it = committed.rbegin(); it != committed.rend(); ++it) {
      std::string back_error;
      const Move back{.layer = *it, .row = old_rows_[*it], .rollback = true};
      if (!StageAndWait(back, -1, &back_error)) {
        ev.rolled_back = false;
        ev.error += "; rollback of layer " + std::to_string(*it) + " failed: " + back_error;
        break;
      }
    }
    Finish(std::move(ev));
    return;
  }
  Finish(ApplierEvent{.kind = ApplierEvent::Kind::kDone});
}

bool RebalanceApplier::StageAndWait(const Move& m, int64_t fail_after_bytes, std::string* error) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (abort_) {
      *error = "aborted: the engine is shutting down";
      return false;
    }
  }
  // The copy runs here, on the stager thread, while the runner keeps stepping.
  Result<ExpertMoveStats> staged = runner_->StageExpertLayer(m.layer, m.row, fail_after_bytes);
  if (!staged.ok()) {
    *error = staged.status().ToString();
    return false;
  }
  std::unique_lock<std::mutex> lk(mu_);
  staged_ = true;
  committed_ = commit_failed_ = false;
  staged_stats_ = *staged;
  staged_layer_ = m.layer;
  staged_rollback_ = m.rollback;
  cv_.wait(lk, [&] { return committed_ || commit_failed_ || abort_; });
  if (committed_) return true;
  *error = commit_failed_ ? commit_error_ : "aborted: the engine is shutting down";
  return false;
}

void RebalanceApplier::Finish(ApplierEvent ev) {
  std::lock_guard<std::mutex> lk(mu_);
  ev.layers = layers_done_;
  ev.experts_moved = experts_moved_;
  ev.bytes = bytes_;
  ev.longest_pause_ms = longest_pause_ms_;
  ev.total_ms = static_cast<double>(NowUs() - start_us_) / 1000.0;
  events_.push_back(std::move(ev));
  finished_ = true;
}

std::vector<ApplierEvent> RebalanceApplier::Poll() {
  if (!active_) return {};
  std::vector<ApplierEvent> out;
  bool finished = false;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (staged_) {
      staged_ = false;
      Result<ExpertMoveStats> c = runner_->CommitExpertLayer(staged_layer_);
      if (c.ok()) {
        ExpertMoveStats s = staged_stats_;
        s.commit_ms = c->commit_ms;
        longest_pause_ms_ = std::max(longest_pause_ms_, s.commit_ms);
        if (!staged_rollback_) {
          ++layers_done_;
          experts_moved_ += s.experts_moved;
          bytes_ += s.bytes_copied;
        }
        events_.push_back(
            {.kind = ApplierEvent::Kind::kLayer, .layer = s, .rollback = staged_rollback_});
        committed_ = true;
      } else {
        runner_->AbortStagedExpertLayer();
        commit_failed_ = true;
        commit_error_ = c.status().ToString();
      }
      cv_.notify_all();
    }
    out.swap(events_);
    finished = finished_;
  }
  if (finished) {
    if (stager_.joinable()) stager_.join();  // it returns right after Finish
    active_ = false;
    std::lock_guard<std::mutex> lk(mu_);
    finished_ = false;
  }
  return out;
}

}  // namespace sy::engine::eplb
