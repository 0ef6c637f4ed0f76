#include "engine/parallelism/switch_policy.h"

#include <algorithm>
#include <cassert>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace sy::engine {
namespace {

// The paper's T_l / T_h (seed 003 §7.1).
constexpr double kDefaultLowRatio = 0.8;
// Bounds the history the policy keeps (one int per step).
constexpr int kMaxWindow = 1'000'000;
constexpr int kMaxCooldown = 100'000'000;
constexpr int kMaxQueue = 1'000'000;
constexpr std::string_view kKeys = "mode, t_high, t_low, window, cooldown, queue, rollout";

// Shortest form that round-trips the figures people read: 204.8, 256, 198.43.
std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", std::round(v * 100.0) / 100.0);
  return buf;
}

const char* LayoutUpper(PolicyLayout l) { return l == PolicyLayout::kTp ? "TP" : "EP"; }

std::string Steps(int n) { return std::to_string(n) + (n == 1 ? " step" : " steps"); }

bool ParseInt(std::string_view s, int* out) {
  if (s.empty()) return false;
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, *out);
  return ec == std::errc() && p == end;
}

bool ParseDouble(std::string_view s, double* out) {
  if (s.empty()) return false;
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, *out);
  return ec == std::errc() && p == end && std::isfinite(*out);
}

std::vector<std::string_view> SplitWords(std::string_view s) {
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == ',')) ++i;
    size_t j = i;
    while (j < s.size() && s[j] != ' ' && s[j] != '\t' && s[j] != ',') ++j;
    if (j > i) words.push_back(s.substr(i, j - i));
    i = j;
  }
  return words;
}

Status BadValue(std::string_view key, std::string_view value, std::string_view want) {
  return InvalidArgument("policy: bad value '" + std::string(value) + "' for " + std::string(key) +
                         ": want " + std::string(want));
}

}  // namespace

std::string_view PolicyLayoutName(PolicyLayout l) { return l == PolicyLayout::kTp ? "tp" : "ep"; }

std::string_view PolicyModeName(PolicyMode m) {
  return m == PolicyMode::kManual ? "manual" : "auto";
}

std::string_view RolloutVariantName(RolloutVariant r) {
  switch (r) {
    case RolloutVariant::kAuto:
      return "auto";
    case RolloutVariant::kOn:
      return "on";
    case RolloutVariant::kOff:
      return "off";
  }
  return "?";
}

std::string_view SwitchActionName(SwitchAction a) {
  switch (a) {
    case SwitchAction::kNone:
      return "none";
    case SwitchAction::kSwitchToTp:
      return "switch_to_tp";
    case SwitchAction::kSwitchToEp:
      return "switch_to_ep";
  }
  return "?";
}

std::string_view WhyName(DecisionWhy w) {
  switch (w) {
    case DecisionWhy::kManual:
      return "manual";
    case DecisionWhy::kInProgress:
      return "in_progress";
    case DecisionWhy::kBelowHigh:
      return "below_high";
    case DecisionWhy::kAboveHigh:
      return "above_high";
    case DecisionWhy::kQueued:
      return "queued";
    case DecisionWhy::kWindowFilling:
      return "window_filling";
    case DecisionWhy::kAboveLow:
      return "above_low";
    case DecisionWhy::kBelowLow:
      return "below_low";
    case DecisionWhy::kCooldown:
      return "cooldown";
    case DecisionWhy::kCapacity:
      return "capacity";
  }
  return "?";
}

