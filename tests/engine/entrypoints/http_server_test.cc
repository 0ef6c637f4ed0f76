// A real HttpServer on a loopback port, a real RequestInbox, and a test
// thread playing the engine loop on the other side of the hand-off (it
// echoes the prompt back, one token per turn). This covers the HTTP layer;
// tests/integration/http_api_test.py covers it against the real engine.
#include "engine/entrypoints/http_server.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "base/status_matchers.h"
#include "engine/entrypoints/detokenizer.h"
#include "engine/entrypoints/openai_protocol.h"

namespace sy::engine {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;
using namespace std::chrono_literals;

int64_t SteadyMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The engine loop's side of api_request.h: admits what the inbox holds and
// answers each request with its own prompt (BOS dropped), one token per
// turn; "ignore_eos" requests produce 'x' until max_new_tokens. A prompt
// containing "REFUSE" is refused as the scheduler refuses bad input.
class EchoEngine {
 public:
  EchoEngine(RequestInbox* inbox, EngineHealth* health) : inbox_(inbox), health_(health) {
    thread_ = std::thread([this] { Loop(); });
  }
  ~EchoEngine() {
    stop_ = true;
    thread_.join();
  }
  // Paused: no admissions and no tokens; `stall` also stops the heartbeat.
  void Pause(bool paused, bool stall = false) {
    paused_ = paused;
    stall_ = stall;
  }
  int cancelled() const { return cancelled_.load(); }
  std::vector<RequestSpec> specs() const {
    std::lock_guard<std::mutex> lock(mu_);
    return specs_;
  }

 private:
  struct Live {
    ApiSubmission sub;
    int produced = 0;
  };

  void Loop() {
    int64_t next_id = 100;
    std::vector<Live> live;
    while (!stop_) {
      if (!stall_) health_->last_turn_us.store(SteadyMicros());
      if (!paused_) {
        inbox_->SetEngineWaiting(0);
        for (ApiSubmission& s : inbox_->Drain()) {
          {
            std::lock_guard<std::mutex> lock(mu_);
            specs_.push_back(s.spec);
          }
          if (Decode(s.spec.prompt).find("REFUSE") != std::string::npos) {
            s.stream->Fail(InvalidArgument("the engine refused this prompt"));
            continue;
          }
          s.stream->Started(next_id++);
          live.push_back({std::move(s), 0});
        }
        for (size_t i = 0; i < live.size();) {
          if (Step(live[i])) {
            live.erase(live.begin() + static_cast<long>(i));
          } else {
            ++i;
          }
        }
      }
      std::this_thread::sleep_for(2ms);
    }
    for (Live& l : live) l.sub.stream->Fail(Unavailable("the engine is stopping"));
  }

  // One token for one request; true when it is done.
  bool Step(Live& l) {
    TokenStream& s = *l.sub.stream;
    const RequestSpec& spec = l.sub.spec;
    const int prompt = static_cast<int>(spec.prompt.size());
    if (s.cancelled()) {
      ++cancelled_;
      return true;
    }
    const int next = 1 + l.produced;  // the echo skips BOS
    if (!spec.ignore_eos && next >= prompt) {
      s.Finish("eos", prompt, l.produced + 1);  // EOS counts as generated
      return true;
    }
    s.PushToken(spec.ignore_eos ? 'x' : spec.prompt[next]);
    if (++l.produced == spec.max_new_tokens) {
      s.Finish("length", prompt, l.produced);
      return true;
    }
    return false;
  }

