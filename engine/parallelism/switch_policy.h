// File: engine/parallelism/switch_policy.h
//
// SwitchPolicy: when to move the MoE layout between tensor parallel (TP, wins
// at low concurrency) and expert parallel (EP, wins at high concurrency), the
// asymmetric-hysteresis policy of Moebius (seed 003 §7). Pure decision logic:
// it owns no layout, starts no switch and reads no clock. The scheduler feeds
// it one PolicyObservation per step and gets back a Decision to act on and to
// publish as an event.
//
//   SwitchPolicy policy(PolicyOptions{});            // auto, T_h 256, T_l 0.8 T_h
//   RETURN_IF_ERROR(policy.ApplyCommand("t_high=64 window=32"));
//   Decision d = policy.Observe({.step = s, .running = 70, .waiting = 3,
//                                .layout = PolicyLayout::kTp, .transition_in_progress = false,
//                                .other_layout_fits = true, .rollout = false});
//   if (!d.repeat) Publish(d);               // d.reason: "batch 70 >= T_h 64: switch to EP now"
//   if (d.action == SwitchAction::kSwitchToEp) StartSwitch(...);
//
// The rules, once per step. The step's batch is the requests running after
// it plus the prompt tokens waiting to be prefilled, at most one step's
// budget (PolicyObservation::prefill_tokens): the rows the next step's
// expert GEMMs face, where a decoding request is one row and a prompt chunk
// of n tokens is n; the crossover is about those rows. In pure decode it
// is the running count of seed 003's rule.
//   - in TP, three ways to EP, each at once (burst onset hurts TTFT now):
//     running >= T_h (seed 003's rule); a queue of at least Q requests
//     with the step's batch >= T_h (a burst: prompts load TP's narrow
//     expert slices long before enough requests run to cross T_h, and one
//     more TP step prefilling them is what the burst's first requests pay
//     for); or a median batch over the last W steps (full only) >= T_h (a
//     load that grew slowly). Long prompts in a quiet period trip none of
//     them: each queues alone, and a few long steps move a median not at
//     all (they moved a mean past T_h and set off a 3 s EP excursion);
//   - in EP: the mean batch over the last W steps (full window only) < T_l
//     switches to TP (a single dip does not move the mean enough);
//   - rollout variant (§7.3; rollout=on, or rollout=auto and the observation
//     says the workload is a rollout): T_l = T_h and W = 1, since the batch
//     only shrinks and cannot oscillate;
//   - a wanted switch is held back while fewer than C steps have passed since
//     the last switch (cooldown), or when the caller says the other layout
//     cannot hold the current requests (capacity check of §7.1);
//   - nothing is decided while a switch or rebalance is in progress;
//   - manual mode never decides a switch; it still reports batch and
//     thresholds so the console can show them.
// The cooldown restarts both when the policy decides a switch (so a refused
// or failed attempt is not retried every step) and when the observed layout
// changes (a manual `switch` counts too).
//
// Thread-safety: not thread-safe; owned and called by the scheduler thread.
// Commands from the console must be handed to that thread before
// ApplyCommand.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace sy::engine {

// The policy's own view of the layout kind; the engine maps its layout to it.
enum class PolicyLayout { kTp, kEp };
enum class PolicyMode { kManual, kAuto };
// kAuto applies the rollout variant when PolicyObservation::rollout is set.
enum class RolloutVariant { kAuto, kOn, kOff };
enum class SwitchAction { kNone, kSwitchToTp, kSwitchToEp };

// Why a decision was taken; two consecutive kNone decisions with the same Why
// (and layout) are the same intent, so the second is flagged as a repeat.
// Names (WhyName) appear in events: never rename.
enum class DecisionWhy {
  kManual,         // manual mode: report only
  kInProgress,     // a switch or rebalance is running
  kBelowHigh,      // TP and count < T_h: stay
  kAboveHigh,      // TP and count (or median batch) >= T_h: switch to EP
  kQueued,         // TP, >= Q requests queued and batch >= T_h: switch to EP
  kWindowFilling,  // EP and fewer than W samples: stay
  kAboveLow,       // EP and mean >= T_l: stay
  kBelowLow,       // EP and mean < T_l: switch to TP
  kCooldown,       // a switch is wanted but the cooldown is running
  kCapacity,       // a switch is wanted but the other layout cannot hold the requests
};

std::string_view PolicyLayoutName(PolicyLayout l);      // "tp", "ep"
std::string_view PolicyModeName(PolicyMode m);          // "manual", "auto"
std::string_view RolloutVariantName(RolloutVariant r);  // "auto", "on", "off"
std::string_view SwitchActionName(SwitchAction a);      // "none", "switch_to_tp", "switch_to_ep"
std::string_view WhyName(DecisionWhy w);  // "manual", "in_progress", "below_high", "queued", ...

