#include "engine/workload/workload.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "base/status_matchers.h"
#include "engine/model/tokenizer.h"

namespace sy::engine {
namespace {

using ::testing::HasSubstr;

TEST(LengthDistTest, ParsesTheThreeForms) {
  auto fixed = LengthDist::Parse("32");
  ASSERT_THAT(fixed.status(), IsOk());
  EXPECT_EQ(fixed->kind, LengthDist::Kind::kFixed);
  EXPECT_EQ(fixed->min, 32);
  EXPECT_EQ(fixed->max, 32);
  auto uni = LengthDist::Parse("16-256");
  ASSERT_THAT(uni.status(), IsOk());
  EXPECT_EQ(uni->kind, LengthDist::Kind::kUniform);
  EXPECT_EQ(uni->min, 16);
  EXPECT_EQ(uni->max, 256);
  EXPECT_EQ(uni->ToString(), "16-256");
  auto ln = LengthDist::Parse("lognormal:100:0.5");
  ASSERT_THAT(ln.status(), IsOk());
  EXPECT_EQ(ln->kind, LengthDist::Kind::kLogNormal);
  EXPECT_DOUBLE_EQ(ln->mean, 100);
  EXPECT_DOUBLE_EQ(ln->sigma, 0.5);
  EXPECT_EQ(ln->max, 800);
}

TEST(LengthDistTest, RejectsMalformedText) {
  for (const char* bad :
       {"", "abc", "10-", "-5", "5-2", "0", "lognormal:", "lognormal:x", "lognormal:10:0", "12x"}) {
    EXPECT_THAT(LengthDist::Parse(bad).status(), StatusIs(StatusCode::kInvalidArgument)) << bad;
  }
  EXPECT_THAT(LengthDist::Parse("abc").status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("MIN-MAX")));
}

TEST(WorkloadOptionsTest, ValidatesFields) {
  WorkloadOptions o;
  EXPECT_THAT(o.Validate(), IsOk());
  o.rate = 0;
  EXPECT_THAT(o.Validate(), StatusIs(StatusCode::kInvalidArgument, HasSubstr("rate")));
  o.burst = true;
  EXPECT_THAT(o.Validate(), StatusIs(StatusCode::kInvalidArgument, HasSubstr("max_requests")));
  o.max_requests = 3;
  EXPECT_THAT(o.Validate(), IsOk());
  o.prompt_len.min = 0;
  EXPECT_THAT(o.Validate(), StatusIs(StatusCode::kInvalidArgument, HasSubstr("prompt_len")));
}

// Each scenario's own fields, each named in the message; fields another
// scenario reads are not checked.
TEST(WorkloadOptionsTest, ValidatesEachScenariosFields) {
  struct Case {
    WorkloadKind kind;
    void (*spoil)(WorkloadOptions&);
    const char* field;
  };
  const Case cases[] = {
      {WorkloadKind::kPoisson, [](WorkloadOptions& o) { o.duration_s = -1; }, "duration_s"},
      {WorkloadKind::kPoisson, [](WorkloadOptions& o) { o.max_requests = -1; }, "max_requests"},
      {WorkloadKind::kPoisson, [](WorkloadOptions& o) { o.temperature = -1; }, "temperature"},
      {WorkloadKind::kPoisson, [](WorkloadOptions& o) { o.max_prompt_tokens = 0; },
       "max_prompt_tokens"},
      {WorkloadKind::kPoisson, [](WorkloadOptions& o) { o.output_len.max = 1; }, "output_len"},
      {WorkloadKind::kBursty, [](WorkloadOptions& o) { o.quiet_rate = -1; }, "quiet_rate"},
      {WorkloadKind::kBursty, [](WorkloadOptions& o) { o.burst_rate = 0; }, "burst_rate"},
      {WorkloadKind::kBursty, [](WorkloadOptions& o) { o.quiet_s = 0; }, "quiet_s"},
      {WorkloadKind::kBursty, [](WorkloadOptions& o) { o.burst_s = -2; }, "burst_s"},
      {WorkloadKind::kBursty, [](WorkloadOptions& o) { o.burst = true; }, "burst"},
      {WorkloadKind::kRollout, [](WorkloadOptions& o) { o.rollout_size = 0; }, "rollout_size"},
      {WorkloadKind::kRollout, [](WorkloadOptions& o) { o.rollout_interval_s = -1; },
       "rollout_interval_s"},
      {WorkloadKind::kAgentic, [](WorkloadOptions& o) { o.rate = 0; }, "rate (sessions/s)"},
      {WorkloadKind::kAgentic, [](WorkloadOptions& o) { o.turns_min = 0; }, "turns_min"},
      {WorkloadKind::kAgentic, [](WorkloadOptions& o) { o.turns_max = 9; }, "turns_max"},
      {WorkloadKind::kAgentic, [](WorkloadOptions& o) { o.first_turn_len.min = 0; },
       "first_turn_len"},
      {WorkloadKind::kAgentic, [](WorkloadOptions& o) { o.append_tokens = 0; }, "append_tokens"},
      {WorkloadKind::kAgentic, [](WorkloadOptions& o) { o.think_s = -0.5; }, "think_s"},
      {WorkloadKind::kSharedPrefix, [](WorkloadOptions& o) { o.system_prompts = 0; },
       "system_prompts"},
      {WorkloadKind::kSharedPrefix, [](WorkloadOptions& o) { o.system_prompt_len = 7; },
       "system_prompt_len"},
      {WorkloadKind::kSharedPrefix, [](WorkloadOptions& o) { o.prompt_len.min = 0; }, "prompt_len"},
      {WorkloadKind::kFile, [](WorkloadOptions&) {}, "file"},
  };
  for (const Case& c : cases) {
    WorkloadOptions o = WorkloadOptions::ForKind(c.kind);
    if (c.kind != WorkloadKind::kFile) {
      EXPECT_THAT(o.Validate(), IsOk()) << c.field;
    }
    c.spoil(o);
    EXPECT_THAT(o.Validate(), StatusIs(StatusCode::kInvalidArgument, HasSubstr(c.field)))
        << c.field;
  }
  // A knob of another scenario is not this one's business.
  WorkloadOptions o = WorkloadOptions::ForKind(WorkloadKind::kRollout);
  o.rate = 0;
  o.turns_min = 0;
  o.system_prompt_len = 0;
  EXPECT_THAT(o.Validate(), IsOk());
}

TEST(WorkloadOptionsTest, KindNamesRoundTrip) {
  for (WorkloadKind k :
       {WorkloadKind::kPoisson, WorkloadKind::kBursty, WorkloadKind::kRollout,
        WorkloadKind::kAgentic, WorkloadKind::kSharedPrefix, WorkloadKind::kFile}) {
    auto parsed = ParseWorkloadKind(WorkloadKindName(k));
    ASSERT_THAT(parsed.status(), IsOk());
    EXPECT_EQ(*parsed, k);
  }
  EXPECT_EQ(WorkloadKindName(WorkloadKind::kSharedPrefix), "shared-prefix");
  EXPECT_THAT(ParseWorkloadKind("zipf").status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("agentic")));
}