Status ValidatePolicyOptions(const PolicyOptions& o) {
  if (o.t_high < 1) {
    return InvalidArgument("policy: t_high " + std::to_string(o.t_high) + " must be >= 1");
  }
  if (o.t_low.has_value()) {
    const double t = *o.t_low;
    if (!std::isfinite(t) || t <= 0) {
      return InvalidArgument("policy: t_low " + Num(t) + " must be > 0");
    }
    if (t > o.t_high) {
      return InvalidArgument("policy: t_low " + Num(t) + " must be <= t_high " +
                             std::to_string(o.t_high));
    }
  }
  if (o.window < 1 || o.window > kMaxWindow) {
    return InvalidArgument("policy: window " + std::to_string(o.window) + " must be in [1, " +
                           std::to_string(kMaxWindow) + "] steps");
  }
  if (o.cooldown < 0 || o.cooldown > kMaxCooldown) {
    return InvalidArgument("policy: cooldown " + std::to_string(o.cooldown) + " must be in [0, " +
                           std::to_string(kMaxCooldown) + "] steps");
  }
  if (o.queue < 0 || o.queue > kMaxQueue) {
    return InvalidArgument("policy: queue " + std::to_string(o.queue) + " must be in [0, " +
                           std::to_string(kMaxQueue) + "] requests (0: off)");
  }
  return Status::Ok();
}

double EffectiveTLow(const PolicyOptions& o) {
  return o.t_low.has_value() ? *o.t_low : kDefaultLowRatio * o.t_high;
}

std::string DescribePolicyOptions(const PolicyOptions& o) {
  std::string s = "mode=" + std::string(PolicyModeName(o.mode)) +
                  " t_high=" + std::to_string(o.t_high) + " t_low=" + Num(EffectiveTLow(o));
  if (!o.t_low.has_value()) s += " (0.8 t_high)";
  s += " window=" + std::to_string(o.window) + " cooldown=" + std::to_string(o.cooldown) +
       " queue=" + std::to_string(o.queue) +
       " rollout=" + std::string(RolloutVariantName(o.rollout));
  return s;
}

SwitchPolicy::SwitchPolicy(const PolicyOptions& options) : options_(options) {
  assert(ValidatePolicyOptions(options).ok());
}

Result<SwitchPolicy> SwitchPolicy::Create(const PolicyOptions& options) {
  RETURN_IF_ERROR(ValidatePolicyOptions(options));
  return SwitchPolicy(options);
}

Status SwitchPolicy::SetOptions(const PolicyOptions& options) {
  RETURN_IF_ERROR(ValidatePolicyOptions(options));
  options_ = options;
  while (static_cast<int>(history_.size()) > options_.window) history_.pop_front();
  last_intent_.reset();
  return Status::Ok();
}

Status SwitchPolicy::ApplyCommand(std::string_view args) {
  PolicyOptions next = options_;
  for (std::string_view word : SplitWords(args)) {
    const size_t eq = word.find('=');
    if (eq == std::string_view::npos) {
      if (word == "manual") {
        next.mode = PolicyMode::kManual;
      } else if (word == "auto") {
        next.mode = PolicyMode::kAuto;
      } else {
        return InvalidArgument("policy: '" + std::string(word) + "' is not key=value (keys: " +
                               std::string(kKeys) + ") nor manual|auto");
      }
      continue;
    }
    const std::string_view key = word.substr(0, eq);
    const std::string_view value = word.substr(eq + 1);
    if (key == "mode") {
      if (value == "manual") {
        next.mode = PolicyMode::kManual;
      } else if (value == "auto") {
        next.mode = PolicyMode::kAuto;
      } else {
        return BadValue(key, value, "manual or auto");
      }
    } else if (key == "t_high") {
      if (!ParseInt(value, &next.t_high)) return BadValue(key, value, "an integer batch size");
    } else if (key == "t_low") {
      double t = 0;
      if (value == "auto") {
        next.t_low.reset();
      } else if (ParseDouble(value, &t)) {
        next.t_low = t;
      } else {
        return BadValue(key, value, "a number or auto (0.8 t_high)");
      }
    } else if (key == "window") {
      if (!ParseInt(value, &next.window)) return BadValue(key, value, "an integer step count");
    } else if (key == "cooldown") {
      if (!ParseInt(value, &next.cooldown)) return BadValue(key, value, "an integer step count");
    } else if (key == "queue") {
      if (!ParseInt(value, &next.queue)) return BadValue(key, value, "an integer request count");
    } else if (key == "rollout") {
      if (value == "auto") {
        next.rollout = RolloutVariant::kAuto;
      } else if (value == "on") {
        next.rollout = RolloutVariant::kOn;
      } else if (value == "off") {
        next.rollout = RolloutVariant::kOff;
      } else {
        return BadValue(key, value, "auto, on or off");
      }
    } else {
      return InvalidArgument("policy: unknown key '" + std::string(key) +
                             "' (keys: " + std::string(kKeys) + ")");
    }
  }
  return SetOptions(next);
}

