// Tests of the workload flags (engine/server/workload_flags.cc): a real CLI11
// app parses an argv, ResolveWorkload turns it into options or an error that
// names the flag.
#include "engine/server/workload_flags.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "base/status_matchers.h"

namespace sy::engine {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// Parses `args` on a fresh app; CLI11 errors are rethrown to the caller.
struct Parsed {
  WorkloadFlags flags;
  Result<WorkloadSelection> Resolve() const { return ResolveWorkload(flags); }
};

Parsed Parse(const std::string& args) {
  Parsed p;
  CLI::App app("test");
  AddWorkloadFlags(&app, &p.flags);
  app.parse(args, /*program_name_included=*/false);
  return p;
}

Result<WorkloadSelection> Resolve(const std::string& args) { return Parse(args).Resolve(); }

TEST(WorkloadFlagsTest, DefaultsAreTodaysPoisson) {
  Parsed p = Parse("");
  EXPECT_TRUE(p.flags.given.empty());  // defaults are not "given"
  auto sel = p.Resolve();
  ASSERT_THAT(sel.status(), IsOk());
  EXPECT_TRUE(sel->enabled);
  EXPECT_FALSE(sel->bounded);
  EXPECT_EQ(sel->options.kind, WorkloadKind::kPoisson);
  EXPECT_DOUBLE_EQ(sel->options.rate, 8.0);
  EXPECT_EQ(sel->options.prompt_len.ToString(), "16-128");
  EXPECT_EQ(sel->options.output_len.ToString(), "16-128");
  EXPECT_EQ(sel->options.Describe(), "poisson 8/s prompt=16-128 output=16-128 seed=1");
}

TEST(WorkloadFlagsTest, CommonFlags) {
  auto sel = Resolve(
      "--rate 20 --prompt-len lognormal:64 --output-len 32 --duration 30 --requests 500 "
      "--temperature 0.5");
  ASSERT_THAT(sel.status(), IsOk());
  const WorkloadOptions& o = sel->options;
  EXPECT_DOUBLE_EQ(o.rate, 20);
  EXPECT_EQ(o.prompt_len.kind, LengthDist::Kind::kLogNormal);
  EXPECT_EQ(o.output_len.ToString(), "32");
  EXPECT_DOUBLE_EQ(o.duration_s, 30);
  EXPECT_EQ(o.max_requests, 500);
  EXPECT_FLOAT_EQ(o.temperature, 0.5f);
  EXPECT_TRUE(sel->bounded);
}

TEST(WorkloadFlagsTest, BurstyKnobs) {
  auto sel = Resolve(
      "--workload bursty --quiet-rate 0 --burst-rate 100 --quiet-s 60 --burst-s 15 --duration 300");
  ASSERT_THAT(sel.status(), IsOk());
  const WorkloadOptions& o = sel->options;
  EXPECT_EQ(o.kind, WorkloadKind::kBursty);
  EXPECT_DOUBLE_EQ(o.quiet_rate, 0);
  EXPECT_DOUBLE_EQ(o.burst_rate, 100);
  EXPECT_DOUBLE_EQ(o.quiet_s, 60);
  EXPECT_DOUBLE_EQ(o.burst_s, 15);
  EXPECT_THAT(o.Describe(), HasSubstr("bursty quiet=0/s for 60s burst=100/s for 15s"));
}

TEST(WorkloadFlagsTest, RolloutIsBoundedOnceAndLongTailedByDefault) {
  auto once = Resolve("--workload rollout --rollout-size 128");
  ASSERT_THAT(once.status(), IsOk());
  EXPECT_EQ(once->options.rollout_size, 128);
  EXPECT_TRUE(once->bounded);
  EXPECT_EQ(once->options.output_len.ToString(), "lognormal:256:1");
  auto every = Resolve("--workload rollout --rollout-interval 20 --output-len 64-512");
  ASSERT_THAT(every.status(), IsOk());
  EXPECT_FALSE(every->bounded);
  EXPECT_DOUBLE_EQ(every->options.rollout_interval_s, 20);
  EXPECT_EQ(every->options.output_len.ToString(), "64-512");
}

TEST(WorkloadFlagsTest, AgenticKnobsAndSessionRate) {
  auto dflt = Resolve("--workload agentic");
  ASSERT_THAT(dflt.status(), IsOk());
  EXPECT_DOUBLE_EQ(dflt->options.rate, 0.5);  // not --rate's 8 requests/s
  EXPECT_EQ(dflt->options.Describe(),
            "agentic sessions=0.5/s turns=10-15 first=512-1024 append=64 think=1s "
            "output=16-128 seed=1");
  auto sel = Resolve(
      "--workload agentic --rate 2 --turns 3-4 --first-turn-len 100-200 --append-tokens 32 "
      "--think-s 2.5");
  ASSERT_THAT(sel.status(), IsOk());
  const WorkloadOptions& o = sel->options;
  EXPECT_DOUBLE_EQ(o.rate, 2);
  EXPECT_EQ(o.turns_min, 3);
  EXPECT_EQ(o.turns_max, 4);
  EXPECT_EQ(o.first_turn_len.ToString(), "100-200");
  EXPECT_EQ(o.append_tokens, 32);
  EXPECT_DOUBLE_EQ(o.think_s, 2.5);
  auto fixed = Resolve("--workload agentic --turns 5");
  ASSERT_THAT(fixed.status(), IsOk());
  EXPECT_EQ(fixed->options.turns_min, 5);
  EXPECT_EQ(fixed->options.turns_max, 5);
}

TEST(WorkloadFlagsTest, SharedPrefixKnobs) {
  auto sel = Resolve("--workload shared-prefix --system-prompts 8 --system-prompt-len 512");
  ASSERT_THAT(sel.status(), IsOk());
  EXPECT_EQ(sel->options.kind, WorkloadKind::kSharedPrefix);
  EXPECT_EQ(sel->options.system_prompts, 8);
  EXPECT_EQ(sel->options.system_prompt_len, 512);
}

TEST(WorkloadFlagsTest, NoneDisablesAndTakesNoKnobs) {
  auto sel = Resolve("--workload none");
  ASSERT_THAT(sel.status(), IsOk());
  EXPECT_FALSE(sel->enabled);
  EXPECT_THAT(Resolve("--workload none --rate 3").status(),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("--rate does not apply to --workload none")));
}