TEST(WorkloadOptionsTest, DescribesEachScenarioOnOneLine) {
  WorkloadOptions o;
  EXPECT_EQ(o.Describe(), "poisson 4/s prompt=16-128 output=16-128 seed=1");
  o = WorkloadOptions::ForKind(WorkloadKind::kBursty);
  o.max_requests = 10;
  EXPECT_EQ(o.Describe(),
            "bursty quiet=2/s for 20s burst=24/s for 5s prompt=16-128 output=16-128 requests=10 "
            "seed=1");
  o = WorkloadOptions::ForKind(WorkloadKind::kRollout);
  EXPECT_EQ(o.Describe(), "rollout size=64 once prompt=16-128 output=lognormal:256:1 seed=1");
  o.rollout_interval_s = 30;
  o.temperature = 0.5f;
  EXPECT_EQ(o.Describe(),
            "rollout size=64 every=30s prompt=16-128 output=lognormal:256:1 temperature=0.5 "
            "seed=1");
  o = WorkloadOptions::ForKind(WorkloadKind::kAgentic);
  EXPECT_EQ(o.Describe(),
            "agentic sessions=0.5/s turns=10-15 first=512-1024 append=64 think=1s "
            "output=16-128 seed=1");
  o = WorkloadOptions::ForKind(WorkloadKind::kSharedPrefix);
  o.seed = 9;
  o.duration_s = 60;
  EXPECT_EQ(o.Describe(),
            "shared-prefix 4/s system=4x256 question=16-128 output=16-128 duration=60s seed=9");
  for (char c : o.Describe()) EXPECT_NE(c, '\n');
}

