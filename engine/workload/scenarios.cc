// File: engine/workload/scenarios.cc
//
// The single-request scenarios: poisson, bursty, rollout and shared-prefix
// (agentic.cc has the sessions, workload_file.cc the trace replay).
#include "engine/workload/scenarios.h"

#include <algorithm>
#include <string>

namespace sy::engine::workload_internal {
namespace {

// Poisson arrivals at `rate`; with `burst`, every request at t = 0.
class Poisson final : public Scenario {
 public:
  explicit Poisson(const WorkloadOptions& o) : o_(o) {}

  bool Next(TokenSource& src, Arrival* a) override {
    if (!o_.burst) t_s_ += src.Exponential(o_.rate);
    a->time_us = o_.burst ? 0 : ToUs(t_s_);
    a->spec.prompt = src.Prompt(std::min(src.Draw(o_.prompt_len), o_.max_prompt_tokens));
    a->spec.max_new_tokens = src.Draw(o_.output_len);
    return true;
  }

 private:
  const WorkloadOptions& o_;
  double t_s_ = 0;
};

// Quiet and burst phases alternate, starting quiet. The process within a
// phase is Poisson at the phase's rate; since a Poisson process is
// memoryless, a gap that would cross the phase's end is redrawn from the end
// at the next phase's rate (exact for piecewise-constant rates).
class Bursty final : public Scenario {
 public:
  explicit Bursty(const WorkloadOptions& o) : o_(o) {}

  bool Next(TokenSource& src, Arrival* a) override {
    for (;;) {
      const bool listed = !o_.phases.empty();
      if (listed && phase_ >= o_.phases.size()) return false;
      const double rate =
          listed ? o_.phases[phase_].rate : (in_burst_ ? o_.burst_rate : o_.quiet_rate);
      const double end_s = phase_start_s_ + (listed ? o_.phases[phase_].seconds
                                                    : (in_burst_ ? o_.burst_s : o_.quiet_s));
      if (rate > 0) {
        const double t = t_s_ + src.Exponential(rate);
        if (t < end_s) {
          t_s_ = t;
          break;
        }
      }
      t_s_ = phase_start_s_ = end_s;
      in_burst_ = !in_burst_;
      ++phase_;
    }
    a->time_us = ToUs(t_s_);
    a->spec.prompt = src.Prompt(std::min(src.Draw(o_.prompt_len), o_.max_prompt_tokens));
    a->spec.max_new_tokens = src.Draw(o_.output_len);
    return true;
  }

 private:
  const WorkloadOptions& o_;
  double t_s_ = 0;
  double phase_start_s_ = 0;
  bool in_burst_ = false;
  size_t phase_ = 0;  // index into o_.phases when they are given
};

// rollout_size requests at the same instant, then (with an interval) again
// at every multiple of it.
class Rollout final : public Scenario {
 public:
  explicit Rollout(const WorkloadOptions& o) : o_(o) {}

  bool Next(TokenSource& src, Arrival* a) override {
    if (in_step_ == o_.rollout_size) {
      if (o_.rollout_interval_s <= 0) return false;
      ++step_;
      in_step_ = 0;
    }
    ++in_step_;
    a->time_us = ToUs(static_cast<double>(step_) * o_.rollout_interval_s);
    a->spec.prompt = src.Prompt(std::min(src.Draw(o_.prompt_len), o_.max_prompt_tokens));
    a->spec.max_new_tokens = src.Draw(o_.output_len);
    return true;
  }

 private:
  const WorkloadOptions& o_;
  int64_t step_ = 0;
  int in_step_ = 0;
};

// Poisson arrivals, each a system prompt (drawn uniformly from a fixed set)
// followed by a question. The system prompts are built once, each opening
// with its own index ("[3] ..."), so they differ within their first
// 2 + digits tokens whatever the corpus draws; requests reuse the very same
// token vector, so the shared prefix is exact.
class SharedPrefix final : public Scenario {
 public:
  SharedPrefix(const WorkloadOptions& o, TokenSource& src) : o_(o) {
    const int len = std::min(o.system_prompt_len, o.max_prompt_tokens);
    for (int i = 0; i < o.system_prompts; ++i) {
      systems_.push_back(src.Text(len, true, "[" + std::to_string(i) + "] "));
    }
  }

  bool Next(TokenSource& src, Arrival* a) override {
    t_s_ += src.Exponential(o_.rate);
    a->time_us = ToUs(t_s_);
    const size_t pick = std::uniform_int_distribution<size_t>(0, systems_.size() - 1)(src.rng());
    std::vector<int32_t> prompt = systems_[pick];
    const int room = o_.max_prompt_tokens - static_cast<int>(prompt.size());
    const int question = std::min(src.Draw(o_.prompt_len), room);
    if (question > 0) {
      std::vector<int32_t> q = src.Text(question, false, "\n");
      prompt.insert(prompt.end(), q.begin(), q.end());
    }
    a->spec.prompt = std::move(prompt);
    a->spec.max_new_tokens = src.Draw(o_.output_len);
    return true;
  }

 private:
  const WorkloadOptions& o_;
  std::vector<std::vector<int32_t>> systems_;
  double t_s_ = 0;
};

}  // namespace

std::unique_ptr<Scenario> MakePoisson(const WorkloadOptions& o) {
  return std::make_unique<Poisson>(o);
}
std::unique_ptr<Scenario> MakeBursty(const WorkloadOptions& o) {
  return std::make_unique<Bursty>(o);
}
std::unique_ptr<Scenario> MakeRollout(const WorkloadOptions& o) {
  return std::make_unique<Rollout>(o);
}
std::unique_ptr<Scenario> MakeSharedPrefix(const WorkloadOptions& o, TokenSource& src) {
  return std::make_unique<SharedPrefix>(o, src);
}

}  // namespace sy::engine::workload_internal
