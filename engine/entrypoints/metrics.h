// File: engine/entrypoints/metrics.h
//
// ServingMetrics: the engine's Prometheus metrics, rendered for GET /metrics
// in the text exposition format (version 0.0.4). Names follow SGLang's
// (`sglang:num_running_reqs` -> `switchyard:num_running_reqs`, ...) so
// dashboards built for SGLang or vLLM map one to one; docs/HTTP.md lists
// each with its SGLang and vLLM counterpart. Every metric carries the label
// model_name="<model>".
//
//   gauges     switchyard:num_running_reqs, switchyard:num_queue_reqs,
//              switchyard:token_usage (KV pages used / total, all devices),
//              switchyard:state_usage (recurrent slots used / total),
//              switchyard:cache_hit_rate (prefix-cache hit tokens / prompt
//              tokens over the engine's recent window),
//              switchyard:cached_tokens
//   counters   switchyard:prompt_tokens_total, switchyard:generation_tokens_total,
//              switchyard:num_requests_total{finish_reason=...},
//              switchyard:num_preemptions_total,
//              switchyard:cache_hit_tokens_total
//   histograms switchyard:time_to_first_token_seconds,
//              switchyard:time_per_output_token_seconds,
//              switchyard:e2e_request_latency_seconds
//
// The engine writes (once per step / per finished request); HTTP threads
// render. Writers never wait on a renderer for longer than one copy of the
// figures.
//
// Thread-safety: all methods are safe from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace sy::engine {

struct ServingGauges {
  int running = 0;
  int waiting = 0;
  double token_usage = 0;     // [0, 1]
  double state_usage = 0;     // [0, 1]; 0 for models without linear layers
  double cache_hit_rate = 0;  // [0, 1]
  int64_t cached_tokens = 0;
};

class ServingMetrics {
 public:
  explicit ServingMetrics(std::string model_name);
  ~ServingMetrics();
  ServingMetrics(const ServingMetrics&) = delete;
  ServingMetrics& operator=(const ServingMetrics&) = delete;

  void SetGauges(const ServingGauges& g);
  // Tokens prefilled (prompt, cache hits excluded: cache_hit counts those)
  // and generated in one step.
  void AddStep(int64_t prompt_tokens, int64_t generation_tokens, int64_t cache_hit_tokens,
               int64_t preemptions);
  // One finished request: latencies in seconds; tpot_s < 0 when it produced
  // a single token (not observed then). finish_reason: "eos", "length", "cancelled".
  void ObserveRequest(double ttft_s, double tpot_s, double e2e_s, std::string_view finish_reason);

  // The whole exposition, ending in a newline.
  std::string Render() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sy::engine