void SwitchPolicy::Record(int count) {
  history_.push_back(count);
  while (static_cast<int>(history_.size()) > options_.window) history_.pop_front();
}

int SwitchPolicy::WindowFilled(int w) const {
  return std::min(w, static_cast<int>(history_.size()));
}

double SwitchPolicy::WindowMean(int w) const {
  const int n = WindowFilled(w);
  if (n == 0) return 0;
  double sum = 0;
  for (auto it = history_.end() - n; it != history_.end(); ++it) sum += *it;
  return sum / n;
}

double SwitchPolicy::WindowMedian(int w) const {
  const int n = WindowFilled(w);
  if (n == 0) return 0;
  std::vector<int> v(history_.end() - n, history_.end());
  const auto mid = v.begin() + n / 2;
  std::nth_element(v.begin(), mid, v.end());
  if (n % 2 == 1) return *mid;
  return (*mid + *std::max_element(v.begin(), mid)) / 2.0;
}

Decision SwitchPolicy::Observe(const PolicyObservation& obs) {
  assert(obs.running >= 0 && obs.waiting >= 0 && obs.prefill_tokens >= 0);
  assert(!last_step_.has_value() || obs.step >= *last_step_);
  last_step_ = obs.step;
  Record(obs.running + obs.prefill_tokens);
  // A layout change we did not see decided (or the end of one we did) starts
  // the cooldown from the step it shows up.
  if (last_layout_.has_value() && *last_layout_ != obs.layout) last_switch_step_ = obs.step;
  last_layout_ = obs.layout;

  const bool rollout = options_.rollout == RolloutVariant::kOn ||
                       (options_.rollout == RolloutVariant::kAuto && obs.rollout);
  Decision d;
  d.step = obs.step;
  d.layout = obs.layout;
  d.mode = options_.mode;
  d.batch = obs.running;
  d.waiting = obs.waiting;
  d.rollout = rollout;
  d.t_high = options_.t_high;
  d.t_low = rollout ? static_cast<double>(options_.t_high) : EffectiveTLow(options_);
  // The rollout variant exits on one step. Entry reads the same W as the
  // exit: the fast ways in are the count and the queue, and half of W let
  // clusters of long prompts in quiet periods set off 3 s EP excursions
  // (docs/SIMULATION.md, tried and not kept).
  d.window = obs.layout == PolicyLayout::kEp && rollout ? 1 : options_.window;
  d.window_filled = WindowFilled(d.window);
  d.mean = WindowMean(d.window);
  d.median = WindowMedian(d.window);
  if (last_switch_step_.has_value()) {
    const int64_t since = obs.step - *last_switch_step_;
    d.cooldown_left = since >= options_.cooldown ? 0 : static_cast<int>(options_.cooldown - since);
  }

  const std::string batch = std::to_string(obs.running);
  const std::string th = std::to_string(d.t_high);
  const std::string tl = Num(d.t_low);
  // A switch the rules want, held back by cooldown or capacity or decided.
  auto want = [&](SwitchAction action, DecisionWhy why, std::string condition) {
    const PolicyLayout target =
        action == SwitchAction::kSwitchToEp ? PolicyLayout::kEp : PolicyLayout::kTp;
    if (d.cooldown_left > 0) {
      d.why = DecisionWhy::kCooldown;
      d.reason = condition + " but cooldown " + Steps(d.cooldown_left) + " left";
    } else if (!obs.other_layout_fits) {
      d.why = DecisionWhy::kCapacity;
      d.reason = "capacity: " + std::string(LayoutUpper(target)) + " cannot hold " + batch +
                 (obs.running == 1 ? " request" : " requests") + " (" + condition + ")";
    } else {
      d.action = action;
      d.why = why;
      d.reason = condition + ": switch to " + LayoutUpper(target) + " now";
    }
  };

  if (options_.mode == PolicyMode::kManual) {
    d.why = DecisionWhy::kManual;
    d.reason = "manual: batch " + batch + " (T_h " + th + ", T_l " + tl + ")";
  } else if (obs.transition_in_progress) {
    d.why = DecisionWhy::kInProgress;
    d.reason = "switch or rebalance in progress: batch " + batch + ", no decision";
  } else if (obs.layout == PolicyLayout::kTp) {
    if (obs.running >= d.t_high) {
      want(SwitchAction::kSwitchToEp, DecisionWhy::kAboveHigh, "batch " + batch + " >= T_h " + th);
    } else if (options_.queue > 0 && obs.waiting >= options_.queue &&
               obs.running + obs.prefill_tokens >= d.t_high) {
      want(SwitchAction::kSwitchToEp, DecisionWhy::kQueued,
           std::to_string(obs.waiting) + " queued, batch " + batch + " + " +
               std::to_string(obs.prefill_tokens) + " prompt tokens >= T_h " + th);
    } else if (d.window_filled == d.window && d.median >= d.t_high) {
      // The median, not the mean: a few steps that prefill long prompts
      // lift a mean of ~120 decode rows past T_h while TP is still the
      // faster layout for the other steps (docs/PARALLELISM.md).
      want(SwitchAction::kSwitchToEp, DecisionWhy::kAboveHigh,
           "median batch " + Num(d.median) + " over " + Steps(d.window) + " >= T_h " + th);
    } else {
      d.why = DecisionWhy::kBelowHigh;
      d.reason = "TP: batch " + batch + " < T_h " + th + ": stay";
    }
  } else if (rollout) {
    // W = 1 and T_l = T_h: the batch only shrinks, so react to it directly.
    if (obs.running < d.t_high) {
      want(SwitchAction::kSwitchToTp, DecisionWhy::kBelowLow,
           "rollout: batch " + batch + " < T_h " + th);
    } else {
      d.why = DecisionWhy::kAboveLow;
      d.reason = "EP (rollout): batch " + batch + " >= T_h " + th + ": stay";
    }
  } else if (d.window_filled < d.window) {
    d.why = DecisionWhy::kWindowFilling;
    d.reason = "EP: window " + std::to_string(d.window_filled) + "/" + std::to_string(d.window) +
               " steps filled (mean batch " + Num(d.mean) + ", T_l " + tl + "): stay";
  } else {
    const std::string mean = "mean batch " + Num(d.mean) + " over " + Steps(d.window) + " ";
    if (d.mean < d.t_low) {
      want(SwitchAction::kSwitchToTp, DecisionWhy::kBelowLow, mean + "< T_l " + tl);
    } else {
      d.why = DecisionWhy::kAboveLow;
      d.reason = "EP: " + mean + ">= T_l " + tl + ": stay";
    }
  }

  if (d.action != SwitchAction::kNone) {
    last_switch_step_ = obs.step;
    d.repeat = false;
  } else {
    d.repeat = last_intent_.has_value() && last_intent_->why == d.why &&
               last_intent_->layout == d.layout && last_intent_->rollout == d.rollout;
  }
  last_intent_ = Intent{d.why, d.layout, d.rollout};
  return d;
}

}  // namespace sy::engine
