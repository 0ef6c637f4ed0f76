#include "engine/entrypoints/openai_protocol.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/status_matchers.h"

namespace sy::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using json = nlohmann::json;

struct BadCase {
  const char* body;
  const char* param;    // expected `param`
  const char* message;  // a substring of the message
};

TEST(ParseCompletionRequestTest, ReadsEveryField) {
  std::string param = "stale";
  Result<CompletionRequest> r = ParseCompletionRequest(
      R"({"model": "tiny", "prompt": "hi", "max_tokens": 7, "temperature": 0.5, "stream": true,
          "stream_options": {"include_usage": true}, "seed": 42, "n": 1, "ignore_eos": true,
          "echo": false, "logprobs": null, "top_p": 0.9, "user": "x", "stop": []})",
      &param);
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(param, "");
  EXPECT_EQ(r->sampling.model, "tiny");
  EXPECT_FALSE(r->prompt_is_tokens);
  EXPECT_EQ(r->prompt_text, "hi");
  EXPECT_EQ(r->sampling.max_tokens, 7);
  EXPECT_FLOAT_EQ(r->sampling.temperature, 0.5f);
  EXPECT_TRUE(r->sampling.stream);
  EXPECT_TRUE(r->sampling.include_usage);
  EXPECT_EQ(r->sampling.seed, 42u);
  EXPECT_TRUE(r->sampling.ignore_eos);
}

TEST(ParseCompletionRequestTest, DefaultsAndTokenPrompts) {
  Result<CompletionRequest> r = ParseCompletionRequest(R"({"prompt": [256, 72, 105]})", nullptr);
  ASSERT_THAT(r, IsOk());
  EXPECT_TRUE(r->prompt_is_tokens);
  EXPECT_THAT(r->prompt_tokens, ElementsAre(256, 72, 105));
  EXPECT_EQ(r->sampling.model, "");
  EXPECT_FALSE(r->sampling.max_tokens.has_value());
  EXPECT_FLOAT_EQ(r->sampling.temperature, 1.0f);
  EXPECT_FALSE(r->sampling.seed.has_value());
  EXPECT_FALSE(r->sampling.stream);
  EXPECT_FALSE(r->sampling.ignore_eos);
  // Null means "default"; a batch of one is the prompt itself.
  r = ParseCompletionRequest(R"({"prompt": ["one"], "max_tokens": null, "temperature": 0})",
                             nullptr);
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->prompt_text, "one");
  EXPECT_FLOAT_EQ(r->sampling.temperature, 0.0f);
  r = ParseCompletionRequest(R"({"prompt": [[5, 6]], "seed": -1})", nullptr);
  ASSERT_THAT(r, IsOk());
  EXPECT_THAT(r->prompt_tokens, ElementsAre(5, 6));
  EXPECT_EQ(r->sampling.seed, ~uint64_t{0});
}

