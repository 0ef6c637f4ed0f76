// File: engine/server/workload_flags.cc
#include "engine/server/workload_flags.h"

#include <string_view>
#include <utility>
#include <vector>

#include "base/flag_checks.h"
#include "engine/workload/workload_file.h"

namespace sy::engine {
namespace {

// Scenario sets as bit masks over WorkloadKind.
constexpr unsigned Bit(WorkloadKind k) { return 1u << static_cast<unsigned>(k); }
constexpr unsigned kPoisson = Bit(WorkloadKind::kPoisson);
constexpr unsigned kBursty = Bit(WorkloadKind::kBursty);
constexpr unsigned kRollout = Bit(WorkloadKind::kRollout);
constexpr unsigned kAgentic = Bit(WorkloadKind::kAgentic);
constexpr unsigned kShared = Bit(WorkloadKind::kSharedPrefix);
constexpr unsigned kFile = Bit(WorkloadKind::kFile);
constexpr unsigned kAll = kPoisson | kBursty | kRollout | kAgentic | kShared | kFile;

// Which scenarios read each flag, and the WorkloadOptions field it sets (so a
// Validate() message naming the field can name the flag instead).
struct Knob {
  std::string_view flag;
  unsigned scenarios;
  std::string_view field;
};
constexpr Knob kKnobs[] = {
    {"--rate", kPoisson | kAgentic | kShared, "rate"},
    {"--prompt-len", kPoisson | kBursty | kRollout | kShared, "prompt_len"},
    {"--output-len", kAll & ~kFile, "output_len"},
    {"--duration", kAll, "duration_s"},
    {"--requests", kAll, "max_requests"},
    {"--temperature", kAll, "temperature"},
    {"--quiet-rate", kBursty, "quiet_rate"},
    {"--burst-rate", kBursty, "burst_rate"},
    {"--quiet-s", kBursty, "quiet_s"},
    {"--burst-s", kBursty, "burst_s"},
    {"--phases", kBursty, "phases"},
    {"--rollout-size", kRollout, "rollout_size"},
    {"--rollout-interval", kRollout, "rollout_interval_s"},
    {"--turns", kAgentic, "turns_"},
    {"--first-turn-len", kAgentic, "first_turn_len"},
    {"--append-tokens", kAgentic, "append_tokens"},
    {"--think-s", kAgentic, "think_s"},
    {"--system-prompts", kShared, "system_prompts"},
    {"--system-prompt-len", kShared, "system_prompt_len"},
};

std::string ScenarioList(unsigned mask) {
  std::string s;
  for (WorkloadKind k :
       {WorkloadKind::kPoisson, WorkloadKind::kBursty, WorkloadKind::kRollout,
        WorkloadKind::kAgentic, WorkloadKind::kSharedPrefix, WorkloadKind::kFile}) {
    if (!(mask & Bit(k))) continue;
    s += (s.empty() ? "" : ", ") + (k == WorkloadKind::kFile
                                        ? std::string("--workload-file")
                                        : "--workload " + std::string(WorkloadKindName(k)));
  }
  return s;
}

CLI::Validator LengthValidator() {
  return CLI::Validator(
      [](std::string& s) {
        Result<LengthDist> d = LengthDist::Parse(s);
        return d.ok() ? std::string() : d.status().message();
      },
      "LENGTH", "length");
}

// --turns: "N" or "MIN-MAX", both >= 1.
Result<std::pair<int, int>> ParseTurns(const std::string& text) {
  Result<LengthDist> d = LengthDist::Parse(text);
  if (!d.ok() || d->kind == LengthDist::Kind::kLogNormal) {
    return InvalidArgument("bad turns '" + text + "': expected N or MIN-MAX (>= 1)");
  }
  return std::pair<int, int>{d->min, d->max};
}

CLI::Validator TurnsValidator() {
  return CLI::Validator(
      [](std::string& s) {
        Result<std::pair<int, int>> t = ParseTurns(s);
        return t.ok() ? std::string() : t.status().message();
      },
      "TURNS", "turns");
}

// Options are registered through here so every one records its appearance.
template <typename T>
CLI::Option* Add(CLI::App* app, WorkloadFlags* flags, const std::string& name, T& value,
                 const std::string& help) {
  return app->add_option(name, value, help)
      ->each([flags, name](const std::string&) { flags->given.insert(name); })
      ->capture_default_str();
}

// Replaces a Validate() message naming a field by one naming its flag.
Status NameTheFlag(const Status& s) {
  for (const Knob& k : kKnobs) {
    if (std::string_view(s.message()).substr(0, k.field.size()) == k.field) {
      return s.WithContext(std::string(k.flag));
    }
  }
  return s.WithContext("workload");
}

}  // namespace

void AddWorkloadFlags(CLI::App* app, WorkloadFlags* f) {
  Add(app, f, "--workload", f->workload,
      "built-in workload: poisson (Poisson arrivals), bursty (quiet and burst phases), rollout "
      "(batches released at once, long-tailed outputs), agentic (multi-turn sessions with "
      "growing prompts), shared-prefix (a few system prompts + questions), none (no workload)")
      ->check(CLI::IsMember({"poisson", "bursty", "rollout", "agentic", "shared-prefix", "none"}));
  Add(app, f, "--workload-file", f->workload_file,
      "replay a JSONL trace exactly (docs/WORKLOADS.md); instead of --workload");
  Add(app, f, "--rate", f->rate,
      "Poisson arrival rate: requests/s (poisson, shared-prefix) or sessions/s (agentic, "
      "default 0.5 there)")
      ->check(Positive());
  Add(app, f, "--prompt-len", f->prompt_len,
      "prompt tokens (the question, for shared-prefix): N, MIN-MAX or lognormal:MEAN[:SIGMA]")
      ->check(LengthValidator());
  Add(app, f, "--output-len", f->output_len,
      "max new tokens: N, MIN-MAX or lognormal:MEAN[:SIGMA] (rollout default lognormal:256:1)")
      ->check(LengthValidator());
  Add(app, f, "--duration", f->duration,
      "seconds of arrivals, then drain and exit (0: until stopped)")
      ->check(NonNegative());
  Add(app, f, "--requests", f->requests, "requests to send, then drain and exit (0: unlimited)")
      ->check(NonNegative());
  Add(app, f, "--temperature", f->temperature,
      "sampling temperature (0: greedy; for a trace, where a line gives none)")
      ->check(NonNegative());
  Add(app, f, "--quiet-rate", f->quiet_rate, "bursty: requests/s between bursts (0: silence)")
      ->check(NonNegative());
  Add(app, f, "--burst-rate", f->burst_rate, "bursty: requests/s during a burst")
      ->check(Positive());
  Add(app, f, "--quiet-s", f->quiet_s, "bursty: seconds of each quiet phase (the run starts quiet)")
      ->check(Positive());
  Add(app, f, "--burst-s", f->burst_s, "bursty: seconds of each burst")->check(Positive());
  Add(app, f, "--phases", f->phases,
      "bursty: SECONDS:RATE,... phases played once in order instead of the quiet/burst "
      "alternation (e.g. 30:5,7:80,300:5,7:120,31:5)");
  Add(app, f, "--rollout-size", f->rollout_size, "rollout: prompts released at once")
      ->check(CLI::Range(1, 1 << 20));
  Add(app, f, "--rollout-interval", f->rollout_interval,
      "rollout: seconds between releases (0: a single release, then drain and exit)")
      ->check(NonNegative());
  Add(app, f, "--turns", f->turns, "agentic: turns per session, N or MIN-MAX")
      ->check(TurnsValidator());
  Add(app, f, "--first-turn-len", f->first_turn_len,
      "agentic: first prompt tokens, N, MIN-MAX or lognormal:MEAN[:SIGMA] (cut to the model)")
      ->check(LengthValidator());
  Add(app, f, "--append-tokens", f->append_tokens,
      "agentic: tokens each turn adds to the previous prompt (answer + tool result); a session "
      "ends when its prompt would outgrow the model")
      ->check(CLI::Range(1, 1 << 20));
  Add(app, f, "--think-s", f->think_s, "agentic: seconds between a session's turns")
      ->check(NonNegative());
  Add(app, f, "--system-prompts", f->system_prompts,
      "shared-prefix: distinct system prompts, one picked per request")
      ->check(CLI::Range(1, 10000));
  Add(app, f, "--system-prompt-len", f->system_prompt_len,
      "shared-prefix: tokens of each system prompt")
      ->check(CLI::Range(8, 1 << 20));
}

Result<WorkloadSelection> ResolveWorkload(const WorkloadFlags& flags) {
  auto given = [&](std::string_view flag) { return flags.given.count(std::string(flag)) > 0; };
  const bool from_file = given("--workload-file") || !flags.workload_file.empty();
  if (from_file && given("--workload")) {
    return InvalidArgument(
        "--workload-file replays a trace; it cannot be combined with --workload");
  }
  WorkloadSelection sel;
  if (!from_file && flags.workload == "none") {
    for (const Knob& k : kKnobs) {
      if (given(k.flag)) {
        return InvalidArgument(std::string(k.flag) + " does not apply to --workload none");
      }
    }
    sel.enabled = false;
    return sel;
  }
  WorkloadKind kind = WorkloadKind::kFile;
  if (!from_file) {
    Result<WorkloadKind> k = ParseWorkloadKind(flags.workload);
    if (!k.ok() || *k == WorkloadKind::kFile) {
      return InvalidArgument("--workload: unknown workload '" + flags.workload +
                             "' (expected poisson, bursty, rollout, agentic, shared-prefix, none)");
    }
    kind = *k;
  }
  const std::string where =
      from_file ? "--workload-file" : "--workload " + std::string(WorkloadKindName(kind));
  for (const Knob& k : kKnobs) {
    if (given(k.flag) && !(k.scenarios & Bit(kind))) {
      return InvalidArgument(std::string(k.flag) + " does not apply to " + where + " (only to " +
                             ScenarioList(k.scenarios) + ")");
    }
  }

  WorkloadOptions o = WorkloadOptions::ForKind(kind);
  if (from_file) {
    Status s = LoadWorkloadFile(flags.workload_file, &o);
    if (!s.ok()) return s.WithContext("--workload-file");
  }
  // Scenario defaults of their own (agentic rate, rollout output) hold unless
  // the flag was given.
  if (kind != WorkloadKind::kAgentic || given("--rate")) o.rate = flags.rate;
  auto length = [](const std::string& flag, const std::string& text) -> Result<LengthDist> {
    Result<LengthDist> d = LengthDist::Parse(text);
    if (!d.ok()) return d.status().WithContext(flag);
    return d;
  };
  ASSIGN_OR_RETURN(o.prompt_len, length("--prompt-len", flags.prompt_len));
  if (kind != WorkloadKind::kRollout || given("--output-len")) {
    ASSIGN_OR_RETURN(o.output_len, length("--output-len", flags.output_len));
  }
  ASSIGN_OR_RETURN(o.first_turn_len, length("--first-turn-len", flags.first_turn_len));
  Result<std::pair<int, int>> turns = ParseTurns(flags.turns);
  if (!turns.ok()) return turns.status().WithContext("--turns");
  o.turns_min = turns->first;
  o.turns_max = turns->second;
  o.duration_s = flags.duration;
  o.max_requests = flags.requests;
  o.temperature = flags.temperature;
  o.quiet_rate = flags.quiet_rate;
  o.burst_rate = flags.burst_rate;
  o.quiet_s = flags.quiet_s;
  o.burst_s = flags.burst_s;
  if (given("--phases")) {
    Result<std::vector<WorkloadOptions::RatePhase>> phases =
        WorkloadOptions::ParsePhases(flags.phases);
    if (!phases.ok()) return phases.status().WithContext("--phases");
    o.phases = std::move(phases).value();
  }
  o.rollout_size = flags.rollout_size;
  o.rollout_interval_s = flags.rollout_interval;
  o.append_tokens = flags.append_tokens;
  o.think_s = flags.think_s;
  o.system_prompts = flags.system_prompts;
  o.system_prompt_len = flags.system_prompt_len;
  if (Status s = o.Validate(); !s.ok()) return NameTheFlag(s);
  sel.bounded = o.Bounded();
  sel.options = std::move(o);
  return sel;
}

}  // namespace sy::engine
