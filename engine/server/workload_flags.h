// File: engine/server/workload_flags.h
//
// The command-line face of engine/workload: registers the workload flags on a
// CLI11 app and turns the parsed values into WorkloadOptions. Kept apart from
// main.cc so the flags are tested without starting an engine.
//
//   WorkloadFlags wf;
//   AddWorkloadFlags(&app, &wf);
//   app.parse(argc, argv);
//   Result<WorkloadSelection> sel = ResolveWorkload(wf);   // errors name the flag
//   if (!sel.ok()) { ...usage error... }
//   o.workload_enabled = sel->enabled;
//   o.workload = sel->options;                  // then set seed, tokenizer
//   o.exit_when_done = sel->bounded;
//
// Flags (docs/WORKLOADS.md explains each scenario):
//   --workload poisson|bursty|rollout|agentic|shared-prefix|none
//   --workload-file F                      replay a JSONL trace (the file scenario)
//   --rate --prompt-len --output-len --duration --requests --temperature
//   --quiet-rate --burst-rate --quiet-s --burst-s --phases           (bursty)
//   --rollout-size --rollout-interval                                (rollout)
//   --turns --first-turn-len --append-tokens --think-s               (agentic)
//   --system-prompts --system-prompt-len                       (shared-prefix)
// A scenario knob given with another scenario is an error, not ignored.
//
// Thread-safety: none needed; used once, on the main thread, while parsing.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <set>
#include <string>

#include "base/status.h"
#include "engine/workload/workload.h"

namespace sy::engine {

// The parsed values, defaults as the help shows them. Scenario knobs default
// to WorkloadOptions' own defaults.
struct WorkloadFlags {
  std::string workload = "poisson";
  std::string workload_file;
  // 8 req/s keeps ~10 requests running on the tiny preset: a batch worth
  // watching, well under what 2 cores serve. Agentic without --rate starts
  // 0.5 sessions/s (WorkloadOptions::ForKind).
  double rate = 8.0;
  std::string prompt_len = "16-128";
  // Rollout without --output-len uses a long tail (lognormal:256:1).
  std::string output_len = "16-128";
  double duration = 0;
  int64_t requests = 0;
  float temperature = 0;

  double quiet_rate = WorkloadOptions{}.quiet_rate;
  double burst_rate = WorkloadOptions{}.burst_rate;
  double quiet_s = WorkloadOptions{}.quiet_s;
  double burst_s = WorkloadOptions{}.burst_s;
  std::string phases;  // "SECONDS:RATE,..." replaces the alternation

  int rollout_size = WorkloadOptions{}.rollout_size;
  double rollout_interval = WorkloadOptions{}.rollout_interval_s;

  std::string turns = "10-15";  // N or MIN-MAX
  std::string first_turn_len = WorkloadOptions{}.first_turn_len.ToString();
  int append_tokens = WorkloadOptions{}.append_tokens;
  double think_s = WorkloadOptions{}.think_s;

  int system_prompts = WorkloadOptions{}.system_prompts;
  int system_prompt_len = WorkloadOptions{}.system_prompt_len;

  // The flags that appeared on the command line ("--rate", ...), recorded by
  // AddWorkloadFlags' options as they parse: a scenario default or a
  // misplaced knob depends on whether a flag was given, not on its value.
  std::set<std::string> given;
};

// Registers the workload flags on `app`, with help text and validators, bound
// to `flags`. REQUIRES: `flags` outlives every parse of `app`.
void AddWorkloadFlags(CLI::App* app, WorkloadFlags* flags);

struct WorkloadSelection {
  bool enabled = true;   // false for --workload none
  bool bounded = false;  // the arrivals end by themselves (WorkloadOptions::Bounded)
  WorkloadOptions options;
};

// The options the flags describe, validated, with the trace loaded for
// --workload-file. The caller still sets options.seed, options.tokenizer and
// options.max_prompt_tokens. INVALID_ARGUMENT naming the flag (a knob of
// another scenario, --workload-file with --workload, a bad value); NOT_FOUND
// when the file cannot be opened.
Result<WorkloadSelection> ResolveWorkload(const WorkloadFlags& flags);

}  // namespace sy::engine
