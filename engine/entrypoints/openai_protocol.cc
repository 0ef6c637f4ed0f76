#include "engine/entrypoints/openai_protocol.h"

#include <limits>
#include <utility>

namespace sy::engine {
namespace {

using nlohmann::json;

// Validation carries the field name out beside the Status.
Status FieldError(std::string* param, std::string_view field, std::string message) {
  if (param != nullptr) *param = std::string(field);
  return InvalidArgument(std::move(message));
}

Status WrongType(std::string* param, std::string_view field, std::string_view expected,
                 const json& value) {
  return FieldError(param, field,
                    "'" + std::string(field) + "' must be " + std::string(expected) + ", not " +
                        std::string(value.type_name()));
}

// A present, non-null field; nullptr when absent or null (both mean "default").
const json* Field(const json& body, std::string_view name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

Result<json> ParseObject(std::string_view body, std::string* param) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return FieldError(param, "",
                      "We could not parse the JSON body of your request: it is not valid JSON.");
  }
  if (!j.is_object()) {
    return FieldError(
        param, "",
        "The request body must be a JSON object, not " + std::string(j.type_name()) + ".");
  }
  return j;
}

Status ReadBool(const json& body, std::string_view name, bool* out, std::string* param) {
  const json* v = Field(body, name);
  if (v == nullptr) return Status::Ok();
  if (!v->is_boolean()) return WrongType(param, name, "a boolean", *v);
  *out = v->get<bool>();
  return Status::Ok();
}

Status ReadMaxTokens(const json& body, std::string_view name, std::optional<int>* out,
                     std::string* param) {
  const json* v = Field(body, name);
  if (v == nullptr) return Status::Ok();
  if (!v->is_number_integer()) return WrongType(param, name, "an integer", *v);
  const int64_t n = v->get<int64_t>();
  if (n < 1 || n > std::numeric_limits<int>::max()) {
    return FieldError(param, name,
                      "'" + std::string(name) + "' must be at least 1, got " + v->dump() + ".");
  }
  *out = static_cast<int>(n);
  return Status::Ok();
}

// The fields completions and chat share; `max_tokens` is read by the caller.
Status ReadSampling(const json& body, SamplingFields* s, std::string* param) {
  if (const json* v = Field(body, "model")) {
    if (!v->is_string()) return WrongType(param, "model", "a string", *v);
    s->model = v->get<std::string>();
  }
  if (const json* v = Field(body, "temperature")) {
    if (!v->is_number()) return WrongType(param, "temperature", "a number", *v);
    const double t = v->get<double>();
    if (!(t >= 0.0 && t <= 2.0)) {
      return FieldError(param, "temperature",
                        "'temperature' must be between 0 and 2, got " + v->dump() + ".");
    }
    s->temperature = static_cast<float>(t);
  }
  if (const json* v = Field(body, "seed")) {
    if (!v->is_number_integer()) return WrongType(param, "seed", "an integer", *v);
    // Negative seeds are valid OpenAI input; they map onto the same 64 bits.
    s->seed =
        v->is_number_unsigned() ? v->get<uint64_t>() : static_cast<uint64_t>(v->get<int64_t>());
  }
  if (const json* v = Field(body, "n")) {
    if (!v->is_number_integer()) return WrongType(param, "n", "an integer", *v);
    if (v->get<int64_t>() != 1) {
      return FieldError(param, "n", "Only n=1 is supported, got n=" + v->dump() + ".");
    }
  }
  RETURN_IF_ERROR(ReadBool(body, "stream", &s->stream, param));
  if (const json* v = Field(body, "stream_options")) {
    if (!v->is_object()) return WrongType(param, "stream_options", "an object", *v);
    if (Status st = ReadBool(*v, "include_usage", &s->include_usage, param); !st.ok()) {
      if (param != nullptr) *param = "stream_options.include_usage";
      return st;
    }
  }
  RETURN_IF_ERROR(ReadBool(body, "ignore_eos", &s->ignore_eos, param));
  // Stop sequences would change the text; refusing beats silently ignoring.
  if (const json* v = Field(body, "stop")) {
    const bool empty = (v->is_array() && v->empty()) ||
                       (v->is_string() && v->get_ref<const std::string&>().empty());
    if (!v->is_string() && !v->is_array())
      return WrongType(param, "stop", "a string or an array", *v);
    if (!empty) return FieldError(param, "stop", "'stop' sequences are not supported.");
  }
  return Status::Ok();
}

Status Unsupported(std::string* param, std::string_view field) {
  return FieldError(param, field, "'" + std::string(field) + "' is not supported.");
}

// `ids` is a JSON array meant as token ids; nested arrays are refused here,
// so a body of deeply nested brackets costs one pass, not a recursion.
Status ReadTokenIds(const json& ids, CompletionRequest* r, std::string* param) {
  if (ids.empty()) return FieldError(param, "prompt", "'prompt' must not be empty.");
  r->prompt_is_tokens = true;
  for (size_t i = 0; i < ids.size(); ++i) {
    const json& t = ids[i];
    if (!t.is_number_integer()) {
      return FieldError(param, "prompt",
                        "'prompt' must be a string or an array of token ids; element " +
                            std::to_string(i) + " is " + std::string(t.type_name()) + ".");
    }
    const int64_t id = t.get<int64_t>();
    if (id < 0 || id > std::numeric_limits<int32_t>::max()) {
      return FieldError(param, "prompt",
                        "Token id " + t.dump() + " at position " + std::to_string(i) +
                            " is outside the vocabulary.");
    }
    r->prompt_tokens.push_back(static_cast<int32_t>(id));
  }
  return Status::Ok();
}

Status ReadPrompt(const json& body, CompletionRequest* r, std::string* param) {
  const json* v = Field(body, "prompt");
  if (v == nullptr) return FieldError(param, "prompt", "'prompt' is a required property.");
  if (v->is_string()) {
    r->prompt_text = v->get<std::string>();
    return Status::Ok();
  }
  if (!v->is_array()) return WrongType(param, "prompt", "a string or an array of token ids", *v);
  if (v->empty()) return FieldError(param, "prompt", "'prompt' must not be empty.");
  if ((*v)[0].is_string() || (*v)[0].is_array()) {
    if (v->size() > 1) {
      return FieldError(param, "prompt", "Batched prompts are not supported: send one prompt.");
    }
    // A batch of one is the prompt itself: a string or one list of token ids.
    if ((*v)[0].is_string()) {
      r->prompt_text = (*v)[0].get<std::string>();
      return Status::Ok();
    }
    return ReadTokenIds((*v)[0], r, param);
  }
  return ReadTokenIds(*v, r, param);
}

json Choice0(std::string_view finish_reason) {
  return finish_reason.empty() ? json(nullptr) : json(std::string(finish_reason));
}

json Head(const ResponseMeta& meta, std::string_view object) {
  return json{
      {"id", meta.id}, {"object", object}, {"created", meta.created}, {"model", meta.model}};
}

json UsageJson(const Usage& u) {
  return json{{"prompt_tokens", u.prompt_tokens},
              {"completion_tokens", u.completion_tokens},
              {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

}  // namespace

Result<CompletionRequest> ParseCompletionRequest(std::string_view body, std::string* param) {
  if (param != nullptr) param->clear();
  ASSIGN_OR_RETURN(json j, ParseObject(body, param));
  CompletionRequest r;
  RETURN_IF_ERROR(ReadPrompt(j, &r, param));
  RETURN_IF_ERROR(ReadSampling(j, &r.sampling, param));
  RETURN_IF_ERROR(ReadMaxTokens(j, "max_tokens", &r.sampling.max_tokens, param));
  bool echo = false;
  RETURN_IF_ERROR(ReadBool(j, "echo", &echo, param));
  if (echo) return Unsupported(param, "echo");
  if (const json* v = Field(j, "logprobs")) {
    if (!v->is_number_integer()) return WrongType(param, "logprobs", "an integer", *v);
    if (v->get<int64_t>() != 0) return Unsupported(param, "logprobs");
  }
  return r;
}

Result<ChatRequest> ParseChatRequest(std::string_view body, std::string* param) {
  if (param != nullptr) param->clear();
  ASSIGN_OR_RETURN(json j, ParseObject(body, param));
  ChatRequest r;
  const json* msgs = Field(j, "messages");
  if (msgs == nullptr) return FieldError(param, "messages", "'messages' is a required property.");
  if (!msgs->is_array()) return WrongType(param, "messages", "an array", *msgs);
  if (msgs->empty()) return FieldError(param, "messages", "'messages' must not be empty.");
  for (size_t i = 0; i < msgs->size(); ++i) {
    const json& m = (*msgs)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return WrongType(param, where, "an object", m);
    const json* role = Field(m, "role");
    if (role == nullptr || !role->is_string()) {
      return FieldError(param, where + ".role", "'" + where + ".role' must be a string.");
    }
    const std::string& rs = role->get_ref<const std::string&>();
    if (rs != "system" && rs != "user" && rs != "assistant" && rs != "tool") {
      return FieldError(
          param, where + ".role",
          "'" + where + ".role' must be one of system, user, assistant, tool; got '" + rs + "'.");
    }
    ChatMessage cm{rs, ""};
    const json* content = Field(m, "content");
    if (content == nullptr) {
      // An assistant turn may carry no text (OpenAI allows null there).
      if (rs != "assistant") {
        return FieldError(param, where + ".content", "'" + where + ".content' is required.");
      }
    } else if (content->is_string()) {
      cm.content = content->get<std::string>();
    } else if (content->is_array()) {
      // Text parts, concatenated; other kinds (images, audio) are refused.
      for (const json& part : *content) {
        const json* type = part.is_object() ? Field(part, "type") : nullptr;
        const json* text = part.is_object() ? Field(part, "text") : nullptr;
        if (type == nullptr || *type != "text" || text == nullptr || !text->is_string()) {
          return FieldError(param, where + ".content",
                            "'" + where +
                                ".content' parts must be {\"type\": \"text\", \"text\": "
                                "string}; other kinds are not supported.");
        }
        cm.content += text->get<std::string>();
      }
    } else {
      return WrongType(param, where + ".content", "a string", *content);
    }
    r.messages.push_back(std::move(cm));
  }
  RETURN_IF_ERROR(ReadSampling(j, &r.sampling, param));
  RETURN_IF_ERROR(ReadMaxTokens(j, "max_tokens", &r.sampling.max_tokens, param));
  // The newer name wins when both are sent.
  RETURN_IF_ERROR(ReadMaxTokens(j, "max_completion_tokens", &r.sampling.max_tokens, param));
  bool logprobs = false;
  RETURN_IF_ERROR(ReadBool(j, "logprobs", &logprobs, param));
  if (logprobs) return Unsupported(param, "logprobs");
  return r;
}

std::string ChatPrompt(const std::vector<ChatMessage>& messages) {
  std::string out;
  for (const ChatMessage& m : messages) out += "<|" + m.role + "|>\n" + m.content + "\n";
  out += "<|assistant|>\n";
  return out;
}

Status CheckTokenIds(const std::vector<int32_t>& tokens, int vocab) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= vocab) {
      return InvalidArgument("Token id " + std::to_string(tokens[i]) + " at position " +
                             std::to_string(i) + " is outside the vocabulary [0, " +
                             std::to_string(vocab) + ").");
    }
  }
  return Status::Ok();
}

