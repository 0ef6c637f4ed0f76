// File: engine/workload/workload.cc
//
// Options (names, defaults, validation, description) and the generator, which
// dispatches to one Scenario (scenarios.h) and applies the shared limits.
#include "engine/workload/workload.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <charconv>
#include <cmath>
#include <sstream>
#include <utility>

#include "engine/model/tokenizer.h"
#include "engine/workload/scenarios.h"
#include "engine/workload/workload_file.h"

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

namespace {

constexpr std::array<std::pair<WorkloadKind, std::string_view>, 6> kKindNames = {{
    {WorkloadKind::kPoisson, "poisson"},
    {WorkloadKind::kBursty, "bursty"},
    {WorkloadKind::kRollout, "rollout"},
    {WorkloadKind::kAgentic, "agentic"},
    {WorkloadKind::kSharedPrefix, "shared-prefix"},
    {WorkloadKind::kFile, "file"},
}};

bool Finite(double x) { return std::isfinite(x); }

// "rate must be > 0" style checks, naming the field.
Status Positive(std::string_view field, double x) {
  if (Finite(x) && x > 0) return Status::Ok();
  return InvalidArgument(std::string(field) + " must be > 0");
}
Status NonNegative(std::string_view field, double x) {
  if (Finite(x) && x >= 0) return Status::Ok();
  return InvalidArgument(std::string(field) + " must be >= 0");
}

}  // namespace

std::string_view WorkloadKindName(WorkloadKind kind) {
  for (const auto& [k, name] : kKindNames) {
    if (k == kind) return name;
  }
  return "?";
}

Result<WorkloadKind> ParseWorkloadKind(std::string_view name) {
  std::string all;
  for (const auto& [k, n] : kKindNames) {
    if (n == name) return k;
    all += (all.empty() ? "" : ", ") + std::string(n);
  }
  return InvalidArgument("unknown workload '" + std::string(name) + "' (expected " + all + ")");
}

WorkloadOptions WorkloadOptions::ForKind(WorkloadKind kind) {
  WorkloadOptions o;
  o.kind = kind;
  if (kind == WorkloadKind::kAgentic) o.rate = 0.5;
  if (kind == WorkloadKind::kRollout) {
    o.output_len = {LengthDist::Kind::kLogNormal, 1, 2048, 256, 1.0};
  }
  return o;
}

Result<std::vector<WorkloadOptions::RatePhase>> WorkloadOptions::ParsePhases(
    const std::string& text) {
  std::vector<RatePhase> out;
  std::stringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) {
    const size_t colon = item.find(':');
    RatePhase p;
    size_t used_s = 0, used_r = 0;
    bool ok = colon != std::string::npos;
    if (ok) {
      try {
        p.seconds = std::stod(item.substr(0, colon), &used_s);
        p.rate = std::stod(item.substr(colon + 1), &used_r);
      } catch (const std::exception&) {
        ok = false;
      }
    }
    ok = ok && used_s == colon && used_r == item.size() - colon - 1 && p.seconds > 0 &&
         std::isfinite(p.seconds) && p.rate >= 0 && std::isfinite(p.rate);
    if (!ok) {
      return InvalidArgument("phase '" + item +
                             "' is not SECONDS:RATE with SECONDS > 0 and RATE >= 0");
    }
    out.push_back(p);
  }
  if (out.empty()) return InvalidArgument("no phases in '" + text + "'");
  return out;
}

Status WorkloadOptions::Validate() const {
  RETURN_IF_ERROR(NonNegative("duration_s", duration_s));
  if (max_requests < 0) return InvalidArgument("max_requests must be >= 0");
  RETURN_IF_ERROR(NonNegative("temperature", temperature));
  if (max_prompt_tokens < 1) return InvalidArgument("max_prompt_tokens must be >= 1");
  if (burst && kind != WorkloadKind::kPoisson) {
    return InvalidArgument("burst applies to the poisson workload only");
  }
  if (kind != WorkloadKind::kFile) {
    if (Status s = output_len.Validate(); !s.ok()) return s.WithContext("output_len");
  }
  switch (kind) {
    case WorkloadKind::kPoisson:
      if (burst && max_requests <= 0) return InvalidArgument("a burst needs max_requests > 0");
      if (!burst) RETURN_IF_ERROR(Positive("rate (requests/s)", rate));
      break;
    case WorkloadKind::kBursty:
      for (size_t i = 0; i < phases.size(); ++i) {
        const std::string at = "phases[" + std::to_string(i) + "]";
        RETURN_IF_ERROR(Positive(at + ".seconds", phases[i].seconds));
        RETURN_IF_ERROR(NonNegative(at + ".rate", phases[i].rate));
      }
      RETURN_IF_ERROR(NonNegative("quiet_rate", quiet_rate));
      RETURN_IF_ERROR(Positive("burst_rate", burst_rate));
      RETURN_IF_ERROR(Positive("quiet_s", quiet_s));
      RETURN_IF_ERROR(Positive("burst_s", burst_s));
      break;
    case WorkloadKind::kRollout:
      if (rollout_size < 1) return InvalidArgument("rollout_size must be >= 1");
      RETURN_IF_ERROR(NonNegative("rollout_interval_s", rollout_interval_s));
      break;
    case WorkloadKind::kAgentic:
      RETURN_IF_ERROR(Positive("rate (sessions/s)", rate));
      if (turns_min < 1) return InvalidArgument("turns_min must be >= 1");
      if (turns_max < turns_min) return InvalidArgument("turns_max must be >= turns_min");
      if (Status s = first_turn_len.Validate(); !s.ok()) return s.WithContext("first_turn_len");
      if (append_tokens < 1) return InvalidArgument("append_tokens must be >= 1");
      RETURN_IF_ERROR(NonNegative("think_s", think_s));
      break;
    case WorkloadKind::kSharedPrefix:
      RETURN_IF_ERROR(Positive("rate (requests/s)", rate));
      if (system_prompts < 1 || system_prompts > 10000) {
        return InvalidArgument("system_prompts must be in [1, 10000]");
      }
      // "[9999] " is 7 bytes: 8 tokens with BOS keep every prompt distinct.
      if (system_prompt_len < 8) return InvalidArgument("system_prompt_len must be >= 8");
      break;
    case WorkloadKind::kFile:
      if (!trace || trace->empty()) {
        return InvalidArgument("file: no trace loaded (LoadWorkloadFile)");
      }
      break;
  }
  if (kind == WorkloadKind::kPoisson || kind == WorkloadKind::kBursty ||
      kind == WorkloadKind::kRollout || kind == WorkloadKind::kSharedPrefix) {
    if (Status s = prompt_len.Validate(); !s.ok()) return s.WithContext("prompt_len");
  }
  return Status::Ok();
}

