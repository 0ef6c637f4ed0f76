#include "engine/entrypoints/metrics.h"

#include <charconv>
#include <cmath>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace sy::engine {
namespace {

// Buckets for a CPU engine: steps take milliseconds to tens of
// milliseconds, prompts queue for seconds under overload.
const std::vector<double>& TtftBuckets() {
  static const std::vector<double> b = {0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75,
                                        1,     2.5,  5,     7.5,  10,    20,  30,   60};
  return b;
}
const std::vector<double>& TpotBuckets() {
  static const std::vector<double> b = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1,
                                        0.15,  0.2,    0.3,   0.5,  0.75,  1,    2.5};
  return b;
}
const std::vector<double>& E2eBuckets() {
  static const std::vector<double> b = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300};
  return b;
}

struct Histogram {
  explicit Histogram(const std::vector<double>& bounds)
      : bounds(bounds), counts(bounds.size(), 0) {}
  void Observe(double v) {
    for (size_t i = 0; i < bounds.size(); ++i) {
      if (v <= bounds[i]) ++counts[i];  // cumulative: every bucket >= v
    }
    sum += v;
    ++count;
  }
  std::vector<double> bounds;
  std::vector<int64_t> counts;  // cumulative, per bound
  double sum = 0;
  int64_t count = 0;
};

// Prometheus renders floats as Go does; the shortest round-trip form matches
// for every finite value, and the specials have fixed spellings.
std::string FormatDouble(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  return ec == std::errc() ? std::string(buf, end) : "NaN";
}

// Label values escape backslash, double quote and newline.
std::string EscapeLabel(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

// HELP text escapes backslash and newline only.
std::string EscapeHelp(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void Header(std::string* out, std::string_view name, std::string_view type, std::string_view help) {
  *out += "# HELP ";
  *out += name;
  *out += ' ';
  *out += EscapeHelp(help);
  *out += "\n# TYPE ";
  *out += name;
  *out += ' ';
  *out += type;
  *out += '\n';
}

}  // namespace

struct ServingMetrics::Impl {
  explicit Impl(std::string model)
      : model_label(EscapeLabel(model)),
        ttft(TtftBuckets()),
        tpot(TpotBuckets()),
        e2e(E2eBuckets()) {
    // The usual reasons exist from the start, so rate() sees them go from 0.
    for (const char* r : {"eos", "length", "cancelled"}) requests[r] = 0;
  }

  const std::string model_label;  // already escaped
  mutable std::mutex mu;
  ServingGauges gauges;
  int64_t prompt_tokens = 0;
  int64_t generation_tokens = 0;
  int64_t cache_hit_tokens = 0;
  int64_t preemptions = 0;
  std::map<std::string, int64_t, std::less<>> requests;  // by finish reason
  Histogram ttft, tpot, e2e;
};

namespace {

struct Figures {
  std::string model_label;
  ServingGauges gauges;
  int64_t prompt_tokens, generation_tokens, cache_hit_tokens, preemptions;
  std::map<std::string, int64_t, std::less<>> requests;
  Histogram ttft, tpot, e2e;
};

void Sample(std::string* out, std::string_view name, const std::string& model_label,
            std::string_view extra_labels, const std::string& value) {
  *out += name;
  *out += "{model_name=\"";
  *out += model_label;
  *out += '"';
  *out += extra_labels;
  *out += "} ";
  *out += value;
  *out += '\n';
}

void Gauge(std::string* out, std::string_view name, std::string_view help,
           const std::string& model_label, double value) {
  Header(out, name, "gauge", help);
  Sample(out, name, model_label, "", FormatDouble(value));
}

void Counter(std::string* out, std::string_view name, std::string_view help,
             const std::string& model_label, int64_t value) {
  Header(out, name, "counter", help);
  Sample(out, name, model_label, "", std::to_string(value));
}

void RenderHistogram(std::string* out, const std::string& name, std::string_view help,
                     const std::string& model_label, const Histogram& h) {
  Header(out, name, "histogram", help);
  for (size_t i = 0; i < h.bounds.size(); ++i) {
    Sample(out, name + "_bucket", model_label, ",le=\"" + FormatDouble(h.bounds[i]) + "\"",
           std::to_string(h.counts[i]));
  }
  Sample(out, name + "_bucket", model_label, ",le=\"+Inf\"", std::to_string(h.count));
  Sample(out, name + "_sum", model_label, "", FormatDouble(h.sum));
  Sample(out, name + "_count", model_label, "", std::to_string(h.count));
}

}  // namespace

ServingMetrics::ServingMetrics(std::string model_name)
    : impl_(std::make_unique<Impl>(std::move(model_name))) {}

ServingMetrics::~ServingMetrics() = default;

void ServingMetrics::SetGauges(const ServingGauges& g) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->gauges = g;
}

