#include "engine/entrypoints/http_server.h"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <sys/socket.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>
#include <utility>
#include <vector>

#include "engine/entrypoints/detokenizer.h"
#include "engine/entrypoints/openai_protocol.h"

namespace sy::engine {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// How long a handler waits on its stream before re-checking for shutdown:
// bounds how late a stopping server ends its streams.
constexpr std::chrono::milliseconds kPoll{100};
// A silent stream sends an SSE comment this often, so a client that went
// away is noticed (by the write failing) even while no token comes.
constexpr std::chrono::seconds kKeepAlive{2};
// Request bodies beyond this are refused (413) before they are read.
constexpr size_t kMaxBodyBytes = size_t{16} << 20;

int64_t SteadyMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now().time_since_epoch())
      .count();
}

int64_t UnixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void Reply(httplib::Response& res, const ApiError& e) {
  res.status = e.http_status;
  res.set_content(Dump(ErrorBody(e)), "application/json");
}

ApiError Stopping() { return ErrorFromStatus(Unavailable("The server is shutting down.")); }

// One validated request, ready for the engine.
struct Prepared {
  RequestSpec spec;
  SamplingFields sampling;
};

// What a streaming response carries between provider calls.
struct SseState {
  std::shared_ptr<TokenStream> stream;
  std::unique_ptr<IncrementalDetokenizer> detok;
  ResponseMeta meta;
  bool chat = false;
  bool include_usage = false;
  StreamUpdate first;  // what arrived while waiting for the engine to start
  bool first_taken = false;
  bool role_sent = false;
  bool done = false;  // the whole response was written
  Clock::time_point last_write = Clock::now();
};

}  // namespace

struct HttpServer::Impl {
  HttpServerOptions options;
  RequestInbox* inbox = nullptr;
  ServingMetrics* metrics = nullptr;
  const EngineHealth* health = nullptr;
  std::shared_ptr<const Tokenizer> tokenizer;
  httplib::Server server;
  std::thread listener;
  std::atomic<bool> stopping{false};
  std::atomic<uint64_t> requests{0};  // mixed into seeds the client did not give
  int port = 0;
  int64_t created = 0;

  bool ShuttingDown() const { return stopping.load() || health->stopping.load(); }

  void Routes();
  bool Prepare(const httplib::Request& req, bool chat, Prepared* out, ApiError* error);
  void Generate(const httplib::Request& req, httplib::Response& res, bool chat);
  void ServeStream(httplib::Response& res, std::shared_ptr<SseState> st);
  bool StreamStep(SseState& st, httplib::DataSink& sink);
};

bool HttpServer::Impl::Prepare(const httplib::Request& req, bool chat, Prepared* out,
                               ApiError* error) {
  std::string param;
  std::vector<int32_t> prompt;
  const char* prompt_param = chat ? "messages" : "prompt";
  if (chat) {
    Result<ChatRequest> r = ParseChatRequest(req.body, &param);
    if (!r.ok()) {
      *error = ErrorFromStatus(r.status(), param);
      return false;
    }
    out->sampling = r->sampling;
    prompt = tokenizer->Encode(ChatPrompt(r->messages), /*add_bos=*/true);
  } else {
    Result<CompletionRequest> r = ParseCompletionRequest(req.body, &param);
    if (!r.ok()) {
      *error = ErrorFromStatus(r.status(), param);
      return false;
    }
    out->sampling = r->sampling;
    if (r->prompt_is_tokens) {
      prompt = std::move(r->prompt_tokens);
      if (Status s = CheckTokenIds(prompt, options.vocab); !s.ok()) {
        *error = ErrorFromStatus(s, "prompt");
        return false;
      }
    } else {
      prompt = tokenizer->Encode(r->prompt_text, /*add_bos=*/true);
    }
  }
  const SamplingFields& s = out->sampling;
  if (!s.model.empty() && s.model != options.model_name) {
    *error = ErrorFromStatus(NotFound("The model `" + s.model + "` does not exist."), "model");
    error->code = "model_not_found";
    return false;
  }
  if (prompt.empty()) {
    *error = ErrorFromStatus(InvalidArgument("The prompt is empty."), prompt_param);
    return false;
  }
  Result<int> max_tokens = ResolveMaxTokens(s.max_tokens, static_cast<int>(prompt.size()),
                                            options.max_seq, options.default_max_tokens);
  if (!max_tokens.ok()) {
    *error = ErrorFromStatus(max_tokens.status(), prompt_param);
    error->code = std::string(kContextLengthCode);
    return false;
  }
  out->spec.prompt = std::move(prompt);
  out->spec.max_new_tokens = *max_tokens;
  out->spec.temperature = s.temperature;
  // Without a seed each request samples differently, as OpenAI's do.
  out->spec.seed = s.seed ? *s.seed
                          : static_cast<uint64_t>(SteadyMicros()) * 0x9E3779B97F4A7C15ULL +
                                requests.fetch_add(1);
  out->spec.ignore_eos = s.ignore_eos;
  return true;
}

