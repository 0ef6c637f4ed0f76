// File: engine/workload/workload.h
//
// Built-in open-loop workload: requests arrive as a Poisson process at `rate`
// per second, independently of how fast the engine serves them (open loop:
// a slow engine sees its queue grow instead of the load backing off). Prompt
// and output lengths are drawn from LengthDist; prompts are byte-level text
// cut from a built-in corpus of English sentences (model/tokenizer.h Encode,
// BOS included). Everything is a pure function of the options: the same seed
// gives the same schedule.
//
//   ASSIGN_OR_RETURN(LengthDist p, ParseLengthDist("32-256"));
//   WorkloadGenerator gen({.rate = 8, .prompt_len = p, .max_requests = 100});
//   while (auto a = gen.Next()) engine.Submit(a->spec, a->time_us);
//
// Thread-safety: a generator is used by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
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

struct WorkloadOptions {
  // Mean arrivals per second (Poisson). Ignored when `burst`.
  double rate = 4.0;
  // Every request arrives at time 0 (a closed batch; used by the benchmark).
  bool burst = false;
  LengthDist prompt_len{LengthDist::Kind::kUniform, 16, 128};
  LengthDist output_len{LengthDist::Kind::kUniform, 16, 128};
  float temperature = 0.0f;
  // Stop after this many seconds of arrivals / this many requests; 0 means no
  // limit. Both 0: an endless stream.
  double duration_s = 0;
  int64_t max_requests = 0;
  uint64_t seed = 1;
  // Prompts longer than this are cut (the model's max_seq - 1 fits them all).
  int max_prompt_tokens = 1 << 20;
  bool ignore_eos = false;
  // Turns the corpus text into prompt tokens; null means the byte-level
  // tokenizer. A checkpoint directory's tokenizer.json comes in here.
  std::shared_ptr<const Tokenizer> tokenizer;

  // INVALID_ARGUMENT naming the bad field (rate <= 0 without burst, a burst
  // without max_requests, a bad length distribution, ...).
  Status Validate() const;
  // "poisson 4/s prompt=16-128 output=16-128 requests=100 seed=1"
  std::string Describe() const;
};

struct Arrival {
  int64_t time_us = 0;  // offset from the start of the run
  RequestSpec spec;
};

class WorkloadGenerator {
 public:
  // REQUIRES: options.Validate() is OK.
  explicit WorkloadGenerator(const WorkloadOptions& options);

  // The next arrival, in time order; nullopt once the duration or request
  // count is reached.
  std::optional<Arrival> Next();
  // All remaining arrivals. REQUIRES: duration_s or max_requests is set.
  std::vector<Arrival> Schedule();

  const WorkloadOptions& options() const { return options_; }
  int64_t generated() const { return count_; }

 private:
  int Draw(const LengthDist& d);
  std::vector<int32_t> MakePrompt(int tokens);

  WorkloadOptions options_;
  std::mt19937_64 rng_;
  double t_s_ = 0;
  int64_t count_ = 0;
};

// The built-in corpus, one English sentence per entry.
const std::vector<std::string>& CorpusSentences();

}  // namespace sy::engine