TEST(ParseCompletionRequestTest, EveryValidationError) {
  const BadCase cases[] = {
      {"{not json", "", "JSON"},
      {"[1, 2]", "", "JSON object"},
      {R"({"max_tokens": 3})", "prompt", "required"},
      {R"({"prompt": 5})", "prompt", "must be a string or an array"},
      {R"({"prompt": []})", "prompt", "empty"},
      {R"({"prompt": ["a", "b"]})", "prompt", "Batched prompts are not supported"},
      {R"({"prompt": [[1], [2]]})", "prompt", "Batched prompts are not supported"},
      {R"({"prompt": [[[1]]]})", "prompt", "element 0 is array"},
      {R"({"prompt": [1, "a"]})", "prompt", "element 1 is string"},
      {R"({"prompt": [1, 2.5]})", "prompt", "element 1 is number"},
      {R"({"prompt": [-3]})", "prompt", "outside the vocabulary"},
      {R"({"prompt": "x", "model": 3})", "model", "'model' must be a string, not number"},
      {R"({"prompt": "x", "max_tokens": "8"})", "max_tokens", "must be an integer, not string"},
      {R"({"prompt": "x", "max_tokens": 2.5})", "max_tokens", "an integer"},
      {R"({"prompt": "x", "max_tokens": 0})", "max_tokens", "at least 1"},
      {R"({"prompt": "x", "temperature": "hot"})", "temperature", "a number"},
      {R"({"prompt": "x", "temperature": -0.1})", "temperature", "between 0 and 2"},
      {R"({"prompt": "x", "temperature": 2.5})", "temperature", "between 0 and 2"},
      {R"({"prompt": "x", "stream": "yes"})", "stream", "a boolean"},
      {R"({"prompt": "x", "stream_options": true})", "stream_options", "an object"},
      {R"({"prompt": "x", "stream_options": {"include_usage": 1}})", "stream_options.include_usage",
       "a boolean"},
      {R"({"prompt": "x", "seed": "1"})", "seed", "an integer"},
      {R"({"prompt": "x", "seed": 1.5})", "seed", "an integer"},
      {R"({"prompt": "x", "n": 2})", "n", "Only n=1"},
      {R"({"prompt": "x", "n": "1"})", "n", "an integer"},
      {R"({"prompt": "x", "ignore_eos": 1})", "ignore_eos", "a boolean"},
      {R"({"prompt": "x", "echo": true})", "echo", "not supported"},
      {R"({"prompt": "x", "echo": "no"})", "echo", "a boolean"},
      {R"({"prompt": "x", "logprobs": 2})", "logprobs", "not supported"},
      {R"({"prompt": "x", "logprobs": true})", "logprobs", "an integer"},
      {R"({"prompt": "x", "stop": "\n"})", "stop", "not supported"},
      {R"({"prompt": "x", "stop": 3})", "stop", "a string or an array"},
  };
  for (const BadCase& c : cases) {
    std::string param = "stale";
    EXPECT_THAT(ParseCompletionRequest(c.body, &param),
                StatusIs(StatusCode::kInvalidArgument, HasSubstr(c.message)))
        << c.body;
    EXPECT_EQ(param, c.param) << c.body;
  }
}

// Found by fuzzing (tests/fuzz/fuzz_openai_request): a batch of one was read
// by recursing on a copy of its element, so a body of nested brackets cost
// quadratic time (seconds for 6 KB) and, deeper, the handler's stack.
TEST(ParseCompletionRequestTest, DeeplyNestedPromptIsRefusedInOnePass) {
  const int depth = 100000;
  const std::string body =
      R"({"prompt": )" + std::string(depth, '[') + "1" + std::string(depth, ']') + "}";
  std::string param;
  EXPECT_THAT(ParseCompletionRequest(body, &param),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("element 0 is array")));
  EXPECT_EQ(param, "prompt");
}

TEST(ParseChatRequestTest, ReadsMessagesAndFields) {
  Result<ChatRequest> r = ParseChatRequest(
      R"({"messages": [{"role": "system", "content": "Be brief."},
                       {"role": "user", "content": [{"type": "text", "text": "Hi "},
                                                    {"type": "text", "text": "there"}]},
                       {"role": "assistant", "content": null},
                       {"role": "tool", "content": "42", "tool_call_id": "t"}],
          "max_tokens": 5, "max_completion_tokens": 9, "temperature": 0, "seed": 3,
          "stream": true, "n": 1, "logprobs": false, "tools": []})",
      nullptr);
  ASSERT_THAT(r, IsOk());
  ASSERT_EQ(r->messages.size(), 4u);
  EXPECT_EQ(r->messages[0].role, "system");
  EXPECT_EQ(r->messages[1].content, "Hi there");
  EXPECT_EQ(r->messages[2].content, "");
  EXPECT_EQ(r->messages[3].role, "tool");
  EXPECT_EQ(r->sampling.max_tokens, 9);  // max_completion_tokens wins
  EXPECT_EQ(r->sampling.seed, 3u);
  EXPECT_TRUE(r->sampling.stream);
  r = ParseChatRequest(R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 5})",
                       nullptr);
  ASSERT_THAT(r, IsOk());
  EXPECT_EQ(r->sampling.max_tokens, 5);
}