void HttpServer::Impl::Generate(const httplib::Request& req, httplib::Response& res, bool chat) {
  Prepared p;
  ApiError error;
  if (!Prepare(req, chat, &p, &error)) return Reply(res, error);
  if (ShuttingDown()) return Reply(res, Stopping());
  auto stream = std::make_shared<TokenStream>();
  if (Status s = inbox->Push({std::move(p.spec), stream}); !s.ok()) {
    return Reply(res, ErrorFromStatus(s));
  }
  // Wait until the engine takes or refuses the request, so a refusal still
  // gets its own status code (a stream commits to 200 once it starts).
  StreamUpdate first;
  std::vector<int32_t> early;  // tokens may already come with the start
  while (true) {
    first = stream->Wait(kPoll);
    early.insert(early.end(), first.tokens.begin(), first.tokens.end());
    if (first.finished && !first.error.ok()) return Reply(res, ErrorFromStatus(first.error));
    if (first.started || first.finished) break;
    if (ShuttingDown()) {
      stream->Cancel();
      return Reply(res, Stopping());
    }
  }
  first.tokens = std::move(early);
  ResponseMeta meta{(chat ? "chatcmpl-" : "cmpl-") + std::to_string(first.id), UnixSeconds(),
                    options.model_name};
  if (p.sampling.stream) {
    auto st = std::make_shared<SseState>();
    st->stream = std::move(stream);
    st->detok = std::make_unique<IncrementalDetokenizer>(tokenizer.get());
    st->meta = std::move(meta);
    st->chat = chat;
    st->include_usage = p.sampling.include_usage;
    st->first = std::move(first);
    return ServeStream(res, std::move(st));
  }
  // Not streaming: collect everything, then answer once.
  std::vector<int32_t> tokens = std::move(first.tokens);
  StreamUpdate last = std::move(first);
  while (!last.finished) {
    if (ShuttingDown()) {
      stream->Cancel();
      return Reply(res, Stopping());
    }
    last = stream->Wait(kPoll);
    tokens.insert(tokens.end(), last.tokens.begin(), last.tokens.end());
  }
  if (!last.error.ok()) return Reply(res, ErrorFromStatus(last.error));
  IncrementalDetokenizer detok(tokenizer.get());
  std::string text = detok.Add(tokens);
  text += detok.Finish();
  const Usage usage{last.prompt_tokens, last.completion_tokens};
  const std::string reason = OpenAiFinishReason(last.finish_reason);
  const json body = chat ? ChatResponse(meta, text, reason, usage)
                         : CompletionResponse(meta, text, reason, usage);
  res.set_content(Dump(body), "application/json");
}

void HttpServer::Impl::ServeStream(httplib::Response& res, std::shared_ptr<SseState> st) {
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, st](size_t /*offset*/, httplib::DataSink& sink) { return StreamStep(*st, sink); },
      // Ended before the last event was written (client gone, write
      // timeout, server stopping): the engine stops generating for it.
      [st](bool /*success*/) {
        if (!st->done) st->stream->Cancel();
      });
}

// One provider call: write what arrived, or wait up to kPoll. Returning
// false ends the response (httplib closes the connection).
bool HttpServer::Impl::StreamStep(SseState& st, httplib::DataSink& sink) {
  auto write = [&](const std::string& s) {
    if (!sink.write(s.data(), s.size())) {
      st.stream->Cancel();  // the client went away
      return false;
    }
    st.last_write = Clock::now();
    return true;
  };
  auto finish = [&](const std::string& tail) {
    if (!write(tail) || !write(std::string(kSseDone))) return false;
    st.done = true;
    sink.done();
    return true;
  };
  auto chunk = [&](const std::string& text, const std::string& reason) {
    return SseEvent(st.chat ? ChatChunk(st.meta, false, text, reason, st.include_usage)
                            : CompletionChunk(st.meta, text, reason, st.include_usage));
  };
  if (st.chat && !st.role_sent) {
    if (!write(SseEvent(ChatChunk(st.meta, true, "", "", st.include_usage)))) return false;
    st.role_sent = true;
  }
  StreamUpdate u;
  if (!st.first_taken) {
    u = std::move(st.first);
    st.first_taken = true;
  } else {
    u = st.stream->Wait(kPoll);
  }
  if (!u.tokens.empty()) {
    const std::string piece = st.detok->Add(u.tokens);
    if (!piece.empty() && !write(chunk(piece, ""))) return false;
  }
  if (u.finished) {
    if (!u.error.ok()) return finish(SseEvent(ErrorBody(ErrorFromStatus(u.error))));
    const std::string piece = st.detok->Finish();
    if (!piece.empty() && !write(chunk(piece, ""))) return false;
    std::string tail = chunk("", OpenAiFinishReason(u.finish_reason));
    if (st.include_usage) {
      tail += SseEvent(UsageChunk(st.meta, st.chat ? "chat.completion.chunk" : "text_completion",
                                  {u.prompt_tokens, u.completion_tokens}));
    }
    return finish(tail);
  }
  if (ShuttingDown()) {
    st.stream->Cancel();
    return finish(SseEvent(ErrorBody(Stopping())));
  }
  if (Clock::now() - st.last_write >= kKeepAlive) return write(": keep-alive\n\n");
  return true;
}

