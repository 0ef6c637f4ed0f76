// File: engine/workload/workload.h
//
// Built-in open-loop workloads: requests arrive on a schedule fixed in advance,
// independently of how fast the engine serves them (open loop: a slow engine
// sees its queue grow instead of the load backing off). One generator serves
// six scenarios (docs/WORKLOADS.md has the knobs and the trace format):
//
//   poisson        Poisson arrivals at `rate` req/s (`burst`: all at t = 0)
//   bursty         quiet and burst phases alternating, Poisson within each
//   rollout        `rollout_size` prompts at once, optionally every interval;
//                  long-tailed output lengths, so the batch decays (RL rollout)
//   agentic        multi-turn sessions: each turn's prompt is the previous
//                  turn's prompt plus `append_tokens` new tokens
//   shared-prefix  one of `system_prompts` system prompts + a question
//   file           a JSONL trace replayed as is (workload_file.h)
//
// Prompts are text cut from a built-in corpus of English sentences, encoded
// by `tokenizer` (null: the byte-level one, model/tokenizer.h). Prompts that
// share a prefix share it token for token: they are built by concatenating
// token vectors, never by re-encoding longer text, and only the very first
// piece carries BOS. Everything is a pure function of the options: the same
// options (seed included) give the same schedule, arrival for arrival.
//
//   ASSIGN_OR_RETURN(LengthDist p, LengthDist::Parse("32-256"));
//   WorkloadOptions o = WorkloadOptions::ForKind(WorkloadKind::kAgentic);
//   o.max_requests = 100;
//   RETURN_IF_ERROR(o.Validate());
//   WorkloadGenerator gen(o);
//   while (auto a = gen.Next()) engine.Submit(a->spec, a->time_us);
//
// Thread-safety: options are values; a generator is used by one thread at a
// time.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "engine/model/tokenizer.h"
#include "engine/scheduler/request.h"

namespace sy::engine {

// A length distribution over [min, max] (inclusive; tokens).
//   kFixed:     always `min` (== max)
//   kUniform:   uniform integer in [min, max]
//   kLogNormal: lognormal with the given `mean` and shape `sigma`, rounded and
//               clamped to [min, max] (long tail, like real prompt lengths)
struct LengthDist {
  enum class Kind { kFixed, kUniform, kLogNormal };
  Kind kind = Kind::kUniform;
  int min = 16;
  int max = 128;
  double mean = 64;    // kLogNormal only
  double sigma = 0.6;  // kLogNormal only

  // "N" (fixed), "MIN-MAX" (uniform), "lognormal:MEAN[:SIGMA]" (clamped to
  // [1, 8*MEAN]). INVALID_ARGUMENT with the accepted forms otherwise.
  static Result<LengthDist> Parse(const std::string& text);
  // The same forms, for logs and the run's workload description.
  std::string ToString() const;
  Status Validate() const;
};

enum class WorkloadKind { kPoisson, kBursty, kRollout, kAgentic, kSharedPrefix, kFile };

// "poisson" | "bursty" | "rollout" | "agentic" | "shared-prefix" | "file".
std::string_view WorkloadKindName(WorkloadKind kind);
// The inverse; INVALID_ARGUMENT listing the names otherwise.
Result<WorkloadKind> ParseWorkloadKind(std::string_view name);

// One request of a replayed trace, as a line of a workload file
// (workload_file.h reads and writes them).
struct TraceEntry {
  int64_t time_us = 0;          // arrival_s, rounded to microseconds
  std::string text;             // "prompt"; empty when `tokens` is given
  std::vector<int32_t> tokens;  // "prompt_tokens"; empty when `text` is given
  int output_len = 1;
  // Unset: the workload's temperature / ignore_eos, a seed from its stream.
  std::optional<float> temperature;
  std::optional<bool> ignore_eos;
  std::optional<uint64_t> seed;
};

// Every scenario's knobs in one value. Fields a scenario does not read are
// ignored by it (the comment says who reads what).
struct WorkloadOptions {
  WorkloadKind kind = WorkloadKind::kPoisson;

  // --- common ---
  // Mean arrivals per second (Poisson): requests for poisson and
  // shared-prefix, session starts for agentic.
  double rate = 4.0;
  // poisson only: every request arrives at time 0 (a closed batch; used by the
  // benchmark). Needs max_requests.
  bool burst = false;
  // Prompt tokens (poisson, bursty, rollout); the question after the system
  // prompt (shared-prefix).
  LengthDist prompt_len{LengthDist::Kind::kUniform, 16, 128};
  // max_new_tokens of every generated request (not file).
  LengthDist output_len{LengthDist::Kind::kUniform, 16, 128};
  // Sampling temperature; for file, the default of entries without one.
  float temperature = 0.0f;
  // No arrival later than duration_s / no more than max_requests requests; 0
  // means no limit. Sessions or rollout steps in flight are cut at the limit.
  double duration_s = 0;
  int64_t max_requests = 0;
  uint64_t seed = 1;
  // Prompts longer than this are cut (the model's max_seq - 1 fits them all).
  // An agentic session ends instead of growing past it.
  int max_prompt_tokens = 1 << 20;
  // Generate exactly max_new_tokens; for file, the default of entries without it.
  bool ignore_eos = false;
  // Turns the corpus text (and a trace's "prompt" text) into tokens; null
  // means the byte-level tokenizer. A checkpoint's tokenizer.json comes here.
  std::shared_ptr<const Tokenizer> tokenizer;