TEST(ParseChatRequestTest, EveryValidationError) {
  const BadCase cases[] = {
      {"", "", "JSON"},
      {R"("hello")", "", "JSON object"},
      {R"({"model": "tiny"})", "messages", "required"},
      {R"({"messages": "hi"})", "messages", "'messages' must be an array, not string"},
      {R"({"messages": []})", "messages", "empty"},
      {R"({"messages": ["hi"]})", "messages[0]", "an object"},
      {R"({"messages": [{"content": "hi"}]})", "messages[0].role", "a string"},
      {R"({"messages": [{"role": "bot", "content": "hi"}]})", "messages[0].role",
       "one of system, user, assistant, tool"},
      {R"({"messages": [{"role": "user"}]})", "messages[0].content", "required"},
      {R"({"messages": [{"role": "user", "content": 5}]})", "messages[0].content", "a string"},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
       "messages[0].content", "not supported"},
      {R"({"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": "3"})",
       "max_completion_tokens", "an integer"},
      {R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": -1})", "max_tokens",
       "at least 1"},
      {R"({"messages": [{"role": "user", "content": "x"}], "temperature": 3})", "temperature",
       "between 0 and 2"},
      {R"({"messages": [{"role": "user", "content": "x"}], "stream": 1})", "stream", "a boolean"},
      {R"({"messages": [{"role": "user", "content": "x"}], "n": 3})", "n", "Only n=1"},
      {R"({"messages": [{"role": "user", "content": "x"}], "seed": "s"})", "seed", "an integer"},
      {R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true})", "logprobs",
       "not supported"},
      {R"({"messages": [{"role": "user", "content": "x"}], "model": ["tiny"]})", "model",
       "a string"},
  };
  for (const BadCase& c : cases) {
    std::string param = "stale";
    EXPECT_THAT(ParseChatRequest(c.body, &param),
                StatusIs(StatusCode::kInvalidArgument, HasSubstr(c.message)))
        << c.body;
    EXPECT_EQ(param, c.param) << c.body;
  }
}

TEST(ChatPromptTest, RendersTheTemplate) {
  EXPECT_EQ(ChatPrompt({{"system", "Be brief."}, {"user", "Hi"}}),
            "<|system|>\nBe brief.\n<|user|>\nHi\n<|assistant|>\n");
  EXPECT_EQ(ChatPrompt({{"user", ""}}), "<|user|>\n\n<|assistant|>\n");
}

TEST(CheckTokenIdsTest, RejectsIdsOutsideTheVocabulary) {
  EXPECT_THAT(CheckTokenIds({0, 259}, 260), IsOk());
  EXPECT_THAT(CheckTokenIds({1, 260}, 260),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("Token id 260 at position 1 is outside the vocabulary [0, 260)")));
  EXPECT_THAT(CheckTokenIds({-1}, 260), StatusIs(StatusCode::kInvalidArgument));
}

TEST(ResolveMaxTokensTest, ExplicitMustFitDefaultIsCapped) {
  EXPECT_EQ(*ResolveMaxTokens(10, 100, 1024, 128), 10);
  EXPECT_EQ(*ResolveMaxTokens(924, 100, 1024, 128), 924);  // exactly full
  EXPECT_THAT(ResolveMaxTokens(925, 100, 1024, 128),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("This model's maximum context length is 1024 tokens. However, "
                                 "you requested 1025 tokens (100 in the messages, 925 in the "
                                 "completion).")));
  EXPECT_EQ(*ResolveMaxTokens(std::nullopt, 100, 1024, 128), 128);
  EXPECT_EQ(*ResolveMaxTokens(std::nullopt, 1000, 1024, 128), 24);  // capped to the room
  EXPECT_EQ(*ResolveMaxTokens(std::nullopt, 1023, 1024, 128), 1);
  EXPECT_THAT(ResolveMaxTokens(std::nullopt, 1024, 1024, 128),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("(1024 in the messages, 1 in")));
}