Result<int> ResolveMaxTokens(std::optional<int> requested, int prompt_tokens, int max_seq,
                             int default_max_tokens) {
  const int room = max_seq - prompt_tokens;
  const int want = requested.value_or(std::min(default_max_tokens, std::max(room, 1)));
  if (static_cast<int64_t>(prompt_tokens) + want > max_seq) {
    return InvalidArgument("This model's maximum context length is " + std::to_string(max_seq) +
                           " tokens. However, you requested " +
                           std::to_string(static_cast<int64_t>(prompt_tokens) + want) +
                           " tokens (" + std::to_string(prompt_tokens) + " in the messages, " +
                           std::to_string(want) +
                           " in the completion). Please reduce the length of the messages or "
                           "completion.");
  }
  return want;
}

nlohmann::json ErrorBody(const ApiError& e) {
  auto or_null = [](const std::string& s) { return s.empty() ? json(nullptr) : json(s); };
  return json{{"error",
               {{"message", e.message},
                {"type", e.type},
                {"param", or_null(e.param)},
                {"code", or_null(e.code)}}}};
}

ApiError ErrorFromStatus(const Status& status, std::string param) {
  ApiError e;
  e.message = status.message();
  e.param = std::move(param);
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
      e.http_status = 400;
      break;
    case StatusCode::kNotFound:
      e.http_status = 404;
      break;
    case StatusCode::kResourceExhausted:
      e.http_status = 503;
      e.type = "server_error";
      e.code = "queue_full";
      break;
    case StatusCode::kUnavailable:
      e.http_status = 503;
      e.type = "server_error";
      break;
    default:
      e.http_status = 500;
      e.type = "server_error";
      break;
  }
  return e;
}