void ServingMetrics::AddStep(int64_t prompt_tokens, int64_t generation_tokens,
                             int64_t cache_hit_tokens, int64_t preemptions) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->prompt_tokens += prompt_tokens;
  impl_->generation_tokens += generation_tokens;
  impl_->cache_hit_tokens += cache_hit_tokens;
  impl_->preemptions += preemptions;
}

void ServingMetrics::ObserveRequest(double ttft_s, double tpot_s, double e2e_s,
                                    std::string_view finish_reason) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (ttft_s >= 0) impl_->ttft.Observe(ttft_s);
  if (tpot_s >= 0) impl_->tpot.Observe(tpot_s);
  if (e2e_s >= 0) impl_->e2e.Observe(e2e_s);
  auto it = impl_->requests.find(finish_reason);
  if (it == impl_->requests.end()) it = impl_->requests.emplace(finish_reason, 0).first;
  ++it->second;
}

std::string ServingMetrics::Render() const {
  std::unique_lock<std::mutex> lock(impl_->mu);
  const Figures f{impl_->model_label,
                  impl_->gauges,
                  impl_->prompt_tokens,
                  impl_->generation_tokens,
                  impl_->cache_hit_tokens,
                  impl_->preemptions,
                  impl_->requests,
                  impl_->ttft,
                  impl_->tpot,
                  impl_->e2e};
  lock.unlock();  // format outside the lock: writers wait for one copy only

  const std::string& m = f.model_label;
  std::string out;
  out.reserve(8192);
  Gauge(&out, "switchyard:num_running_reqs", "Requests running (in the batch).", m,
        f.gauges.running);
  Gauge(&out, "switchyard:num_queue_reqs", "Requests waiting (scheduler queue and HTTP inbox).", m,
        f.gauges.waiting);
  Gauge(&out, "switchyard:token_usage", "KV cache pages used / total, all devices.", m,
        f.gauges.token_usage);
  Gauge(&out, "switchyard:state_usage",
        "Recurrent-state slots used / total, all devices (0 without linear layers).", m,
        f.gauges.state_usage);
  Gauge(&out, "switchyard:cache_hit_rate",
        "Prefix-cache hit tokens / prompt tokens over the engine's recent window.", m,
        f.gauges.cache_hit_rate);
  Gauge(&out, "switchyard:cached_tokens", "Tokens held by the prefix cache.", m,
        static_cast<double>(f.gauges.cached_tokens));
  Counter(&out, "switchyard:prompt_tokens_total",
          "Prompt tokens prefilled (prefix-cache hits excluded).", m, f.prompt_tokens);
  Counter(&out, "switchyard:generation_tokens_total", "Tokens generated.", m, f.generation_tokens);
  Header(&out, "switchyard:num_requests_total", "counter", "Finished requests by finish reason.");
  for (const auto& [reason, n] : f.requests) {
    Sample(&out, "switchyard:num_requests_total", m,
           ",finish_reason=\"" + EscapeLabel(reason) + "\"", std::to_string(n));
  }
  Counter(&out, "switchyard:num_preemptions_total", "Requests preempted (retracted).", m,
          f.preemptions);
  Counter(&out, "switchyard:cache_hit_tokens_total", "Prompt tokens served from the prefix cache.",
          m, f.cache_hit_tokens);
  RenderHistogram(&out, "switchyard:time_to_first_token_seconds",
                  "Time from arrival to the first generated token, seconds.", m, f.ttft);
  RenderHistogram(&out, "switchyard:time_per_output_token_seconds",
                  "Mean time between output tokens after the first, per request, seconds.", m,
                  f.tpot);
  RenderHistogram(&out, "switchyard:e2e_request_latency_seconds",
                  "Time from arrival to finish, seconds.", m, f.e2e);
  return out;
}

}  // namespace sy::engine
