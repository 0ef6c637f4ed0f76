// File: engine/entrypoints/http_server.h
//
// HttpServer: the OpenAI-compatible front end (cpp-httplib), on its own
// threads beside the engine loop; it reaches the engine only through the
// RequestInbox / TokenStream hand-off (api_request.h) and reads metrics
// through ServingMetrics, so a slow or vanished client can never stall a step.
//
//   POST /v1/completions        prompt (string or token ids), stream or not
//   POST /v1/chat/completions   messages, stream or not (template: docs/HTTP.md)
//   GET  /v1/models             the one served model
//   GET  /health                200 while the engine loop turns, 503 otherwise
//   GET  /metrics               Prometheus text (metrics.h)
// Errors carry the OpenAI body {"error": {"message", "type", "param", "code"}}:
// 400 malformed JSON / wrong field types / prompt over the context, 404
// unknown route or model, 503 queue full or engine stopping.
// Streaming is server-sent events: `data: {chunk}\n\n` ... `data: [DONE]\n\n`.
// A client that disconnects mid-stream cancels its request.
//
//   HttpServer::Start({.host = "127.0.0.1", .port = 8000, ...}, &inbox, &metrics, tok)
//
// Thread-safety: Start/Stop/destructor from one thread; the handlers run on
// httplib's worker threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"
#include "engine/entrypoints/api_request.h"
#include "engine/entrypoints/metrics.h"
#include "engine/model/tokenizer.h"

namespace sy::engine {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;         // 0: pick a free port (tests; see port())
  std::string model_name;  // what /v1/models lists and requests must name (or omit)
  int max_seq = 1024;      // prompt + max_tokens must fit (the model's context)
  int vocab = 260;         // token-id prompts are checked against it
  int default_max_tokens = 128;
  // Concurrent connections served; each waiting request holds one (a
  // thread blocked on its stream), so this caps requests in flight over HTTP.
  int threads = 64;
  // /health answers 503 when the engine loop last turned longer ago.
  int health_max_age_ms = 2000;
};

// Liveness the engine loop reports; /health reads it.
struct EngineHealth {
  std::atomic<int64_t> last_turn_us{0};  // steady-clock micros of the loop's last turn
  std::atomic<bool> stopping{false};
};

class HttpServer {
 public:
  // Binds and starts serving. UNAVAILABLE naming host:port when it cannot
  // bind. inbox, metrics, health and tokenizer must outlive the server.
  static Result<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options,
                                                   RequestInbox* inbox, ServingMetrics* metrics,
                                                   const EngineHealth* health,
                                                   std::shared_ptr<const Tokenizer> tokenizer);
  // Stops accepting, ends open streams, joins the threads.
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const;  // the bound port

 private:
  struct Impl;
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace sy::engine
