// File: engine/workload/workload.cc
#include "engine/workload/workload.h"

#include <algorithm>
#include <cassert>
#include <charconv>
#include <cmath>
#include <sstream>

#include "engine/model/tokenizer.h"

namespace sy::engine {
namespace {

constexpr char kForms[] = "expected N, MIN-MAX or lognormal:MEAN[:SIGMA]";

bool ParseInt(std::string_view s, int* out) {
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, *out);
  return ec == std::errc() && p == end;
}

bool ParseDouble(const std::string& s, double* out) {
  if (s.empty()) return false;
  size_t used = 0;
  try {
    *out = std::stod(s, &used);
  } catch (const std::exception&) {
    return false;
  }
  return used == s.size() && std::isfinite(*out);
}

}  // namespace

Result<LengthDist> LengthDist::Parse(const std::string& text) {
  LengthDist d;
  const std::string bad = "bad length '" + text + "': " + kForms;
  if (text.rfind("lognormal:", 0) == 0) {
    std::string rest = text.substr(10);
    const size_t colon = rest.find(':');
    d.kind = Kind::kLogNormal;
    if (!ParseDouble(rest.substr(0, colon), &d.mean)) return InvalidArgument(bad);
    if (colon != std::string::npos && !ParseDouble(rest.substr(colon + 1), &d.sigma)) {
      return InvalidArgument(bad);
    }
    d.min = 1;
    d.max = static_cast<int>(std::min(8.0 * d.mean, 1e9));
  } else if (const size_t dash = text.find('-'); dash != std::string::npos && dash > 0) {
    d.kind = Kind::kUniform;
    if (!ParseInt(std::string_view(text).substr(0, dash), &d.min) ||
        !ParseInt(std::string_view(text).substr(dash + 1), &d.max)) {
      return InvalidArgument(bad);
    }
  } else {
    d.kind = Kind::kFixed;
    if (!ParseInt(text, &d.min)) return InvalidArgument(bad);
    d.max = d.min;
  }
  Status s = d.Validate();
  if (!s.ok()) return s.WithContext("length '" + text + "'");
  return d;
}

std::string LengthDist::ToString() const {
  std::ostringstream os;
  switch (kind) {
    case Kind::kFixed:
      os << min;
      break;
    case Kind::kUniform:
      os << min << "-" << max;
      break;
    case Kind::kLogNormal:
      os << "lognormal:" << mean << ":" << sigma;
      break;
  }
  return os.str();
}

Status LengthDist::Validate() const {
  if (min < 1) return InvalidArgument("minimum length must be >= 1");
  if (max < min) return InvalidArgument("maximum length is below the minimum");
  if (kind == Kind::kFixed && min != max) return InvalidArgument("a fixed length has min == max");
  if (kind == Kind::kLogNormal && !(mean >= 1))
    return InvalidArgument("lognormal mean must be >= 1");
  if (kind == Kind::kLogNormal && !(sigma > 0 && sigma <= 4)) {
    return InvalidArgument("lognormal sigma must be in (0, 4]");
  }
  return Status::Ok();
}

Status WorkloadOptions::Validate() const {
  if (!burst && !(rate > 0 && std::isfinite(rate))) {
    return InvalidArgument("rate must be > 0 requests/s");
  }
  if (burst && max_requests <= 0) return InvalidArgument("a burst needs max_requests > 0");
  if (!(duration_s >= 0 && std::isfinite(duration_s)))
    return InvalidArgument("duration must be >= 0");
  if (max_requests < 0) return InvalidArgument("max_requests must be >= 0");
  if (!(temperature >= 0 && std::isfinite(temperature))) {
    return InvalidArgument("temperature must be >= 0");
  }
  if (max_prompt_tokens < 1) return InvalidArgument("max_prompt_tokens must be >= 1");
  if (Status s = prompt_len.Validate(); !s.ok()) return s.WithContext("prompt_len");
  if (Status s = output_len.Validate(); !s.ok()) return s.WithContext("output_len");
  return Status::Ok();
}