TEST(WorkloadFlagsTest, KnobOfAnotherScenarioIsAnError) {
  EXPECT_THAT(Resolve("--burst-rate 50").status(),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("--burst-rate does not apply to --workload poisson"),
                             HasSubstr("--workload bursty"))));
  EXPECT_THAT(Resolve("--workload rollout --rate 3").status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("--rate does not apply")));
  EXPECT_THAT(Resolve("--workload agentic --prompt-len 10").status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("--prompt-len")));
  EXPECT_THAT(Resolve("--workload bursty --think-s 1").status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("--workload agentic")));
}

TEST(WorkloadFlagsTest, WorkloadFileLoadsTheTrace) {
  const std::string path = ::testing::TempDir() + "/flags.jsonl";
  std::ofstream(path) << R"({"arrival_s": 0, "prompt": "hello", "output_len": 3})"
                      << "\n";
  auto sel = Resolve("--workload-file " + path + " --temperature 0.3");
  ASSERT_THAT(sel.status(), IsOk());
  EXPECT_EQ(sel->options.kind, WorkloadKind::kFile);
  EXPECT_TRUE(sel->bounded);
  ASSERT_NE(sel->options.trace, nullptr);
  EXPECT_EQ(sel->options.trace->size(), 1u);
  EXPECT_FLOAT_EQ(sel->options.temperature, 0.3f);

  EXPECT_THAT(Resolve("--workload-file " + path + " --workload agentic").status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("--workload-file")));
  EXPECT_THAT(Resolve("--workload-file " + path + " --output-len 5").status(),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("--output-len does not apply to --workload-file")));
  EXPECT_THAT(Resolve("--workload-file " + path + ".missing").status(),
              StatusIs(StatusCode::kNotFound, HasSubstr("--workload-file: cannot open")));
  const std::string bad = ::testing::TempDir() + "/flags-bad.jsonl";
  std::ofstream(bad) << "\n"
                     << R"({"arrival_s": 0, "prompt": "x"})"
                     << "\n";
  EXPECT_THAT(Resolve("--workload-file " + bad).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr(bad + ":2: output_len: missing")));
}