TEST(ErrorTest, MapsStatusesToHttp) {
  ApiError e = ErrorFromStatus(InvalidArgument("bad"), "prompt");
  EXPECT_EQ(e.http_status, 400);
  EXPECT_EQ(ErrorBody(e), json::parse(R"({"error": {"message": "bad", "type":
      "invalid_request_error", "param": "prompt", "code": null}})"));
  EXPECT_EQ(ErrorFromStatus(NotFound("x")).http_status, 404);
  e = ErrorFromStatus(ResourceExhausted("queue full: 3 requests waiting"));
  EXPECT_EQ(e.http_status, 503);
  EXPECT_EQ(ErrorBody(e), json::parse(R"({"error": {"message": "queue full: 3 requests waiting",
      "type": "server_error", "param": null, "code": "queue_full"}})"));
  EXPECT_EQ(ErrorFromStatus(Unavailable("stopping")).http_status, 503);
  EXPECT_EQ(ErrorFromStatus(Internal("bug")).http_status, 500);
  EXPECT_EQ(ErrorFromStatus(Internal("bug")).type, "server_error");
}

TEST(FinishReasonTest, MapsEngineNamesToOpenAi) {
  EXPECT_EQ(OpenAiFinishReason("eos"), "stop");
  EXPECT_EQ(OpenAiFinishReason("length"), "length");
  EXPECT_EQ(OpenAiFinishReason("cancelled"), "abort");
}

const ResponseMeta kMeta{"cmpl-7", 1700000000, "tiny"};

TEST(ResponseTest, CompletionShape) {
  EXPECT_EQ(CompletionResponse(kMeta, "hello", "stop", {3, 5}), json::parse(R"({
      "id": "cmpl-7", "object": "text_completion", "created": 1700000000, "model": "tiny",
      "choices": [{"index": 0, "text": "hello", "finish_reason": "stop", "logprobs": null}],
      "usage": {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}})"));
}

TEST(ResponseTest, ChatShape) {
  const ResponseMeta meta{"chatcmpl-7", 1700000000, "tiny"};
  EXPECT_EQ(ChatResponse(meta, "hi", "length", {4, 2}), json::parse(R"({
      "id": "chatcmpl-7", "object": "chat.completion", "created": 1700000000, "model": "tiny",
      "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"},
                   "finish_reason": "length", "logprobs": null}],
      "usage": {"prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6}})"));
}

TEST(ResponseTest, StreamingChunks) {
  EXPECT_EQ(CompletionChunk(kMeta, "he", "", false), json::parse(R"({
      "id": "cmpl-7", "object": "text_completion", "created": 1700000000, "model": "tiny",
      "choices": [{"index": 0, "text": "he", "finish_reason": null, "logprobs": null}]})"));
  EXPECT_EQ(CompletionChunk(kMeta, "", "stop", true)["usage"], nullptr);
  EXPECT_EQ(CompletionChunk(kMeta, "", "stop", true)["choices"][0]["finish_reason"], "stop");

  const ResponseMeta meta{"chatcmpl-7", 1700000000, "tiny"};
  const json role = ChatChunk(meta, true, "", "", false);
  EXPECT_EQ(role["object"], "chat.completion.chunk");
  EXPECT_EQ(role["choices"][0]["delta"], json::parse(R"({"role": "assistant", "content": ""})"));
  EXPECT_EQ(role["choices"][0]["finish_reason"], nullptr);
  EXPECT_FALSE(role.contains("usage"));
  EXPECT_EQ(ChatChunk(meta, false, "yo", "", true)["choices"][0]["delta"],
            json::parse(R"({"content": "yo"})"));
  const json last = ChatChunk(meta, false, "", "stop", true);
  EXPECT_EQ(last["choices"][0]["delta"], json::object());
  EXPECT_EQ(last["choices"][0]["finish_reason"], "stop");
  EXPECT_TRUE(last.contains("usage"));

  EXPECT_EQ(UsageChunk(meta, "chat.completion.chunk", {2, 3}), json::parse(R"({
      "id": "chatcmpl-7", "object": "chat.completion.chunk", "created": 1700000000,
      "model": "tiny", "choices": [],
      "usage": {"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5}})"));
}

TEST(ResponseTest, SseFraming) {
  EXPECT_EQ(SseEvent(json{{"a", 1}}), "data: {\"a\":1}\n\n");
  EXPECT_EQ(kSseDone, "data: [DONE]\n\n");
  // Invalid UTF-8 never throws out of the framing.
  EXPECT_EQ(SseEvent(json{{"t", std::string("\xFF")}}), "data: {\"t\":\"\xEF\xBF\xBD\"}\n\n");
}

}  // namespace
}  // namespace sy::engine