TEST(WorkloadOptionsTest, BoundedWhenTheArrivalsEndByThemselves) {
  WorkloadOptions o;
  EXPECT_FALSE(o.Bounded());
  o.duration_s = 5;
  EXPECT_TRUE(o.Bounded());
  o = WorkloadOptions::ForKind(WorkloadKind::kRollout);
  EXPECT_TRUE(o.Bounded());
  o.rollout_interval_s = 10;
  EXPECT_FALSE(o.Bounded());
  o.max_requests = 100;
  EXPECT_TRUE(o.Bounded());
  EXPECT_FALSE(WorkloadOptions::ForKind(WorkloadKind::kAgentic).Bounded());
  EXPECT_TRUE(WorkloadOptions::ForKind(WorkloadKind::kFile).Bounded());
}

TEST(WorkloadGeneratorTest, SameSeedSameScheduleOtherSeedDiffers) {
  WorkloadOptions o;
  o.max_requests = 50;
  o.seed = 7;
  auto a = WorkloadGenerator(o).Schedule();
  auto b = WorkloadGenerator(o).Schedule();
  ASSERT_EQ(a.size(), 50u);
  ASSERT_EQ(b.size(), 50u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].time_us, b[i].time_us);
    EXPECT_EQ(a[i].spec.prompt, b[i].spec.prompt);
    EXPECT_EQ(a[i].spec.max_new_tokens, b[i].spec.max_new_tokens);
    EXPECT_EQ(a[i].spec.seed, b[i].spec.seed);
  }
  o.seed = 8;
  auto c = WorkloadGenerator(o).Schedule();
  int same = 0;
  for (size_t i = 0; i < a.size(); ++i) same += a[i].time_us == c[i].time_us;
  EXPECT_LT(same, 5);
}

TEST(WorkloadGeneratorTest, ArrivalRateMatchesOverManyArrivals) {
  WorkloadOptions o;
  o.rate = 20;
  o.max_requests = 4000;
  o.seed = 3;
  auto all = WorkloadGenerator(o).Schedule();
  ASSERT_EQ(all.size(), 4000u);
  for (size_t i = 1; i < all.size(); ++i) EXPECT_GE(all[i].time_us, all[i - 1].time_us);
  // n exponential gaps: the mean rate's relative std is 1/sqrt(n) ~ 1.6%; 10%
  // is > 6 sigma, so this only fails when the rate is actually wrong.
  const double measured = all.size() / (all.back().time_us / 1e6);
  EXPECT_NEAR(measured, 20.0, 2.0);
}

TEST(WorkloadGeneratorTest, DurationBoundsArrivals) {
  WorkloadOptions o;
  o.rate = 50;
  o.duration_s = 2;
  auto all = WorkloadGenerator(o).Schedule();
  EXPECT_GT(all.size(), 50u);  // expected 100, sd 10
  EXPECT_LT(all.size(), 160u);
  for (const Arrival& a : all) EXPECT_LE(a.time_us, 2'000'000);
}

TEST(WorkloadGeneratorTest, LengthsStayWithinBoundsAndPromptsAreText) {
  WorkloadOptions o;
  o.prompt_len = LengthDist::Parse("lognormal:40:1").value();
  o.output_len = LengthDist::Parse("3-9").value();
  o.max_requests = 500;
  o.max_prompt_tokens = 100;
  double sum = 0;
  for (const Arrival& a : WorkloadGenerator(o).Schedule()) {
    const int n = static_cast<int>(a.spec.prompt.size());
    EXPECT_GE(n, 1);
    EXPECT_LE(n, 100);
    sum += n;
    EXPECT_GE(a.spec.max_new_tokens, 3);
    EXPECT_LE(a.spec.max_new_tokens, 9);
    EXPECT_EQ(a.spec.prompt[0], kBosToken);
    for (size_t i = 1; i < a.spec.prompt.size(); ++i) {
      EXPECT_GE(a.spec.prompt[i], 32);  // printable ASCII from the corpus
      EXPECT_LT(a.spec.prompt[i], 127);
    }
  }
  // Lognormal mean 40 (clamped at 100 trims the tail a little).
  EXPECT_NEAR(sum / 500, 38, 8);
}

TEST(WorkloadGeneratorTest, BurstArrivesAtZero) {
  WorkloadOptions o;
  o.burst = true;
  o.max_requests = 5;
  o.prompt_len = LengthDist::Parse("12").value();
  auto all = WorkloadGenerator(o).Schedule();
  ASSERT_EQ(all.size(), 5u);
  for (const Arrival& a : all) {
    EXPECT_EQ(a.time_us, 0);
    EXPECT_EQ(a.spec.prompt.size(), 12u);
  }
  EXPECT_THAT(o.Describe(), HasSubstr("burst"));
}

}  // namespace
}  // namespace sy::engine