std::string WorkloadOptions::Describe() const {
  std::ostringstream os;
  if (burst) {
    os << "burst";
  } else {
    os << "poisson " << rate << "/s";
  }
  os << " prompt=" << prompt_len.ToString() << " output=" << output_len.ToString();
  if (temperature > 0) os << " temperature=" << temperature;
  if (duration_s > 0) os << " duration=" << duration_s << "s";
  if (max_requests > 0) os << " requests=" << max_requests;
  os << " seed=" << seed;
  return os.str();
}

WorkloadGenerator::WorkloadGenerator(const WorkloadOptions& options)
    : options_(options), rng_(options.seed) {
  assert(options_.Validate().ok());
}

int WorkloadGenerator::Draw(const LengthDist& d) {
  switch (d.kind) {
    case LengthDist::Kind::kFixed:
      return d.min;
    case LengthDist::Kind::kUniform:
      return std::uniform_int_distribution<int>(d.min, d.max)(rng_);
    case LengthDist::Kind::kLogNormal: {
      // E[X] = exp(mu + sigma^2 / 2), so mu is chosen to hit the mean.
      const double mu = std::log(d.mean) - d.sigma * d.sigma / 2;
      const double x = std::lognormal_distribution<double>(mu, d.sigma)(rng_);
      return static_cast<int>(std::clamp<long long>(std::llround(x), d.min, d.max));
    }
  }
  return d.min;
}

std::vector<int32_t> WorkloadGenerator::MakePrompt(int tokens) {
  const auto& corpus = CorpusSentences();
  size_t i = std::uniform_int_distribution<size_t>(0, corpus.size() - 1)(rng_);
  std::string text;
  auto extend_to = [&](size_t bytes) {
    while (text.size() < bytes) {
      if (!text.empty()) text += ' ';
      text += corpus[i++ % corpus.size()];
    }
  };
  if (!options_.tokenizer) {
    const size_t bytes = static_cast<size_t>(tokens - 1);  // Encode adds BOS
    extend_to(bytes);
    text.resize(bytes);
    return Encode(text, /*add_bos=*/true);
  }
  // A subword tokenizer packs several bytes per token: encode enough text,
  // then cut to exactly `tokens`.
  std::vector<int32_t> out;
  for (size_t bytes = static_cast<size_t>(tokens) * 4;; bytes *= 2) {
    extend_to(bytes);
    out = options_.tokenizer->Encode(text, /*add_bos=*/true);
    if (static_cast<int>(out.size()) >= tokens) break;
  }
  out.resize(tokens);
  return out;
}

std::optional<Arrival> WorkloadGenerator::Next() {
  if (options_.max_requests > 0 && count_ >= options_.max_requests) return std::nullopt;
  if (!options_.burst) {
    t_s_ += std::exponential_distribution<double>(options_.rate)(rng_);
    if (options_.duration_s > 0 && t_s_ > options_.duration_s) {
      t_s_ = options_.duration_s;
      return std::nullopt;
    }
  }
  Arrival a;
  a.time_us = options_.burst ? 0 : static_cast<int64_t>(t_s_ * 1e6);
  const int prompt = std::min(Draw(options_.prompt_len), options_.max_prompt_tokens);
  a.spec.prompt = MakePrompt(prompt);
  a.spec.max_new_tokens = Draw(options_.output_len);
  a.spec.temperature = options_.temperature;
  a.spec.seed = rng_();
  a.spec.ignore_eos = options_.ignore_eos;
  ++count_;
  return a;
}

std::vector<Arrival> WorkloadGenerator::Schedule() {
  assert(options_.duration_s > 0 || options_.max_requests > 0);
  std::vector<Arrival> all;
  while (auto a = Next()) all.push_back(std::move(*a));
  return all;
}

}  // namespace sy::engine