  RequestInbox* inbox_;
  EngineHealth* health_;
  std::atomic<bool> stop_{false}, paused_{false}, stall_{false};
  std::atomic<int> cancelled_{0};
  mutable std::mutex mu_;
  std::vector<RequestSpec> specs_;
  std::thread thread_;
};

// Payloads of `data:` events, in order ("[DONE]" included); comments skipped.
std::vector<std::string> SseData(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    EXPECT_NE(end, std::string::npos) << "unterminated event: " << body.substr(pos);
    if (end == std::string::npos) break;
    const std::string event = body.substr(pos, end - pos);
    pos = end + 2;
    if (event.rfind(":", 0) == 0) continue;
    EXPECT_EQ(event.rfind("data: ", 0), 0u) << event;
    out.push_back(event.substr(6));
  }
  return out;
}

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(512); }

  void Start(int max_queue) {
    engine_.reset();
    server_.reset();
    inbox_ = std::make_unique<RequestInbox>(max_queue);
    health_.last_turn_us.store(SteadyMicros());
    Result<std::unique_ptr<HttpServer>> s =
        HttpServer::Start({.host = "127.0.0.1",
                           .port = 0,
                           .model_name = "tiny",
                           .max_seq = 2048,
                           .vocab = kTokenizerVocab,
                           .default_max_tokens = 16,
                           .threads = 8,
                           .health_max_age_ms = 2000},
                          inbox_.get(), &metrics_, &health_, tokenizer_);
    ASSERT_THAT(s, IsOk());
    server_ = std::move(s).value();
    engine_ = std::make_unique<EchoEngine>(inbox_.get(), &health_);
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
    client_->set_read_timeout(10, 0);
  }

  void TearDown() override {
    server_.reset();  // first: its handlers read the inbox
    engine_.reset();
  }

  httplib::Result Post(const std::string& path, const std::string& body) {
    return client_->Post(path.c_str(), body, "application/json");
  }

  // An OpenAI error body with these fields.
  static void ExpectError(const httplib::Result& r, int status, const std::string& type,
                          const json& param, const json& code, const std::string& message) {
    ASSERT_TRUE(r) << "no response";
    EXPECT_EQ(r->status, status) << r->body;
    const json j = json::parse(r->body);
    ASSERT_TRUE(j.contains("error")) << r->body;
    EXPECT_EQ(j["error"]["type"], type) << r->body;
    EXPECT_EQ(j["error"]["param"], param) << r->body;
    EXPECT_EQ(j["error"]["code"], code) << r->body;
    EXPECT_THAT(j["error"]["message"].get<std::string>(), HasSubstr(message));
  }

  std::shared_ptr<const Tokenizer> tokenizer_ = MakeByteTokenizer();
  ServingMetrics metrics_{"tiny"};
  EngineHealth health_;
  std::unique_ptr<RequestInbox> inbox_;
  std::unique_ptr<HttpServer> server_;
  std::unique_ptr<EchoEngine> engine_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(HttpServerTest, CompletionNotStreaming) {
  auto r = Post("/v1/completions",
                R"({"model": "tiny", "prompt": "hello", "max_tokens": 3, "temperature": 0,
                    "seed": 9})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
  const json j = json::parse(r->body);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["model"], "tiny");
  EXPECT_THAT(j["id"].get<std::string>(), ::testing::StartsWith("cmpl-1"));
  EXPECT_GT(j["created"].get<int64_t>(), 1600000000);
  EXPECT_EQ(j["choices"][0]["text"], "hel");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"], json::parse(R"({"prompt_tokens": 6, "completion_tokens": 3,
                                          "total_tokens": 9})"));
  // What reached the engine.
  const std::vector<RequestSpec> specs = engine_->specs();
  ASSERT_EQ(specs.size(), 1u);
  EXPECT_EQ(specs[0].prompt, Encode("hello"));
  EXPECT_EQ(specs[0].max_new_tokens, 3);
  EXPECT_EQ(specs[0].temperature, 0.0f);
  EXPECT_EQ(specs[0].seed, 9u);

  // Ended by EOS, default max_tokens, token-id prompt.
  r = Post("/v1/completions", R"({"prompt": [256, 104, 105]})");
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["choices"][0]["text"], "hi");
  EXPECT_EQ(json::parse(r->body)["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(engine_->specs().back().max_new_tokens, 16);
}

TEST_F(HttpServerTest, ChatNotStreamingUsesTheTemplate) {
  auto r = Post("/v1/chat/completions",
                R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 100})");
  ASSERT_EQ(r->status, 200) << r->body;
  const json j = json::parse(r->body);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_THAT(j["id"].get<std::string>(), ::testing::StartsWith("chatcmpl-"));
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  // The echo engine returns the prompt: the rendered template.
  EXPECT_EQ(j["choices"][0]["message"]["content"], "<|user|>\nhi\n<|assistant|>\n");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(engine_->specs().back().prompt, Encode("<|user|>\nhi\n<|assistant|>\n"));
}

