// Fuzz target: HTTP request bodies of the OpenAI front end
// (engine/entrypoints/openai_protocol.h). The request line and headers are
// cpp-httplib's to parse; everything the server itself reads from a request
// is the body, through these pure functions, in the order
// HttpServer::Prepare calls them. Input: one body, tried as a completion
// and as a chat request.
//
// Contract checked: the parsers fail only with INVALID_ARGUMENT, and the
// error becomes an OpenAI error body that serialises; what they accept
// keeps the documented rules (temperature in [0, 2], max_tokens >= 1, token
// ids >= 0, a non-empty message list with known roles); ResolveMaxTokens,
// when it accepts, leaves prompt + max_tokens within the context.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/entrypoints/openai_protocol.h"
#include "tests/fuzz/fuzz_util.h"

using sy::StatusCode;
namespace en = sy::engine;

namespace {

constexpr int kVocab = 260;
constexpr int kMaxSeq = 1024;
constexpr int kDefaultMaxTokens = 128;

void CheckRefusal(const sy::Status& s, const std::string& param) {
  SY_FUZZ_CHECK(s.code() == StatusCode::kInvalidArgument, s.ToString());
  const en::ApiError e = en::ErrorFromStatus(s, param);
  SY_FUZZ_CHECK(e.http_status == 400, std::to_string(e.http_status));
  // The server writes it with the replacing error handler; the message must
  // not depend on that (it quotes only what the JSON parser accepted).
  SY_FUZZ_CHECK(!en::ErrorBody(e).dump().empty(), s.message());
}

void CheckSampling(const en::SamplingFields& s) {
  SY_FUZZ_CHECK(s.temperature >= 0.0f && s.temperature <= 2.0f, std::to_string(s.temperature));
  if (s.max_tokens) SY_FUZZ_CHECK(*s.max_tokens >= 1, std::to_string(*s.max_tokens));
}

void CheckBudget(std::optional<int> max_tokens, size_t prompt) {
  if (prompt > static_cast<size_t>(kMaxSeq) * 4) return;  // the server refuses earlier anyway
  const int n = static_cast<int>(prompt);
  sy::Result<int> want = en::ResolveMaxTokens(max_tokens, n, kMaxSeq, kDefaultMaxTokens);
  if (!want.ok()) {
    SY_FUZZ_CHECK(want.status().code() == StatusCode::kInvalidArgument, want.status().ToString());
    return;
  }
  SY_FUZZ_CHECK(*want >= 1 && n + *want <= kMaxSeq,
                std::to_string(n) + " + " + std::to_string(*want));
  if (max_tokens) SY_FUZZ_CHECK(*want == *max_tokens, std::to_string(*want));
}

void Completion(std::string_view body) {
  std::string param = "stale";
  sy::Result<en::CompletionRequest> r = en::ParseCompletionRequest(body, &param);
  if (!r.ok()) return CheckRefusal(r.status(), param);
  SY_FUZZ_CHECK(param.empty(), param);
  CheckSampling(r->sampling);
  if (r->prompt_is_tokens) {
    SY_FUZZ_CHECK(!r->prompt_tokens.empty() && r->prompt_text.empty(), "token prompt");
    for (int32_t t : r->prompt_tokens) SY_FUZZ_CHECK(t >= 0, std::to_string(t));
    const sy::Status ids = en::CheckTokenIds(r->prompt_tokens, kVocab);
    if (!ids.ok()) return CheckRefusal(ids, "prompt");
    CheckBudget(r->sampling.max_tokens, r->prompt_tokens.size());
  } else {
    SY_FUZZ_CHECK(r->prompt_tokens.empty(), "text prompt with tokens");
    CheckBudget(r->sampling.max_tokens, r->prompt_text.size() + 1);  // byte tokenizer + BOS
  }
}

void Chat(std::string_view body) {
  std::string param = "stale";
  sy::Result<en::ChatRequest> r = en::ParseChatRequest(body, &param);
  if (!r.ok()) return CheckRefusal(r.status(), param);
  SY_FUZZ_CHECK(param.empty(), param);
  CheckSampling(r->sampling);
  SY_FUZZ_CHECK(!r->messages.empty(), "no messages");
  for (const en::ChatMessage& m : r->messages) {
    SY_FUZZ_CHECK(
        m.role == "system" || m.role == "user" || m.role == "assistant" || m.role == "tool",
        m.role);
  }
  const std::string prompt = en::ChatPrompt(r->messages);
  SY_FUZZ_CHECK(prompt.size() >= r->messages.size() * 5, "template lost a message");
  CheckBudget(r->sampling.max_tokens, prompt.size() + 1);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  Completion(body);
  Chat(body);
  return 0;
}