std::string WorkloadOptions::Describe() const {
  std::ostringstream os;
  switch (kind) {
    case WorkloadKind::kPoisson:
      if (burst) {
        os << "burst";
      } else {
        os << "poisson " << rate << "/s";
      }
      os << " prompt=" << prompt_len.ToString();
      break;
    case WorkloadKind::kBursty:
      if (phases.empty()) {
        os << "bursty quiet=" << quiet_rate << "/s for " << quiet_s << "s burst=" << burst_rate
           << "/s for " << burst_s << "s";
      } else {
        os << "bursty phases=";
        for (size_t i = 0; i < phases.size(); ++i) {
          os << (i ? "," : "") << phases[i].seconds << ":" << phases[i].rate;
        }
      }
      os << " prompt=" << prompt_len.ToString();
      break;
    case WorkloadKind::kRollout:
      os << "rollout size=" << rollout_size;
      if (rollout_interval_s > 0) {
        os << " every=" << rollout_interval_s << "s";
      } else {
        os << " once";
      }
      os << " prompt=" << prompt_len.ToString();
      break;
    case WorkloadKind::kAgentic:
      os << "agentic sessions=" << rate << "/s turns=" << turns_min << "-" << turns_max
         << " first=" << first_turn_len.ToString() << " append=" << append_tokens
         << " think=" << think_s << "s";
      break;
    case WorkloadKind::kSharedPrefix:
      os << "shared-prefix " << rate << "/s system=" << system_prompts << "x" << system_prompt_len
         << " question=" << prompt_len.ToString();
      break;
    case WorkloadKind::kFile:
      os << "file " << file << " (" << (trace ? trace->size() : 0) << " requests)";
      break;
  }
  if (kind != WorkloadKind::kFile) os << " output=" << output_len.ToString();
  if (temperature > 0) os << " temperature=" << temperature;
  if (ignore_eos) os << " ignore_eos";
  if (duration_s > 0) os << " duration=" << duration_s << "s";
  if (max_requests > 0) os << " requests=" << max_requests;
  os << " seed=" << seed;
  return os.str();
}

bool WorkloadOptions::Bounded() const {
  return duration_s > 0 || max_requests > 0 || kind == WorkloadKind::kFile ||
         (kind == WorkloadKind::kBursty && !phases.empty()) ||
         (kind == WorkloadKind::kRollout && rollout_interval_s <= 0);
}

WorkloadGenerator::WorkloadGenerator(const WorkloadOptions& options)
    : options_(options),
      source_(std::make_unique<workload_internal::TokenSource>(options.seed, options.tokenizer)) {
  assert(options_.Validate().ok());
  using namespace workload_internal;
  switch (options_.kind) {
    case WorkloadKind::kPoisson:
      scenario_ = MakePoisson(options_);
      break;
    case WorkloadKind::kBursty:
      scenario_ = MakeBursty(options_);
      break;
    case WorkloadKind::kRollout:
      scenario_ = MakeRollout(options_);
      break;
    case WorkloadKind::kAgentic:
      scenario_ = MakeAgentic(options_);
      break;
    case WorkloadKind::kSharedPrefix:
      scenario_ = MakeSharedPrefix(options_, *source_);
      break;
    case WorkloadKind::kFile:
      scenario_ = MakeFileReplay(options_);
      break;
  }
}

WorkloadGenerator::~WorkloadGenerator() = default;

std::optional<Arrival> WorkloadGenerator::Next() {
  if (done_ || (options_.max_requests > 0 && count_ >= options_.max_requests)) {
    done_ = true;
    return std::nullopt;
  }
  Arrival a;
  a.spec.temperature = options_.temperature;
  a.spec.ignore_eos = options_.ignore_eos;
  a.spec.seed = source_->rng()();
  if (!scenario_->Next(*source_, &a) ||
      (options_.duration_s > 0 && a.time_us > workload_internal::ToUs(options_.duration_s))) {
    done_ = true;
    return std::nullopt;
  }
  ++count_;
  return a;
}

std::vector<Arrival> WorkloadGenerator::Schedule() {
  assert(options_.Bounded());
  std::vector<Arrival> all;
  while (auto a = Next()) all.push_back(std::move(*a));
  return all;
}

}  // namespace sy::engine