  // --- bursty: quiet_s of quiet_rate, then burst_s of burst_rate, repeated,
  // starting quiet. Defaults: a 12x burst, sized for the tiny model on a CPU.
  double quiet_rate = 2.0;  // req/s, >= 0 (0: silence between bursts)
  double burst_rate = 24.0;
  double quiet_s = 20.0;
  double burst_s = 5.0;
  // When not empty, replaces the alternation: Poisson arrivals at each
  // phase's rate for its seconds, in order, then the workload ends (seed 003
  // §9.2's trace is quiet, a burst of 80 req/s, 300 s quiet, a burst of 120).
  struct RatePhase {
    double seconds = 0;  // > 0
    double rate = 0;     // req/s, >= 0
  };
  std::vector<RatePhase> phases;

  // --- rollout: rollout_size requests at t = 0, k*interval, ... ---
  int rollout_size = 64;
  double rollout_interval_s = 0;  // 0: a single step

  // --- agentic: sessions start at `rate`; each has a number of turns drawn
  // uniformly in [turns_min, turns_max]. Turn 1 is first_turn_len tokens;
  // each later turn arrives think_s after the previous one and is its prompt
  // plus append_tokens new tokens (standing for the answer and a tool result).
  int turns_min = 10;
  int turns_max = 15;
  LengthDist first_turn_len{LengthDist::Kind::kUniform, 512, 1024};
  int append_tokens = 64;
  double think_s = 1.0;

  // --- shared-prefix: system_prompts distinct prompts of system_prompt_len
  // tokens; each request is one of them (uniformly) + a prompt_len question.
  int system_prompts = 4;
  int system_prompt_len = 256;  // >= 8, so the prompts differ within it

  // --- file: the trace (workload_file.h LoadWorkloadFile fills both) ---
  std::string file;  // shown by Describe
  std::shared_ptr<const std::vector<TraceEntry>> trace;

  // The defaults for `kind`: these options with kind set, rate = 0.5
  // sessions/s for agentic and output_len = lognormal:256:1 for rollout (a
  // long tail: most finish early, a few stragglers run long).
  static WorkloadOptions ForKind(WorkloadKind kind);
  // "SECONDS:RATE,SECONDS:RATE,..." (e.g. "30:5,7:80,300:5") as phases;
  // INVALID_ARGUMENT naming the bad item otherwise.
  static Result<std::vector<RatePhase>> ParsePhases(const std::string& text);

  // INVALID_ARGUMENT naming the bad field (rate <= 0, a burst without
  // max_requests, a bad length distribution, turns_min > turns_max, ...).
  // Only the fields `kind` reads are checked.
  Status Validate() const;
  // One line for the console and the stored run, e.g.
  // "agentic sessions=0.5/s turns=10-15 first=512-1024 append=64 think=1s
  //  output=16-128 seed=1".
  std::string Describe() const;
  // True when the arrivals end by themselves: duration or request limit set,
  // a burst, a single rollout step, or a file.
  bool Bounded() const;
};

struct Arrival {
  int64_t time_us = 0;  // offset from the start of the run
  RequestSpec spec;
};

namespace workload_internal {
class TokenSource;
class Scenario;
}  // namespace workload_internal

class WorkloadGenerator {
 public:
  // REQUIRES: options.Validate() is OK.
  explicit WorkloadGenerator(const WorkloadOptions& options);
  ~WorkloadGenerator();
  WorkloadGenerator(const WorkloadGenerator&) = delete;
  WorkloadGenerator& operator=(const WorkloadGenerator&) = delete;

  // The next arrival, in time order (ties keep generation order); nullopt
  // once the scenario ends or the duration or request count is reached, and
  // on every later call.
  std::optional<Arrival> Next();
  // All remaining arrivals. REQUIRES: options().Bounded().
  std::vector<Arrival> Schedule();

  const WorkloadOptions& options() const { return options_; }
  int64_t generated() const { return count_; }

 private:
  WorkloadOptions options_;
  std::unique_ptr<workload_internal::TokenSource> source_;
  std::unique_ptr<workload_internal::Scenario> scenario_;
  int64_t count_ = 0;
  bool done_ = false;
};

// The built-in corpus, one English sentence per entry.
const std::vector<std::string>& CorpusSentences();

}  // namespace sy::engine
