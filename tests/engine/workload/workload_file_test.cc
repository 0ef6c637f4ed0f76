// Tests of JSONL traces (engine/workload/workload_file.cc): parse errors with
// file, line and field; replay; write and read back exactly.
#include "engine/workload/workload_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "base/status_matchers.h"
#include "engine/model/tokenizer.h"

namespace sy::engine {
namespace {

using ::testing::HasSubstr;

std::string TempPath(const std::string& name) { return ::testing::TempDir() + "/" + name; }

std::string WriteText(const std::string& name, const std::string& text) {
  const std::string path = TempPath(name);
  std::ofstream(path, std::ios::trunc) << text;
  return path;
}

std::string ReadText(const std::string& path) {
  std::ostringstream os;
  os << std::ifstream(path).rdbuf();
  return os.str();
}

constexpr char kGood[] = R"({"arrival_s": 0.5, "prompt": "Hi", "output_len": 4})";

TEST(WorkloadFileTest, ReadsBothPromptFormsAndSkipsBlankLines) {
  const std::string path = WriteText(
      "good.jsonl", std::string(kGood) + "\n\n  \n" +
                        R"({"arrival_s": 1.25, "prompt_tokens": [256, 7, 9], "output_len": 2,)"
                        R"( "temperature": 0.5, "ignore_eos": true, "seed": 18446744073709551615})"
                        "\n");
  auto entries = ReadWorkloadFile(path);
  ASSERT_THAT(entries.status(), IsOk());
  ASSERT_EQ(entries->size(), 2u);
  const TraceEntry& a = (*entries)[0];
  EXPECT_EQ(a.time_us, 500'000);
  EXPECT_EQ(a.text, "Hi");
  EXPECT_TRUE(a.tokens.empty());
  EXPECT_EQ(a.output_len, 4);
  EXPECT_FALSE(a.temperature.has_value());
  EXPECT_FALSE(a.ignore_eos.has_value());
  EXPECT_FALSE(a.seed.has_value());
  const TraceEntry& b = (*entries)[1];
  EXPECT_EQ(b.time_us, 1'250'000);
  EXPECT_EQ(b.tokens, (std::vector<int32_t>{256, 7, 9}));
  EXPECT_EQ(b.temperature, 0.5f);
  EXPECT_EQ(b.ignore_eos, true);
  EXPECT_EQ(b.seed, 18446744073709551615ull);
}

TEST(WorkloadFileTest, ErrorsNameFileLineAndField) {
  struct Case {
    const char* line;
    const char* expect;
  };
  const Case cases[] = {
      {R"({"arrival_s": 1, "prompt": "x", "output_len": 2)", "not valid JSON"},
      {R"([1, 2])", "expected a JSON object"},
      {R"({"prompt": "x", "output_len": 2})", "arrival_s: missing"},
      {R"({"arrival_s": -1, "prompt": "x", "output_len": 2})", "arrival_s: must be"},
      {R"({"arrival_s": "1", "prompt": "x", "output_len": 2})", "arrival_s: must be"},
      {R"({"arrival_s": 0.1, "prompt": "x", "output_len": 2})", "arrival_s: goes back"},
      // Found by fuzzing: 1e300 s rounded to a negative time in microseconds.
      {R"({"arrival_s": 1e300, "prompt": "x", "output_len": 2})", "arrival_s: must be"},
      {R"({"arrival_s": 1, "output_len": 2})", "prompt: give exactly one"},
      {R"({"arrival_s": 1, "prompt": "x", "prompt_tokens": [1], "output_len": 2})",
       "prompt: give exactly one"},
      {R"({"arrival_s": 1, "prompt": "", "output_len": 2})", "prompt: must be a non-empty"},
      {R"({"arrival_s": 1, "prompt": 5, "output_len": 2})", "prompt: must be a non-empty"},
      {R"({"arrival_s": 1, "prompt_tokens": [], "output_len": 2})", "prompt_tokens: must be"},
      {R"({"arrival_s": 1, "prompt_tokens": [1, -2], "output_len": 2})", "prompt_tokens: entry 1"},
      {R"({"arrival_s": 1, "prompt_tokens": [1.5], "output_len": 2})", "prompt_tokens: entry 0"},
      {R"({"arrival_s": 1, "prompt": "x"})", "output_len: missing"},
      {R"({"arrival_s": 1, "prompt": "x", "output_len": 0})", "output_len: must be"},
      {R"({"arrival_s": 1, "prompt": "x", "output_len": 2.5})", "output_len: must be"},
      {R"({"arrival_s": 1, "prompt": "x", "output_len": 2, "temperature": -1})",
       "temperature: must be"},
      // Found by fuzzing: a finite double, an infinite float.
      {R"({"arrival_s": 1, "prompt": "x", "output_len": 2, "temperature": 1e39})",
       "temperature: must be"},
      {R"({"arrival_s": 1, "prompt": "x", "output_len": 2, "ignore_eos": 1})",
       "ignore_eos: must be"},
      {R"({"arrival_s": 1, "prompt": "x", "output_len": 2, "seed": -3})", "seed: must be"},
      {R"({"arrival_s": 1, "prompt": "x", "output_len": 2, "outputlen": 3})",
       "outputlen: unknown field"},
  };
  for (const Case& c : cases) {
    // The bad line is line 3, after a good one and a blank one.
    const std::string path = WriteText("bad.jsonl", std::string(kGood) + "\n\n" + c.line + "\n");
    EXPECT_THAT(ReadWorkloadFile(path).status(),
                StatusIs(StatusCode::kInvalidArgument, HasSubstr(path + ":3: " + c.expect)))
        << c.line;
  }
}

TEST(WorkloadFileTest, MissingAndEmptyFiles) {
  EXPECT_THAT(ReadWorkloadFile(TempPath("no-such.jsonl")).status(),
              StatusIs(StatusCode::kNotFound, HasSubstr("no-such.jsonl")));
  const std::string empty = WriteText("empty.jsonl", "\n\n");
  EXPECT_THAT(ReadWorkloadFile(empty).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("no requests")));
  WorkloadOptions o;
  EXPECT_THAT(LoadWorkloadFile(empty, &o), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_EQ(o.kind, WorkloadKind::kPoisson);  // unchanged on error
  EXPECT_EQ(o.trace, nullptr);
}

TEST(WorkloadFileTest, ReplaysTimesTokensAndDefaults) {
  const std::string path =
      WriteText("replay.jsonl",
                std::string(kGood) + "\n" +
                    R"({"arrival_s": 2, "prompt_tokens": [256, 1, 2, 3, 4, 5, 6], "output_len": 9,)"
                    R"( "temperature": 0.25, "ignore_eos": false, "seed": 77})"
                    "\n");
  WorkloadOptions o;
  o.temperature = 0.9f;
  o.ignore_eos = true;
  o.max_prompt_tokens = 5;
  ASSERT_THAT(LoadWorkloadFile(path, &o), IsOk());
  ASSERT_THAT(o.Validate(), IsOk());
  EXPECT_EQ(o.kind, WorkloadKind::kFile);
  EXPECT_THAT(o.Describe(), HasSubstr("file " + path + " (2 requests)"));
  const auto all = WorkloadGenerator(o).Schedule();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].time_us, 500'000);
  EXPECT_EQ(all[0].spec.prompt, Encode("Hi", true));
  EXPECT_EQ(all[0].spec.max_new_tokens, 4);
  EXPECT_EQ(all[0].spec.temperature, 0.9f);  // the workload's defaults
  EXPECT_TRUE(all[0].spec.ignore_eos);
  EXPECT_EQ(all[1].time_us, 2'000'000);
  EXPECT_EQ(all[1].spec.prompt, (std::vector<int32_t>{256, 1, 2, 3, 4}));  // cut to 5
  EXPECT_EQ(all[1].spec.max_new_tokens, 9);
  EXPECT_EQ(all[1].spec.temperature, 0.25f);
  EXPECT_FALSE(all[1].spec.ignore_eos);
  EXPECT_EQ(all[1].spec.seed, 77u);
  o.max_requests = 1;
  EXPECT_EQ(WorkloadGenerator(o).Schedule().size(), 1u);
}

// Any scenario, saved and replayed, gives the same requests field for field,
// and saving the replay gives the same bytes.
TEST(WorkloadFileTest, EveryScenarioRoundTripsExactly) {
  for (WorkloadKind k : {WorkloadKind::kPoisson, WorkloadKind::kBursty, WorkloadKind::kRollout,
                         WorkloadKind::kAgentic, WorkloadKind::kSharedPrefix}) {
    WorkloadOptions o = WorkloadOptions::ForKind(k);
    o.first_turn_len = {LengthDist::Kind::kUniform, 20, 40};
    o.rate = 7.3;
    o.max_requests = 40;
    o.temperature = 0.7f;
    o.ignore_eos = k == WorkloadKind::kRollout;
    o.seed = 5;
    const auto original = WorkloadGenerator(o).Schedule();
    const std::string path = TempPath("round.jsonl");
    ASSERT_THAT(WriteWorkloadFile(original, path), IsOk());

    WorkloadOptions replay;
    replay.seed = 99;  // the file carries every request's seed
    ASSERT_THAT(LoadWorkloadFile(path, &replay), IsOk());
    const auto copy = WorkloadGenerator(replay).Schedule();
    ASSERT_EQ(copy.size(), original.size()) << WorkloadKindName(k);
    for (size_t i = 0; i < copy.size(); ++i) {
      EXPECT_EQ(copy[i].time_us, original[i].time_us);
      EXPECT_EQ(copy[i].spec.prompt, original[i].spec.prompt);
      EXPECT_EQ(copy[i].spec.max_new_tokens, original[i].spec.max_new_tokens);
      EXPECT_EQ(copy[i].spec.temperature, original[i].spec.temperature);
      EXPECT_EQ(copy[i].spec.ignore_eos, original[i].spec.ignore_eos);
      EXPECT_EQ(copy[i].spec.seed, original[i].spec.seed);
    }
    const std::string again = TempPath("round2.jsonl");
    ASSERT_THAT(WriteWorkloadFile(copy, again), IsOk());
    EXPECT_EQ(ReadText(again), ReadText(path));
  }
  EXPECT_THAT(ReadText(TempPath("round.jsonl")), HasSubstr("\"temperature\":0.7,"));
}

TEST(WorkloadFileTest, WriteRejectsWhatCouldNotBeReadBack) {
  Arrival a;
  a.spec.prompt = {256, 1};
  Arrival b = a;
  a.time_us = 10;
  b.time_us = 5;
  EXPECT_THAT(WriteWorkloadFile({a, b}, TempPath("w.jsonl")),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("arrival 1")));
  b.time_us = 20;
  b.spec.prompt.clear();
  EXPECT_THAT(WriteWorkloadFile({a, b}, TempPath("w.jsonl")),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("empty prompt")));
  EXPECT_THAT(WriteWorkloadFile({a}, TempPath("no-such-dir/w.jsonl")),
              StatusIs(StatusCode::kUnavailable, HasSubstr("no-such-dir")));
}

}  // namespace
}  // namespace sy::engine