TEST_F(HttpServerTest, CompletionStreamingSse) {
  const std::string text = "h\xC3\xA9llo \xE2\x82\xAC!";  // multi-byte characters
  json req = {{"prompt", text},
              {"stream", true},
              {"max_tokens", 100},
              {"stream_options", {{"include_usage", true}}}};
  auto r = Post("/v1/completions", req.dump());
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  const std::vector<std::string> data = SseData(r->body);
  ASSERT_GE(data.size(), 4u);
  EXPECT_EQ(data.back(), "[DONE]");
  std::string joined;
  int text_chunks = 0;
  for (size_t i = 0; i + 3 < data.size(); ++i) {
    const json c = json::parse(data[i]);
    EXPECT_EQ(c["object"], "text_completion");
    EXPECT_EQ(c["choices"][0]["finish_reason"], nullptr);
    EXPECT_EQ(c["usage"], nullptr);
    const std::string piece = c["choices"][0]["text"];
    EXPECT_EQ(SanitizeUtf8(piece), piece) << "a chunk split a character";
    joined += piece;
    ++text_chunks;
  }
  EXPECT_EQ(joined, text);
  EXPECT_GT(text_chunks, 3);  // one per character or so, not one blob
  const json last = json::parse(data[data.size() - 3]);
  EXPECT_EQ(last["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(last["choices"][0]["text"], "");
  const json usage = json::parse(data[data.size() - 2]);
  EXPECT_EQ(usage["choices"], json::array());
  EXPECT_EQ(usage["usage"]["prompt_tokens"], static_cast<int>(Encode(text).size()));
}

TEST_F(HttpServerTest, ChatStreamingSse) {
  auto r = Post("/v1/chat/completions",
                R"({"messages": [{"role": "user", "content": "yo"}], "stream": true,
                    "max_tokens": 5})");
  ASSERT_EQ(r->status, 200) << r->body;
  const std::vector<std::string> data = SseData(r->body);
  ASSERT_GE(data.size(), 4u);
  EXPECT_EQ(data.back(), "[DONE]");
  const json first = json::parse(data[0]);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"], json::parse(R"({"role": "assistant", "content": ""})"));
  std::string joined;
  for (size_t i = 1; i + 2 < data.size(); ++i) {
    joined += json::parse(data[i])["choices"][0]["delta"]["content"].get<std::string>();
  }
  EXPECT_EQ(joined, "<|use");
  const json last = json::parse(data[data.size() - 2]);
  EXPECT_EQ(last["choices"][0]["delta"], json::object());
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length");
  EXPECT_FALSE(last.contains("usage"));  // not asked for
}

TEST_F(HttpServerTest, RequestErrors) {
  ExpectError(Post("/v1/completions", "{oops"), 400, "invalid_request_error", nullptr, nullptr,
              "JSON");
  ExpectError(Post("/v1/completions", R"({"prompt": "x", "max_tokens": "9"})"), 400,
              "invalid_request_error", "max_tokens", nullptr, "must be an integer");
  ExpectError(Post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": 1}]})"),
              400, "invalid_request_error", "messages[0].content", nullptr, "a string");
  ExpectError(Post("/v1/completions", R"({"prompt": "abc", "max_tokens": 2045})"), 400,
              "invalid_request_error", "prompt", "context_length_exceeded",
              "maximum context length is 2048 tokens. However, you requested 2049 tokens (4 in "
              "the messages, 2045 in the completion)");
  ExpectError(Post("/v1/completions", R"({"prompt": [1, 260]})"), 400, "invalid_request_error",
              "prompt", nullptr, "outside the vocabulary [0, 260)");
  ExpectError(Post("/v1/completions", R"({"prompt": "x", "model": "gpt-4"})"), 404,
              "invalid_request_error", "model", "model_not_found", "`gpt-4` does not exist");
  ExpectError(Post("/v1/completions", R"({"prompt": "REFUSE me"})"), 400, "invalid_request_error",
              nullptr, nullptr, "the engine refused");
  ExpectError(Post("/v1/completions", R"({"prompt": "REFUSE me", "stream": true})"), 400,
              "invalid_request_error", nullptr, nullptr, "the engine refused");
  ExpectError(client_->Get("/v1/nothing"), 404, "invalid_request_error", nullptr, nullptr,
              "Unknown route: GET /v1/nothing");
  // None of the refused-at-the-door requests reached the engine.
  EXPECT_EQ(engine_->specs().size(), 2u);
}

TEST_F(HttpServerTest, QueueFullIs503AndQueuesNothing) {
  Start(2);
  engine_->Pause(true);
  inbox_->SetEngineWaiting(2);
  ExpectError(Post("/v1/completions", R"({"prompt": "x"})"), 503, "server_error", nullptr,
              "queue_full", "queue full: 2 requests waiting");
  EXPECT_EQ(inbox_->pending(), 0);
  engine_->Pause(false);
  inbox_->SetEngineWaiting(0);  // as the engine's next turn reports
  auto r = Post("/v1/completions", R"({"prompt": "ok"})");
  ASSERT_EQ(r->status, 200) << r->body;
}