std::string OpenAiFinishReason(std::string_view engine_reason) {
  if (engine_reason == "eos") return "stop";
  if (engine_reason == "length") return "length";
  if (engine_reason == "cancelled") return "abort";
  return std::string(engine_reason);
}

nlohmann::json CompletionResponse(const ResponseMeta& meta, const std::string& text,
                                  const std::string& finish_reason, const Usage& usage) {
  json j = Head(meta, "text_completion");
  j["choices"] = json::array({json{{"index", 0},
                                   {"text", text},
                                   {"finish_reason", Choice0(finish_reason)},
                                   {"logprobs", nullptr}}});
  j["usage"] = UsageJson(usage);
  return j;
}

nlohmann::json ChatResponse(const ResponseMeta& meta, const std::string& text,
                            const std::string& finish_reason, const Usage& usage) {
  json j = Head(meta, "chat.completion");
  j["choices"] = json::array({json{{"index", 0},
                                   {"message", {{"role", "assistant"}, {"content", text}}},
                                   {"finish_reason", Choice0(finish_reason)},
                                   {"logprobs", nullptr}}});
  j["usage"] = UsageJson(usage);
  return j;
}

nlohmann::json CompletionChunk(const ResponseMeta& meta, const std::string& text,
                               const std::string& finish_reason, bool include_usage) {
  json j = Head(meta, "text_completion");
  j["choices"] = json::array({json{{"index", 0},
                                   {"text", text},
                                   {"finish_reason", Choice0(finish_reason)},
                                   {"logprobs", nullptr}}});
  if (include_usage) j["usage"] = nullptr;
  return j;
}

nlohmann::json ChatChunk(const ResponseMeta& meta, bool role_chunk, const std::string& text,
                         const std::string& finish_reason, bool include_usage) {
  json delta = json::object();
  if (role_chunk) {
    delta = {{"role", "assistant"}, {"content", ""}};
  } else if (finish_reason.empty()) {
    delta = {{"content", text}};
  }
  json j = Head(meta, "chat.completion.chunk");
  j["choices"] = json::array({json{{"index", 0},
                                   {"delta", delta},
                                   {"finish_reason", Choice0(finish_reason)},
                                   {"logprobs", nullptr}}});
  if (include_usage) j["usage"] = nullptr;
  return j;
}

nlohmann::json UsageChunk(const ResponseMeta& meta, std::string_view object, const Usage& usage) {
  json j = Head(meta, object);
  j["choices"] = json::array();
  j["usage"] = UsageJson(usage);
  return j;
}

std::string SseEvent(const nlohmann::json& payload) {
  // Invalid UTF-8 cannot reach here (the detokenizer replaces it), but a
  // throw must never escape a handler: replace rather than throw.
  return "data: " + payload.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

}  // namespace sy::engine
