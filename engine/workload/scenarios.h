// File: engine/workload/scenarios.h
//
// Internal to engine/workload: the pieces WorkloadGenerator is made of. A
// TokenSource owns the generator's one random stream and turns corpus text
// into tokens; a Scenario produces arrivals in time order from it. The
// generator applies what every scenario shares (request and duration limits,
// sampling defaults), so a scenario only decides times, prompts and output
// lengths. Not for use outside engine/workload.
//
// Thread-safety: none; owned by one WorkloadGenerator.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string_view>
#include <vector>

#include "engine/workload/workload.h"

namespace sy::engine::workload_internal {

class TokenSource {
 public:
  TokenSource(uint64_t seed, std::shared_ptr<const Tokenizer> tokenizer)
      : rng_(seed), tokenizer_(std::move(tokenizer)) {}

  std::mt19937_64& rng() { return rng_; }
  // A draw from `d`, within [d.min, d.max].
  int Draw(const LengthDist& d);
  // Seconds to the next event of a Poisson process at `rate` (> 0).
  double Exponential(double rate) { return std::exponential_distribution<double>(rate)(rng_); }
  // Exactly `tokens` tokens of `header` followed by corpus text from a random
  // sentence on; BOS first when `bos` (counted in `tokens`: 1 is BOS alone).
  // REQUIRES: tokens >= 1.
  std::vector<int32_t> Text(int tokens, bool bos, std::string_view header);
  // The prompt of an independent request: Text(tokens, true, header) whose
  // header ("[n] ", n counting this source's prompts from 0) makes it differ
  // from every other prompt within its first 2 + digits tokens. The corpus
  // is a few dozen sentences and Text starts at one of them, so without it
  // two requests share whole sentences from position 0 and the prefix cache
  // serves most of a prompt that a real, unrelated request would prefill.
  std::vector<int32_t> Prompt(int tokens);
  // `text` encoded with BOS, as a trace's "prompt" is.
  std::vector<int32_t> Encode(std::string_view text) const;

 private:
  std::mt19937_64 rng_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  int64_t prompts_ = 0;  // Prompt()s so far
};

// Arrivals of one scenario, in non-decreasing time order.
class Scenario {
 public:
  virtual ~Scenario() = default;
  // Fills a->time_us, a->spec.prompt and a->spec.max_new_tokens; may override
  // the sampling fields the generator preset (a trace entry's own). False
  // when the scenario has ended by itself.
  virtual bool Next(TokenSource& src, Arrival* a) = 0;
};

// REQUIRES: options.Validate() is OK and options.kind matches.
std::unique_ptr<Scenario> MakePoisson(const WorkloadOptions& options);
std::unique_ptr<Scenario> MakeBursty(const WorkloadOptions& options);
std::unique_ptr<Scenario> MakeRollout(const WorkloadOptions& options);
std::unique_ptr<Scenario> MakeAgentic(const WorkloadOptions& options);
std::unique_ptr<Scenario> MakeSharedPrefix(const WorkloadOptions& options, TokenSource& src);
std::unique_ptr<Scenario> MakeFileReplay(const WorkloadOptions& options);

// Seconds to the nearest whole microsecond (arrival times are integral
// microseconds; rounding keeps 0.7 s at 700000, not 699999).
inline int64_t ToUs(double s) { return std::llround(s * 1e6); }

}  // namespace sy::engine::workload_internal
