// File: engine/entrypoints/openai_protocol.h
//
// The OpenAI wire vocabulary of the HTTP front end, as pure functions (no
// sockets, no engine), so every rule is tested alone:
//  * parse and validate request bodies into typed requests
//    (ParseCompletionRequest, ParseChatRequest);
//  * the chat template (ChatPrompt);
//  * the prompt's token budget against the context (ResolveMaxTokens);
//  * response bodies, streaming chunks and error bodies in OpenAI's shape;
//  * the mapping from engine results (Status, finish reasons) to HTTP.
// docs/HTTP.md is the user-facing description of the same rules.
//
//   std::string param;
//   Result<CompletionRequest> r = ParseCompletionRequest(body, &param);
//   if (!r.ok()) reply(ErrorFromStatus(r.status(), param));
//
// Validation failures are INVALID_ARGUMENT with OpenAI-style messages; the
// offending field is reported through `param` (empty when the body as a
// whole is wrong). Unknown fields are ignored.
//
// Thread-safety: free functions of their arguments.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace sy::engine {

// Fields both endpoints share.
struct SamplingFields {
  std::string model;              // empty: not given (the served model)
  std::optional<int> max_tokens;  // absent: the server picks (ResolveMaxTokens)
  float temperature = 1.0f;       // OpenAI's default; 0 is greedy
  std::optional<uint64_t> seed;   // absent: the server draws one
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool ignore_eos = false;     // SGLang extension
};

struct CompletionRequest {
  SamplingFields sampling;
  // Exactly one of the two forms.
  bool prompt_is_tokens = false;
  std::string prompt_text;
  std::vector<int32_t> prompt_tokens;  // not yet checked against the vocabulary
};

struct ChatMessage {
  std::string role;  // system | user | assistant | tool
  std::string content;
};

struct ChatRequest {
  SamplingFields sampling;
  std::vector<ChatMessage> messages;  // non-empty
};

// `param` (may be null) receives the offending field's name on failure.
Result<CompletionRequest> ParseCompletionRequest(std::string_view body, std::string* param);
Result<ChatRequest> ParseChatRequest(std::string_view body, std::string* param);

// The chat template: "<|role|>\n{content}\n" per message, then
// "<|assistant|>\n". The caller encodes it with BOS.
std::string ChatPrompt(const std::vector<ChatMessage>& messages);

// INVALID_ARGUMENT (param "prompt") when a token id is outside [0, vocab).
Status CheckTokenIds(const std::vector<int32_t>& tokens, int vocab);

// How many tokens to generate for a prompt of `prompt_tokens`. An explicit
// max_tokens must fit: prompt + max_tokens <= max_seq, else INVALID_ARGUMENT
// in OpenAI's wording (ContextLengthCode()). Without one, the default is
// capped to what the context leaves; a prompt that leaves no room for a
// single token is refused the same way.
Result<int> ResolveMaxTokens(std::optional<int> requested, int prompt_tokens, int max_seq,
                             int default_max_tokens);
inline constexpr std::string_view kContextLengthCode = "context_length_exceeded";

// An error as OpenAI sends it: the HTTP status and the body's fields.
struct ApiError {
  int http_status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // empty: null
  std::string code;   // empty: null
};
// {"error": {"message", "type", "param", "code"}}.
nlohmann::json ErrorBody(const ApiError& e);
// INVALID_ARGUMENT -> 400 invalid_request_error, NOT_FOUND -> 404,
// RESOURCE_EXHAUSTED -> 503 server_error (code "queue_full"), UNAVAILABLE
// -> 503 server_error, anything else -> 500 server_error. Callers set
// `code` where they know more (kContextLengthCode, "model_not_found").
ApiError ErrorFromStatus(const Status& status, std::string param = "");

// Engine finish reason ("eos" | "length" | "cancelled") -> OpenAI's
// ("stop" | "length" | "abort").
std::string OpenAiFinishReason(std::string_view engine_reason);

// Everything a response names besides its text.
struct ResponseMeta {
  std::string id;  // "cmpl-<engine id>" / "chatcmpl-<engine id>"
  int64_t created = 0;
  std::string model;
};
struct Usage {
  int prompt_tokens = 0;
  int completion_tokens = 0;
};

nlohmann::json CompletionResponse(const ResponseMeta& meta, const std::string& text,
                                  const std::string& finish_reason, const Usage& usage);
nlohmann::json ChatResponse(const ResponseMeta& meta, const std::string& text,
                            const std::string& finish_reason, const Usage& usage);

// Streaming chunks. finish_reason empty: null (not finished). With
// include_usage every chunk carries "usage": null, and UsageChunk (choices
// []) follows the final one.
nlohmann::json CompletionChunk(const ResponseMeta& meta, const std::string& text,
                               const std::string& finish_reason, bool include_usage);
// delta: {"role": "assistant", "content": ""} when `role_chunk`, else
// {"content": text}, or {} on the final chunk (finish_reason set).
nlohmann::json ChatChunk(const ResponseMeta& meta, bool role_chunk, const std::string& text,
                         const std::string& finish_reason, bool include_usage);
nlohmann::json UsageChunk(const ResponseMeta& meta, std::string_view object, const Usage& usage);

// "data: <json>\n\n" and the terminator "data: [DONE]\n\n".
std::string SseEvent(const nlohmann::json& payload);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

}  // namespace sy::engine