void HttpServer::Impl::Routes() {
  server.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    Generate(req, res, /*chat=*/false);
  });
  server.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    Generate(req, res, /*chat=*/true);
  });
  server.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    const json model = {{"id", options.model_name},
                        {"object", "model"},
                        {"created", created},
                        {"owned_by", "switchyard"}};
    res.set_content(Dump({{"object", "list"}, {"data", json::array({model})}}), "application/json");
  });
  server.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    const int64_t age_us = SteadyMicros() - health->last_turn_us.load();
    const bool turning = age_us <= int64_t{options.health_max_age_ms} * 1000;
    if (!ShuttingDown() && turning) {
      res.set_content(R"({"status":"ok"})", "application/json");
      return;
    }
    res.status = 503;
    const std::string why = ShuttingDown() ? "stopping" : "engine loop stalled";
    res.set_content(Dump({{"status", why}}), "application/json");
  });
  server.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics->Render(), "text/plain; version=0.0.4; charset=utf-8");
  });
  // Unknown routes (httplib answers 404) and handlers' errors both pass
  // here; only bodiless ones get the OpenAI error body.
  server.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    ApiError e;
    e.http_status = res.status;
    if (res.status == 404) {
      e.message = "Unknown route: " + req.method + " " + req.path;
    } else if (res.status == 413) {
      e.message = "The request body is larger than the limit of " +
                  std::to_string(kMaxBodyBytes >> 20) + " MiB.";
    } else {
      e.message = "HTTP " + std::to_string(res.status);
    }
    e.type = res.status >= 500 ? "server_error" : "invalid_request_error";
    Reply(res, e);
  });
  server.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "internal error";
        try {
          if (ep) std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        spdlog::error("HTTP handler failed: {}", what);
        Reply(res, ErrorFromStatus(Internal(what)));
      });
}

Result<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options,
                                                      RequestInbox* inbox, ServingMetrics* metrics,
                                                      const EngineHealth* health,
                                                      std::shared_ptr<const Tokenizer> tokenizer) {
  if (inbox == nullptr || metrics == nullptr || health == nullptr || !tokenizer) {
    return InvalidArgument("HttpServer::Start needs an inbox, metrics, health and a tokenizer");
  }
  if (options.threads < 1) return InvalidArgument("HttpServer: threads must be >= 1");
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->inbox = inbox;
  impl->metrics = metrics;
  impl->health = health;
  impl->tokenizer = std::move(tokenizer);
  impl->created = UnixSeconds();
  const size_t threads = static_cast<size_t>(options.threads);
  impl->server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  // Idle keep-alive connections hold a worker and delay shutdown: keep short.
  impl->server.set_keep_alive_timeout(2);
  impl->server.set_payload_max_length(kMaxBodyBytes);
  // httplib's default SO_REUSEPORT would let a second server share the port
  // (and split its connections) instead of failing; REUSEADDR only allows a
  // restart over TIME_WAIT.
  impl->server.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  impl->Routes();
  const std::string where = options.host + ":" + std::to_string(options.port);
  if (options.port == 0) {
    impl->port = impl->server.bind_to_any_port(options.host);
    if (impl->port < 0) return Unavailable("cannot bind the HTTP server to " + where);
  } else {
    if (!impl->server.bind_to_port(options.host, options.port)) {
      return Unavailable("cannot bind the HTTP server to " + where + " (in use?)");
    }
    impl->port = options.port;
  }
  Impl* raw = impl.get();
  impl->listener = std::thread([raw] { raw->server.listen_after_bind(); });
  // stop() is a no-op until the listen loop runs: wait for it, so that a
  // destructor right after Start cannot leave the listener running.
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (!impl->server.is_running() && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!impl->server.is_running()) {
    impl->server.stop();
    impl->listener.join();
    return Unavailable("the HTTP server on " + where + " did not start");
  }
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() {
  impl_->stopping.store(true);
  impl_->server.stop();
  if (impl_->listener.joinable()) impl_->listener.join();
}

int HttpServer::port() const { return impl_->port; }

}  // namespace sy::engine