TEST(WorkloadFlagsTest, ValidatorsRejectBadValuesWhileParsing) {
  for (const char* args : {"--workload zipf",
                           "--rate 0",
                           "--rate -1",
                           "--prompt-len abc",
                           "--output-len 0",
                           "--duration -1",
                           "--requests -2",
                           "--temperature -0.1",
                           "--quiet-rate -1",
                           "--burst-rate 0",
                           "--quiet-s 0",
                           "--burst-s 0",
                           "--rollout-size 0",
                           "--rollout-interval -1",
                           "--turns 0-3",
                           "--turns lognormal:5",
                           "--first-turn-len 9-3",
                           "--append-tokens 0",
                           "--think-s -1",
                           "--system-prompts 0",
                           "--system-prompt-len 7"}) {
    EXPECT_THROW(Parse(args), CLI::ValidationError) << args;
  }
}

// The refusal says what is allowed in a few words (CLI11's own numeric
// checks wrote out DBL_MAX, 300 digits).
TEST(WorkloadFlagsTest, NumericRefusalsAreShort) {
  for (const auto& [args, want] :
       {std::pair{"--rate -1", "--rate: Value -1 must be > 0"},
        std::pair{"--burst-s 0", "--burst-s: Value 0 must be > 0"},
        std::pair{"--duration -5", "--duration: Value -5 must be >= 0"},
        std::pair{"--quiet-rate fast", "--quiet-rate: Value fast is not a number"}}) {
    try {
      Parse(args);
      ADD_FAILURE() << args << " was accepted";
    } catch (const CLI::ValidationError& e) {
      EXPECT_EQ(std::string(e.what()), want) << args;
    }
  }
}

// Values set without the CLI (or passing its checks but not Validate) are
// still refused, with the flag named.
TEST(WorkloadFlagsTest, ResolveNamesTheFlagOfAnInvalidValue) {
  WorkloadFlags f;
  f.workload = "bursty";
  f.quiet_rate = -1;
  EXPECT_THAT(ResolveWorkload(f),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("--quiet-rate: quiet_rate")));
  f = WorkloadFlags();
  f.workload = "agentic";
  f.turns = "5-2";
  EXPECT_THAT(ResolveWorkload(f), StatusIs(StatusCode::kInvalidArgument, HasSubstr("--turns")));
  f = WorkloadFlags();
  f.output_len = "x";
  EXPECT_THAT(ResolveWorkload(f),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("--output-len")));
  f = WorkloadFlags();
  f.workload = "shared-prefix";
  f.system_prompts = 0;
  EXPECT_THAT(ResolveWorkload(f),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("--system-prompts")));
  f = WorkloadFlags();
  f.workload = "file";
  EXPECT_THAT(ResolveWorkload(f),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("--workload: unknown")));
}

TEST(WorkloadFlagsTest, HelpListsEveryFlag) {
  WorkloadFlags f;
  CLI::App app("test");
  AddWorkloadFlags(&app, &f);
  const std::string help = app.help();
  for (const char* flag :
       {"--workload ",     "--workload-file",    "--rate",           "--prompt-len",
        "--output-len",    "--duration",         "--requests",       "--temperature",
        "--quiet-rate",    "--burst-rate",       "--quiet-s",        "--burst-s",
        "--rollout-size",  "--rollout-interval", "--turns",          "--first-turn-len",
        "--append-tokens", "--think-s",          "--system-prompts", "--system-prompt-len"}) {
    EXPECT_THAT(help, HasSubstr(flag));
  }
  EXPECT_THAT(help, HasSubstr("shared-prefix"));
}

}  // namespace
}  // namespace sy::engine