// Sends a streaming request on a raw socket, reads until the first event
// arrives, and hangs up.
void StreamAndHangUp(int port, const std::string& body) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const std::string req =
      "POST /v1/completions HTTP/1.1\r\nHost: localhost\r\n"
      "Content-Type: application/json\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  ASSERT_EQ(send(fd, req.data(), req.size(), 0), static_cast<ssize_t>(req.size()));
  std::string got;
  char buf[4096];
  while (got.find("data: ") == std::string::npos) {
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    ASSERT_GT(n, 0) << got;
    got.append(buf, static_cast<size_t>(n));
  }
  EXPECT_THAT(got, HasSubstr("HTTP/1.1 200"));
  close(fd);
}

TEST_F(HttpServerTest, ClientDisconnectCancelsTheStream) {
  StreamAndHangUp(server_->port(),
                  R"({"prompt": "x", "stream": true, "ignore_eos": true, "max_tokens": 1500})");
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (engine_->cancelled() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_EQ(engine_->cancelled(), 1);
}

TEST_F(HttpServerTest, ModelsMetricsAndHealth) {
  auto r = client_->Get("/v1/models");
  ASSERT_EQ(r->status, 200);
  const json models = json::parse(r->body);
  EXPECT_EQ(models["object"], "list");
  ASSERT_EQ(models["data"].size(), 1u);
  EXPECT_EQ(models["data"][0]["id"], "tiny");
  EXPECT_EQ(models["data"][0]["object"], "model");
  EXPECT_EQ(models["data"][0]["owned_by"], "switchyard");
  EXPECT_TRUE(models["data"][0]["created"].is_number_integer());

  metrics_.SetGauges({.running = 5,
                      .waiting = 1,
                      .token_usage = 0,
                      .state_usage = 0,
                      .cache_hit_rate = 0,
                      .cached_tokens = 0});
  r = client_->Get("/metrics");
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(r->body, metrics_.Render());
  EXPECT_THAT(r->body, HasSubstr("switchyard:num_running_reqs{model_name=\"tiny\"} 5\n"));

  r = client_->Get("/health");
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(json::parse(r->body), json::parse(R"({"status": "ok"})"));
  // The loop stops turning: stale after health_max_age_ms.
  engine_->Pause(true, /*stall=*/true);
  health_.last_turn_us.store(SteadyMicros() - 10'000'000);
  r = client_->Get("/health");
  EXPECT_EQ(r->status, 503);
  engine_->Pause(false);
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (client_->Get("/health")->status != 200 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_EQ(client_->Get("/health")->status, 200);
  health_.stopping.store(true);
  EXPECT_EQ(client_->Get("/health")->status, 503);
  ExpectError(Post("/v1/completions", R"({"prompt": "x"})"), 503, "server_error", nullptr, nullptr,
              "shutting down");
  health_.stopping.store(false);
}

TEST_F(HttpServerTest, StoppingEndsWaitingRequestsPromptly) {
  engine_->Pause(true);  // admitted nowhere: the handlers wait
  std::thread plain([port = server_->port()] {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(10, 0);
    auto r = c.Post("/v1/completions", R"({"prompt": "x"})", "application/json");
    // Either the 503 arrived or the connection was closed under it.
    if (r) {
      EXPECT_EQ(r->status, 503) << r->body;
    }
  });
  while (inbox_->pending() == 0) std::this_thread::sleep_for(1ms);
  const auto t0 = std::chrono::steady_clock::now();
  server_.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
  plain.join();
}

TEST_F(HttpServerTest, PortInUseIsUnavailable) {
  Result<std::unique_ptr<HttpServer>> again =
      HttpServer::Start({.host = "127.0.0.1",
                         .port = server_->port(),
                         .model_name = "tiny",
                         .max_seq = 64,
                         .vocab = kTokenizerVocab,
                         .default_max_tokens = 16,
                         .threads = 1,
                         .health_max_age_ms = 2000},
                        inbox_.get(), &metrics_, &health_, tokenizer_);
  EXPECT_THAT(again, StatusIs(StatusCode::kUnavailable,
                              HasSubstr("127.0.0.1:" + std::to_string(server_->port()))));
}

}  // namespace
}  // namespace sy::engine
