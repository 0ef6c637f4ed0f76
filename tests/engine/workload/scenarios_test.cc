// Tests of the scenarios' shapes (engine/workload/scenarios.cc, agentic.cc):
// rates per phase, simultaneous releases and long tails, session structure
// with exact token prefixes, shared system prompts, and determinism by seed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "base/status_matchers.h"
#include "engine/model/tokenizer.h"
#include "engine/workload/workload.h"

namespace sy::engine {
namespace {

std::vector<Arrival> Generate(const WorkloadOptions& o) {
  EXPECT_THAT(o.Validate(), IsOk());
  return WorkloadGenerator(o).Schedule();
}

bool IsPrefix(const std::vector<int32_t>& p, const std::vector<int32_t>& of) {
  return p.size() <= of.size() && std::equal(p.begin(), p.end(), of.begin());
}

// BOS exactly once, first; the rest corpus text (printable ASCII or newline).
void ExpectOneBosThenText(const std::vector<int32_t>& prompt) {
  ASSERT_FALSE(prompt.empty());
  EXPECT_EQ(prompt[0], kBosToken);
  for (size_t i = 1; i < prompt.size(); ++i) {
    ASSERT_TRUE(prompt[i] == '\n' || (prompt[i] >= 32 && prompt[i] < 127)) << i;
  }
}

TEST(BurstyTest, RatesPerPhaseMatchOverManyArrivals) {
  WorkloadOptions o = WorkloadOptions::ForKind(WorkloadKind::kBursty);
  o.quiet_rate = 5;
  o.quiet_s = 10;
  o.burst_rate = 50;
  o.burst_s = 2;
  o.prompt_len = {LengthDist::Kind::kFixed, 4, 4};
  o.max_requests = 5000;
  const auto all = Generate(o);
  ASSERT_EQ(all.size(), 5000u);
  const double cycle = o.quiet_s + o.burst_s;
  const int cycles = static_cast<int>(all.back().time_us / 1e6 / cycle);  // whole cycles only
  ASSERT_GE(cycles, 25);
  int quiet = 0, burst = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    if (i > 0) {
      EXPECT_GE(all[i].time_us, all[i - 1].time_us);
    }
    const double t = all[i].time_us / 1e6;
    if (t >= cycles * cycle) break;
    (std::fmod(t, cycle) < o.quiet_s ? quiet : burst)++;
  }
  // ~1650 quiet and ~3300 burst arrivals: 10% is > 4 sigma for each.
  EXPECT_NEAR(quiet / (cycles * o.quiet_s), 5.0, 0.5);
  EXPECT_NEAR(burst / (cycles * o.burst_s), 50.0, 5.0);
}

TEST(BurstyTest, ListedPhasesPlayOnceInOrderAtTheirRates) {
  WorkloadOptions o = WorkloadOptions::ForKind(WorkloadKind::kBursty);
  Result<std::vector<WorkloadOptions::RatePhase>> phases =
      WorkloadOptions::ParsePhases("40:5,4:200,20:0,4:400");
  ASSERT_THAT(phases, IsOk());
  o.phases = *phases;
  o.prompt_len = {LengthDist::Kind::kFixed, 4, 4};
  EXPECT_TRUE(o.Bounded());
  EXPECT_THAT(o.Describe(), ::testing::HasSubstr("bursty phases=40:5,4:200,20:0,4:400"));
  const auto all = Generate(o);
  int counts[4] = {0, 0, 0, 0};
  for (const Arrival& a : all) {
    const double t = a.time_us / 1e6;
    ASSERT_LT(t, 68.0);  // nothing after the last phase: the workload ended
    counts[t < 40 ? 0 : t < 44 ? 1 : t < 64 ? 2 : 3]++;
  }
  // Expected 200, 800, 0, 1600: 15% is > 3 sigma for each.
  EXPECT_NEAR(counts[0], 200, 30);
  EXPECT_NEAR(counts[1], 800, 120);
  EXPECT_EQ(counts[2], 0);
  EXPECT_NEAR(counts[3], 1600, 240);
}

TEST(BurstyTest, PhaseListErrorsNameTheItem) {
  EXPECT_THAT(WorkloadOptions::ParsePhases("30:5,7"),
              StatusIs(StatusCode::kInvalidArgument, ::testing::HasSubstr("phase '7'")));
  EXPECT_THAT(WorkloadOptions::ParsePhases("0:5"),
              StatusIs(StatusCode::kInvalidArgument, ::testing::HasSubstr("SECONDS > 0")));
  EXPECT_THAT(WorkloadOptions::ParsePhases("3:-1"), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(WorkloadOptions::ParsePhases("3:5x"), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(WorkloadOptions::ParsePhases(""), StatusIs(StatusCode::kInvalidArgument));
  WorkloadOptions o = WorkloadOptions::ForKind(WorkloadKind::kBursty);
  o.phases = {{.seconds = 1, .rate = 1}, {.seconds = -2, .rate = 1}};
  EXPECT_THAT(o.Validate(), StatusIs(StatusCode::kInvalidArgument,
                                     ::testing::HasSubstr("phases[1].seconds must be > 0")));
}

TEST(BurstyTest, SilentQuietPhasesLeaveOnlyBursts) {
  WorkloadOptions o = WorkloadOptions::ForKind(WorkloadKind::kBursty);
  o.quiet_rate = 0;
  o.quiet_s = 3;
  o.burst_rate = 40;
  o.burst_s = 1;
  o.duration_s = 40;
  const auto all = Generate(o);
  EXPECT_GT(all.size(), 300u);  // 10 bursts of ~40
  for (const Arrival& a : all) {
    const double t = a.time_us / 1e6;
    EXPECT_GE(std::fmod(t, 4.0), 3.0 - 1e-6) << t;  // inside [3, 4) of each cycle
    EXPECT_LE(a.time_us, 40'000'000);
  }
}

TEST(RolloutTest, ReleasesTogetherWithLongTailedOutputs) {
  WorkloadOptions o = WorkloadOptions::ForKind(WorkloadKind::kRollout);
  o.rollout_size = 400;
  ASSERT_TRUE(o.Bounded());
  const auto all = Generate(o);
  ASSERT_EQ(all.size(), 400u);
  std::vector<int> out;
  for (const Arrival& a : all) {
    EXPECT_EQ(a.time_us, 0);
    ExpectOneBosThenText(a.spec.prompt);
    out.push_back(a.spec.max_new_tokens);
  }
  std::sort(out.begin(), out.end());
  const double median = out[out.size() / 2];
  double mean = 0;
  for (int n : out) mean += n;
  mean /= out.size();
  // Lognormal sigma 1: mean/median = e^0.5 ~ 1.65, and the slowest of 400 is
  // many medians long, so the batch decays to a few stragglers. A uniform or
  // fixed length (mean ~ median, max < 2 medians) fails both.
  EXPECT_GT(mean, 1.3 * median);
  EXPECT_GT(out.back(), 5 * median);
  EXPECT_NEAR(mean, 256, 40);
}

// Independent requests share no prefix a radix cache could serve: the
// corpus is a few dozen sentences, so without each prompt's own opening two
// prompts cut from the same sentence would agree for whole sentences.
TEST(IndependentPromptsTest, PoissonBurstyAndRolloutPromptsDifferWithinTheirOpening) {
  for (WorkloadKind kind : {WorkloadKind::kPoisson, WorkloadKind::kBursty, WorkloadKind::kRollout,
                            WorkloadKind::kAgentic}) {
    WorkloadOptions o = WorkloadOptions::ForKind(kind);
    o.prompt_len = o.first_turn_len = LengthDist{LengthDist::Kind::kFixed, 96, 96};
    o.max_requests = 300;
    if (kind == WorkloadKind::kRollout) o.rollout_size = 300;
    const auto all = Generate(o);
    ASSERT_EQ(all.size(), 300u) << WorkloadKindName(kind);
    std::set<std::vector<int32_t>> openings;
    size_t longest = 0;
    for (size_t i = 0; i < all.size(); ++i) {
      const auto& a = all[i].spec.prompt;
      ExpectOneBosThenText(a);
      if (kind == WorkloadKind::kAgentic && a.size() > 96) continue;  // a later turn
      for (size_t j = 0; j < i; ++j) {
        const auto& b = all[j].spec.prompt;
        if (kind == WorkloadKind::kAgentic && b.size() > 96) continue;
        const size_t n = std::min(a.size(), b.size());
        size_t k = 0;
        while (k < n && a[k] == b[k]) ++k;
        longest = std::max(longest, k);
      }
    }
    // BOS + "[" + the shared leading digits of two indices below 300.
    EXPECT_LE(longest, 4u) << WorkloadKindName(kind);
  }
}

TEST(RolloutTest, RepeatsEveryInterval) {
  WorkloadOptions o = WorkloadOptions::ForKind(WorkloadKind::kRollout);
  o.rollout_size = 8;
  o.rollout_interval_s = 5;
  o.max_requests = 24;
  const auto all = Generate(o);
  ASSERT_EQ(all.size(), 24u);
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all[i].time_us, static_cast<int64_t>(i / 8) * 5'000'000) << i;
  }
}

// Rebuilds sessions from the arrivals alone: a prompt extending an open
// session's last prompt by exactly append_tokens is its next turn.
struct Session {
  std::vector<int32_t> last;
  int64_t start_us = 0;
  int64_t last_us = 0;
  int turns = 0;
};

std::vector<Session> Sessions(const std::vector<Arrival>& all, const WorkloadOptions& o) {
  std::vector<Session> sessions;
  for (const Arrival& a : all) {
    Session* s = nullptr;
    for (Session& open : sessions) {
      if (open.last.size() + o.append_tokens == a.spec.prompt.size() &&
          IsPrefix(open.last, a.spec.prompt)) {
        s = &open;
      }
    }
    if (s == nullptr) {
      sessions.push_back({{}, a.time_us, a.time_us, 0});
      s = &sessions.back();
    } else {
      EXPECT_EQ(a.time_us - s->last_us, static_cast<int64_t>(o.think_s * 1e6));  // exact gap
    }
    s->last = a.spec.prompt;
    s->last_us = a.time_us;
    ++s->turns;
  }
  return sessions;
}

TEST(AgenticTest, TurnsExtendThePreviousPromptExactlyAfterTheThinkTime) {
  WorkloadOptions o = WorkloadOptions::ForKind(WorkloadKind::kAgentic);
  o.rate = 2;
  o.turns_min = 3;
  o.turns_max = 5;
  o.first_turn_len = {LengthDist::Kind::kUniform, 50, 80};
  o.append_tokens = 10;
  o.think_s = 0.5;
  o.duration_s = 30;
  const auto all = Generate(o);
  for (size_t i = 1; i < all.size(); ++i) EXPECT_GE(all[i].time_us, all[i - 1].time_us);
  for (const Arrival& a : all) {
    ExpectOneBosThenText(a.spec.prompt);
    EXPECT_LE(a.time_us, 30'000'000);
  }
  const std::vector<Session> sessions = Sessions(all, o);
  EXPECT_GT(sessions.size(), 40u);  // ~60 session starts in 30 s
  EXPECT_LT(sessions.size(), 85u);
  std::set<int> turn_counts;
  for (const Session& s : sessions) {
    const size_t first = s.last.size() - (s.turns - 1) * o.append_tokens;
    EXPECT_GE(first, 50u);
    EXPECT_LE(first, 80u);
    EXPECT_LE(s.turns, 5);
    if (s.start_us + 4 * 500'000 <= 30'000'000) {  // not cut by the duration
      EXPECT_GE(s.turns, 3);
      turn_counts.insert(s.turns);
    }
  }
  EXPECT_EQ(turn_counts, (std::set<int>{3, 4, 5}));
  // Sessions overlap: turns of different sessions interleave in time.
  EXPECT_GT(all.size(), sessions.size() * 3);
}

TEST(AgenticTest, SessionEndsBeforeOutgrowingMaxPromptTokens) {
  WorkloadOptions o = WorkloadOptions::ForKind(WorkloadKind::kAgentic);
  o.first_turn_len = {LengthDist::Kind::kFixed, 60, 60};
  o.append_tokens = 15;
  o.turns_min = o.turns_max = 10;
  o.max_prompt_tokens = 100;
  o.max_requests = 60;
  const auto all = Generate(o);
  ASSERT_EQ(all.size(), 60u);
  const std::vector<Session> sessions = Sessions(all, o);
  EXPECT_GE(sessions.size(), 20u);
  for (const Session& s : sessions) EXPECT_LE(s.turns, 3);  // 60, 75, 90; 105 would not fit
  std::set<size_t> lengths;
  for (const Arrival& a : all) lengths.insert(a.spec.prompt.size());
  EXPECT_EQ(lengths, (std::set<size_t>{60, 75, 90}));

  // A first turn longer than the model is cut, and the session is one turn.
  o.first_turn_len = {LengthDist::Kind::kFixed, 500, 500};
  o.max_requests = 5;
  for (const Arrival& a : Generate(o)) EXPECT_EQ(a.spec.prompt.size(), 100u);
}

TEST(SharedPrefixTest, RequestsShareOneOfTheSystemPromptsExactly) {
  WorkloadOptions o = WorkloadOptions::ForKind(WorkloadKind::kSharedPrefix);
  o.rate = 10;
  o.system_prompts = 5;
  o.system_prompt_len = 40;
  o.prompt_len = {LengthDist::Kind::kUniform, 10, 20};
  o.max_requests = 400;
  const auto all = Generate(o);
  ASSERT_EQ(all.size(), 400u);
  std::map<std::vector<int32_t>, int> prefixes;
  std::set<std::vector<int32_t>> prompts;
  for (const Arrival& a : all) {
    ExpectOneBosThenText(a.spec.prompt);
    ASSERT_GE(a.spec.prompt.size(), 50u);
    ASSERT_LE(a.spec.prompt.size(), 60u);
    prefixes[{a.spec.prompt.begin(), a.spec.prompt.begin() + 40}]++;
    prompts.insert(a.spec.prompt);
  }
  EXPECT_EQ(prefixes.size(), 5u);
  for (const auto& [prefix, n] : prefixes) EXPECT_GT(n, 40) << "expected ~80 each";
  EXPECT_GT(prompts.size(), 350u);  // the questions differ
  const double rate = all.size() / (all.back().time_us / 1e6);
  EXPECT_NEAR(rate, 10, 1.5);
}

TEST(SharedPrefixTest, ManyShortSystemPromptsStayDistinct) {
  WorkloadOptions o = WorkloadOptions::ForKind(WorkloadKind::kSharedPrefix);
  o.system_prompts = 200;
  o.system_prompt_len = 8;
  o.max_requests = 4000;
  std::set<std::vector<int32_t>> prefixes;
  for (const Arrival& a : Generate(o))
    prefixes.insert({a.spec.prompt.begin(), a.spec.prompt.begin() + 8});
  EXPECT_EQ(prefixes.size(), 200u);  // each drawn ~20 times
}

TEST(ScenarioTest, EveryScenarioIsAPureFunctionOfItsOptions) {
  for (WorkloadKind k : {WorkloadKind::kPoisson, WorkloadKind::kBursty, WorkloadKind::kRollout,
                         WorkloadKind::kAgentic, WorkloadKind::kSharedPrefix}) {
    WorkloadOptions o = WorkloadOptions::ForKind(k);
    o.first_turn_len = {LengthDist::Kind::kUniform, 20, 40};
    o.rate = 5;
    o.max_requests = 60;
    o.seed = 11;
    const auto a = Generate(o);
    const auto b = Generate(o);
    ASSERT_EQ(a.size(), 60u) << WorkloadKindName(k);
    ASSERT_EQ(b.size(), 60u);
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].time_us, b[i].time_us);
      EXPECT_EQ(a[i].spec.prompt, b[i].spec.prompt);
      EXPECT_EQ(a[i].spec.max_new_tokens, b[i].spec.max_new_tokens);
      EXPECT_EQ(a[i].spec.seed, b[i].spec.seed);
    }
    o.seed = 12;
    const auto c = Generate(o);
    int same = 0;
    for (size_t i = 0; i < a.size(); ++i) same += a[i].spec.prompt == c[i].spec.prompt;
    EXPECT_LT(same, 6) << WorkloadKindName(k);
  }
}

TEST(ScenarioTest, ByteLevelPromptsHaveExactLengthsWithOrWithoutBos) {
  WorkloadOptions o;
  o.prompt_len = {LengthDist::Kind::kUniform, 1, 6};
  o.max_requests = 200;
  std::set<size_t> lengths;
  for (const Arrival& a : Generate(o)) {
    ExpectOneBosThenText(a.spec.prompt);
    lengths.insert(a.spec.prompt.size());
  }
  EXPECT_EQ(lengths, (std::set<size_t>{1, 2, 3, 4, 5, 6}));  // 1: BOS alone
}

}  // namespace
}  // namespace sy::engine