struct PolicyOptions {
  // manual: only operator `switch` commands move the layout.
  PolicyMode mode = PolicyMode::kAuto;
  // TP -> EP as soon as the running count reaches this (the paper's 256 for
  // Qwen3-235B on 8xH200; `calibrate` measures it for this engine).
  int t_high = 256;
  // EP -> TP when the windowed mean falls below this. Unset: 0.8 * t_high
  // (the paper's ratio), following t_high when it changes. REQUIRES
  // 0 < t_low <= t_high; equal removes the hysteresis band.
  std::optional<double> t_low;
  // Steps averaged for EP -> TP. Longer ignores longer dips but returns to TP
  // later after a burst ends.
  int window = 64;
  // Q: TP -> EP at once when at least this many requests wait and the
  // step's batch reaches T_h; 0 turns the rule off. A quiet period queues
  // the few requests that arrived during one step (at 5 req/s and 50 ms
  // steps, 0.25 on average; 4 at most in moebius-bursty's quiet phases),
  // a burst's first steps 8-34 (docs/PARALLELISM.md).
  int queue = 8;
  // Steps that must pass after a switch before the next one. The paper uses
  // 5 s; steps keep the policy free of clocks and replayable.
  int cooldown = 50;
  RolloutVariant rollout = RolloutVariant::kAuto;
};

// OK, or INVALID_ARGUMENT naming the field: "policy: t_low 300 must be <= t_high 256".
Status ValidatePolicyOptions(const PolicyOptions& o);
// T_l in effect: o.t_low or 0.8 * o.t_high.
double EffectiveTLow(const PolicyOptions& o);
// "mode=auto t_high=256 t_low=204.8 (0.8 t_high) window=64 cooldown=50 queue=8
// rollout=auto".
std::string DescribePolicyOptions(const PolicyOptions& o);

// What the scheduler sees at the end of one step.
struct PolicyObservation {
  int64_t step = 0;  // step index; REQUIRES non-decreasing across calls
  int running = 0;   // requests in the running batch; REQUIRES >= 0
  // Prompt tokens not yet prefilled, of running chunks and queued requests
  // (arrivals during the step included; a queued prompt's cached prefix
  // left out), capped at one step's budget (Scheduler::
  // pending_prefill_tokens); added to `running` in the step's batch, so a
  // burst counts before the old layout prefills it. REQUIRES >= 0.
  int prefill_tokens = 0;
  // Queued requests (the queue rule; reported in the decision); their
  // prompt tokens count through prefill_tokens. REQUIRES >= 0.
  int waiting = 0;
  PolicyLayout layout = PolicyLayout::kTp;  // the layout serving now
  bool transition_in_progress = false;      // a switch or rebalance is running
  // Capacity check done by the caller: the other layout can hold every
  // running request (KV pages and state slots) after a switch.
  bool other_layout_fits = true;
  bool rollout = false;  // the workload is an RL rollout (batch only shrinks)
};

// One decision with the figures behind it, enough to publish as an event.
struct Decision {
  SwitchAction action = SwitchAction::kNone;
  DecisionWhy why = DecisionWhy::kManual;
  // Precise and human-readable, e.g. "batch 270 >= T_h 256: switch to EP now",
  // "mean batch 198.4 over 64 steps < T_l 204.8 but cooldown 37 steps left".
  std::string reason;
  // kNone with the same `why`, layout and rollout flag as the previous
  // decision (the figures in `reason` may differ): the caller may skip
  // publishing it. Never set on a switch.
  bool repeat = false;
  int64_t step = 0;
  PolicyLayout layout = PolicyLayout::kTp;
  PolicyMode mode = PolicyMode::kAuto;
  int batch = 0;
  int waiting = 0;
  double mean = 0;    // mean batch over `window` (EP -> TP)
  double median = 0;  // median batch over `window` (TP -> EP on slow growth)
  // The window mean and median cover: W, or 1 in EP under the rollout variant.
  int window = 0;
  int window_filled = 0;  // samples in the window, <= window
  int t_high = 0;
  double t_low = 0;       // T_l in effect (T_h under rollout)
  int cooldown_left = 0;  // steps until a switch may be decided again
  bool rollout = false;   // the rollout variant was applied
};

class SwitchPolicy {
 public:
  // REQUIRES: ValidatePolicyOptions(options).ok() (asserted); use Create to
  // validate input from outside.
  explicit SwitchPolicy(const PolicyOptions& options);
  static Result<SwitchPolicy> Create(const PolicyOptions& options);

  // Records the step's count and decides. Call once per step.
  Decision Observe(const PolicyObservation& obs);

  const PolicyOptions& options() const { return options_; }
  // Replaces every option, or returns INVALID_ARGUMENT and keeps the old
  // ones. The count history is kept; the next decision is never a repeat.
  Status SetOptions(const PolicyOptions& options);
  // The `policy` command: whitespace-separated "key=value" pairs (keys mode,
  // t_high, t_low, window, cooldown, queue, rollout) or a bare "manual" /
  // "auto".
  // "t_low=auto" returns T_l to 0.8 * t_high. All pairs apply or none:
  // INVALID_ARGUMENT names the bad key or value. Empty args change nothing.
  Status ApplyCommand(std::string_view args);

 private:
  void Record(int count);
  double WindowMean(int w) const;
  double WindowMedian(int w) const;
  int WindowFilled(int w) const;

  PolicyOptions options_;
  std::deque<int> history_;  // latest batches, newest at the back, at most options_.window
  std::optional<int64_t> last_switch_step_;
  std::optional<int64_t> last_step_;  // to assert that steps do not go back
  std::optional<PolicyLayout> last_layout_;
  // The intent of the previous decision, for repeat flagging; reset when
  // the options change.
  struct Intent {
    DecisionWhy why;
    PolicyLayout layout;
    bool rollout;
  };
  std::optional<Intent> last_intent_;
};

}  // namespace sy::engine
