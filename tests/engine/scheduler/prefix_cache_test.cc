// The Scheduler with its prefix cache: what a request reuses, when prefixes
// and checkpoints are published, eviction before retraction, cancellation,
// and a randomised stress test of the pool accounting.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <map>
#include <random>
#include <set>

#include "engine/scheduler/scheduler.h"
#include "tests/engine/scheduler/test_util.h"

namespace sy::engine {
namespace {

using ::testing::HasSubstr;

// A prompt: `shared` tokens of system prompt `sys`, then `own` tokens of its own.
RequestSpec Prompt(int sys, int shared, int own, int max_new, int salt = 0) {
  RequestSpec s;
  for (int i = 0; i < shared; ++i) s.prompt.push_back(1 + (sys * 31 + i * 7) % 200);
  for (int i = 0; i < own; ++i) s.prompt.push_back(1 + (salt * 13 + i * 11) % 200);
  s.max_new_tokens = max_new;
  s.ignore_eos = true;
  return s;
}

// Runs one step with outputs 'x' and returns what finished.
std::vector<Request> StepOnce(Scheduler& s, int64_t* now, BatchInput* planned = nullptr) {
  BatchInput b = s.Plan();
  auto r = s.Commit(Outputs(b), *now += 1000);
  EXPECT_THAT(r.status(), IsOk());
  if (planned) *planned = std::move(b);
  return r.ok() ? std::move(*r) : std::vector<Request>{};
}

TEST(PrefixCacheSchedulerTest, SecondRequestReusesThePublishedPrefix) {
  Pools pools(1, 64, 4);
  Scheduler s(Opts(512, 8, 0, /*cache=*/true), pools.ptrs);
  int64_t now = 0;
  ASSERT_THAT(s.Submit(Prompt(1, 30, 0, 2), now), IsOk());
  Drain(s, &now);
  // 30 prompt + 1 fed generated token = 31 positions: 7 whole pages published.
  EXPECT_EQ(s.cache_stats(0).tree.cached_tokens, 28);

  ASSERT_THAT(s.Submit(Prompt(1, 30, 6, 2), now), IsOk());
  BatchInput b = s.Plan();
  ASSERT_EQ(b.seqs.size(), 1u);
  EXPECT_EQ(b.seqs[0].start_pos, 28);
  EXPECT_EQ(b.seqs[0].tokens.size(), 8u);
  EXPECT_EQ(b.seqs[0].state_copy_from, -1);  // no linear layers
  EXPECT_EQ(s.last_plan().cache_hit_tokens, 28);
  EXPECT_EQ(s.last_plan().cache_query_tokens, 36);
  ASSERT_THAT(s.Commit(Outputs(b), now += 1000).status(), IsOk());
  Drain(s, &now);
  EXPECT_EQ(s.cache_hit_tokens_total(), 28);
  s.FlushCache();
  EXPECT_EQ(pools.free_total(), 64);
}

TEST(PrefixCacheSchedulerTest, AHitLeavesAtLeastOneTokenToCompute) {
  Pools pools(1, 64, 4);
  Scheduler s(Opts(512, 8, 0, true), pools.ptrs);
  int64_t now = 0;
  ASSERT_THAT(s.Submit(Prompt(2, 16, 0, 4), now), IsOk());
  Drain(s, &now);
  ASSERT_THAT(s.Submit(Prompt(2, 16, 0, 4), now), IsOk());  // the same prompt again
  BatchInput b = s.Plan();
  ASSERT_EQ(b.seqs.size(), 1u);
  EXPECT_EQ(b.seqs[0].start_pos, 12);  // 16 is cached, but logits need a token fed
  EXPECT_TRUE(b.seqs[0].sample);
}

TEST(PrefixCacheSchedulerTest, CacheOffReusesNothing) {
  Pools pools(1, 64, 4);
  Scheduler s(Opts(512), pools.ptrs);
  int64_t now = 0;
  ASSERT_THAT(s.Submit(Prompt(1, 30, 0, 2), now), IsOk());
  Drain(s, &now);
  EXPECT_FALSE(s.prefix_cache());
  EXPECT_EQ(pools.free_total(), 64);
  ASSERT_THAT(s.Submit(Prompt(1, 30, 0, 2), now), IsOk());
  EXPECT_EQ(s.Plan().seqs[0].start_pos, 0);
}

TEST(PrefixCacheSchedulerTest, HybridPrefillPublishesACheckpointAndAHitCopiesIt) {
  HybridPools pools({64}, {6}, 4);
  Scheduler s(Opts(512, 8, 0, true), pools.kv.ptrs, pools.state_ptrs);
  int64_t now = 0;
  ASSERT_THAT(s.Submit(Prompt(3, 22, 0, 1), now), IsOk());
  BatchInput b;
  StepOnce(s, &now, &b);
  ASSERT_EQ(b.seqs.size(), 1u);
  // The state after the last page boundary the chunk crosses goes to its own slot.
  EXPECT_EQ(b.seqs[0].checkpoint_len, 20);
  EXPECT_GE(b.seqs[0].checkpoint_slot, 0);
  EXPECT_NE(b.seqs[0].checkpoint_slot, b.seqs[0].state_slot);
  const int ckpt = b.seqs[0].checkpoint_slot;
  const RadixCacheStats t = s.cache_stats(0).tree;
  EXPECT_EQ(t.cached_tokens, 20);
  EXPECT_EQ(t.checkpoint_slots, 1);

  ASSERT_THAT(s.Submit(Prompt(3, 22, 5, 1), now), IsOk());
  BatchInput hit = s.Plan();
  ASSERT_EQ(hit.seqs.size(), 1u);
  EXPECT_EQ(hit.seqs[0].start_pos, 20);
  EXPECT_EQ(hit.seqs[0].state_copy_from, ckpt);
  EXPECT_NE(hit.seqs[0].state_slot,
            ckpt);  // copy-on-write: the tree's slot is never the working one
  ASSERT_THAT(s.Commit(Outputs(hit), now += 1000).status(), IsOk());
  Drain(s, &now);
  s.FlushCache();
  EXPECT_EQ(pools.Free(), (std::vector<std::pair<int, int>>{{64, 6}}));
}

TEST(PrefixCacheSchedulerTest, HybridDecodeCheckpointIsPublishedAtFinish) {
  HybridPools pools({64}, {6}, 4);
  Scheduler s(Opts(512, 8, 0, true), pools.kv.ptrs, pools.state_ptrs);
  int64_t now = 0;
  // 6 prompt tokens, 8 generated: decode feeds positions 6..12.
  ASSERT_THAT(s.Submit(Prompt(4, 6, 0, 8), now), IsOk());
  std::vector<int> decode_ckpts;
  while (!s.idle()) {
    BatchInput b;
    StepOnce(s, &now, &b);
    for (const SeqInput& q : b.seqs) {
      if (q.tokens.size() == 1 && q.checkpoint_len > 0) decode_ckpts.push_back(q.checkpoint_len);
    }
  }
  EXPECT_EQ(decode_ckpts, (std::vector<int>{8, 12}));
  // The prefill's boundary 4 and the last decode boundary 12.
  EXPECT_EQ(s.cache_stats(0).tree.cached_tokens, 12);
  EXPECT_EQ(s.cache_stats(0).tree.checkpoint_slots, 2);

  // A follow-up turn: the whole first exchange plus more hits at 12.
  RequestSpec next = Prompt(4, 6, 0, 2);
  for (int i = 0; i < 8; ++i) next.prompt.push_back('x');
  for (int i = 0; i < 5; ++i) next.prompt.push_back(7);
  ASSERT_THAT(s.Submit(next, now), IsOk());
  BatchInput b = s.Plan();
  EXPECT_EQ(b.seqs[0].start_pos, 12);
  EXPECT_GE(b.seqs[0].state_copy_from, 0);
}

// Submits `spec` and runs one step (its prefill, which publishes its
// prefix); returns the device it went to and, in *id, its request id.
int PrefillOne(Scheduler& s, int64_t* now, RequestSpec spec, int64_t* id = nullptr) {
  EXPECT_THAT(s.Submit(std::move(spec), *now), IsOk());
  BatchInput first;
  StepOnce(s, now, &first);
  EXPECT_EQ(first.seqs.size(), 1u);
  if (first.seqs.empty()) return -1;
  if (id != nullptr) *id = first.seqs[0].request_id;
  return first.seqs[0].device;
}

TEST(PrefixCacheSchedulerTest, PrefersTheDeviceHoldingTheLongestPrefix) {
  Pools pools(3, 64, 4);
  Scheduler s(Opts(512, 8, 0, true), pools.ptrs);
  int64_t now = 0;
  const int home = PrefillOne(s, &now, Prompt(5, 24, 0, 1));
  // Device `home` now has fewer free pages than the others, yet holds the prefix.
  ASSERT_THAT(s.Submit(Prompt(5, 24, 3, 1), now), IsOk());
  BatchInput b = s.Plan();
  ASSERT_EQ(b.seqs.size(), 1u);
  EXPECT_EQ(b.seqs[0].device, home);
  EXPECT_EQ(b.seqs[0].start_pos, 24);
}

TEST(PrefixCacheSchedulerTest, AHitBelowTheCacheThresholdDoesNotDecideTheDevice) {
  Pools pools(3, 64, 4);
  Scheduler s(Opts(512, 8, 0, true), pools.ptrs);
  int64_t now = 0;
  int64_t first_id = -1;
  const int home = PrefillOne(s, &now, Prompt(5, 8, 0, 40), &first_id);  // still running
  ASSERT_EQ(s.cache_stats(home).tree.cached_tokens, 8);
  // 8 shared of 40 tokens: a 20% hit, under the 30% threshold. The request
  // goes where the most pages are free, and reads no prefix there.
  ASSERT_THAT(s.Submit(Prompt(5, 8, 32, 1), now), IsOk());
  BatchInput b = s.Plan();
  ASSERT_EQ(b.seqs.size(), 2u);  // the first one's decode and the new prompt
  const SeqInput& fresh = b.seqs[0].request_id == first_id ? b.seqs[1] : b.seqs[0];
  EXPECT_NE(fresh.device, home);
  EXPECT_EQ(fresh.start_pos, 0);
}

// A rollout: the same long prompt sampled many times. Each sample's hit
// covers nearly all of it, so every one goes to the device holding it (a
// recomputed 2,000-token prompt costs far more than the extra decode rows)
// even though the other device is idle.
TEST(PrefixCacheSchedulerTest, ALongHitKeepsItsDeviceHoweverLoaded) {
  Pools pools(2, 256, 4);
  Scheduler s(Opts(512, 64, 0, true), pools.ptrs);
  int64_t now = 0;
  const int home = PrefillOne(s, &now, Prompt(7, 40, 0, 1));
  Drain(s, &now);
  for (int i = 0; i < 12; ++i) ASSERT_THAT(s.Submit(Prompt(7, 40, 0, 32), now), IsOk());
  BatchInput b = s.Plan();
  ASSERT_EQ(b.seqs.size(), 12u);
  for (const SeqInput& q : b.seqs) {
    EXPECT_EQ(q.device, home);
    EXPECT_EQ(q.start_pos, 36);  // 9 of the 10 pages reused
  }
}

TEST(PrefixCacheSchedulerTest, PlacementThresholdsAreValidated) {
  SchedulerOptions o = Opts(512, 8, 0, true);
  o.cache_threshold = 1.5;
  EXPECT_THAT(o.Validate(), StatusIs(StatusCode::kInvalidArgument, HasSubstr("cache_threshold")));
  o.cache_threshold = -0.1;
  EXPECT_THAT(o.Validate(), StatusIs(StatusCode::kInvalidArgument, HasSubstr("cache_threshold")));
  o.cache_threshold = 1.0;  // only a whole-request hit counts: valid
  EXPECT_THAT(o.Validate(), IsOk());
}

TEST(PrefixCacheSchedulerTest, CachedPagesAreEvictedBeforeAnyRequestIsRetracted) {
  Pools pools(1, 12, 4);
  Scheduler s(Opts(512, 8, 0, true), pools.ptrs);
  int64_t now = 0;
  for (int i = 0; i < 3; ++i) {
    ASSERT_THAT(s.Submit(Prompt(10 + i, 12, 0, 1), now), IsOk());
    Drain(s, &now);
  }
  EXPECT_EQ(s.cache_stats(0).tree.cached_pages, 9);
  // Two requests that need 11 pages between them: only eviction makes room.
  ASSERT_THAT(s.Submit(Prompt(20, 14, 0, 10), now), IsOk());
  ASSERT_THAT(s.Submit(Prompt(21, 14, 0, 10), now), IsOk());
  std::vector<Request> done = Drain(s, &now);
  EXPECT_EQ(done.size(), 2u);
  EXPECT_EQ(s.preempted_total(), 0);
  EXPECT_GT(s.cache_stats(0).tree.evicted_pages, 0);
}

TEST(PrefixCacheSchedulerTest, CancelWaitingAndRunningRequests) {
  HybridPools pools({32}, {4}, 4);
  Scheduler s(Opts(512, 1, 0, true), pools.kv.ptrs, pools.state_ptrs);
  int64_t now = 0;
  auto a = s.Submit(Prompt(6, 10, 0, 50), now);
  auto b = s.Submit(Prompt(7, 10, 0, 50), now);
  ASSERT_THAT(a, IsOk());
  ASSERT_THAT(b, IsOk());
  StepOnce(s, &now);  // a runs (max_running 1), b waits
  ASSERT_EQ(s.running(), 1);
  Result<Request> cb = s.Cancel(*b, now);
  ASSERT_THAT(cb.status(), IsOk());
  EXPECT_EQ(cb->finish, FinishReason::kCancelled);
  EXPECT_EQ(FinishReasonName(cb->finish), "cancelled");
  Result<Request> ca = s.Cancel(*a, now + 5);
  ASSERT_THAT(ca.status(), IsOk());
  EXPECT_EQ(ca->finish_us, now + 5);
  EXPECT_TRUE(s.idle());
  EXPECT_THAT(s.Cancel(*a, now).status(),
              StatusIs(StatusCode::kNotFound, HasSubstr("not waiting")));
  EXPECT_EQ(s.cancelled_total(), 2);
  EXPECT_EQ(s.cache_stats(0).tree.cached_tokens, 8);  // a's computed prefix was kept
  s.FlushCache();
  EXPECT_EQ(pools.Free(), (std::vector<std::pair<int, int>>{{32, 4}}));
}

// Many seeds: arrivals behind a few shared prefixes, cancellations, pools
// small enough for evictions and retractions. Every request ends finished or
// cancelled, page tables always cover what is fed, and after the drain and a
// flush every page and slot is back.
// Adds what the run exercised to *exercised: {retractions, evicted pages, hit tokens}.
void Stress(uint64_t seed, bool hybrid, std::array<int64_t, 3>* exercised) {
  std::mt19937_64 rng(seed);
  const int devices = 1 + static_cast<int>(rng() % 3);
  HybridPools pools(std::vector<int>(devices, 24), std::vector<int>(devices, hybrid ? 5 : 0), 4);
  Scheduler s(Opts(48, 6, 1, true), pools.kv.ptrs,
              hybrid ? pools.state_ptrs : std::vector<StatePool*>{});
  const auto initial = pools.Free();
  int64_t now = 0;
  std::set<int64_t> live;
  int submitted = 0, ended = 0, cancelled = 0;
  for (int step = 0; step < 400 && (submitted < 40 || !s.idle()); ++step) {
    if (submitted < 40 && rng() % 3 == 0) {
      RequestSpec spec = Prompt(static_cast<int>(rng() % 3), 4 + static_cast<int>(rng() % 24),
                                static_cast<int>(rng() % 10), 1 + static_cast<int>(rng() % 16),
                                static_cast<int>(rng() % 4));
      auto id = s.Submit(spec, now);
      ASSERT_THAT(id, IsOk());
      live.insert(*id);
      ++submitted;
    }
    if (!live.empty() && rng() % 10 == 0) {
      auto it = live.begin();
      std::advance(it, rng() % live.size());
      ASSERT_THAT(s.Cancel(*it, now).status(), IsOk());
      live.erase(it);
      ++ended;
      ++cancelled;
    }
    BatchInput b = s.Plan();
    for (const SeqInput& q : b.seqs) {
      ASSERT_GE(static_cast<int>(q.pages.size()) * 4,
                q.start_pos + static_cast<int>(q.tokens.size()));
      if (hybrid) {
        ASSERT_GE(q.state_slot, 0);
      }
      if (q.checkpoint_slot >= 0) {
        ASSERT_GT(q.checkpoint_len, q.start_pos);
        ASSERT_LE(q.checkpoint_len, q.start_pos + static_cast<int>(q.tokens.size()));
        ASSERT_EQ(q.checkpoint_len % 4, 0);
      }
    }
    auto done = s.Commit(Outputs(b), now += 1000);
    ASSERT_THAT(done.status(), IsOk());
    for (const Request& r : *done) {
      ASSERT_EQ(live.erase(r.id), 1u) << "request " << r.id << " finished twice";
      ++ended;
    }
  }
  EXPECT_TRUE(s.idle()) << "seed " << seed;
  EXPECT_EQ(ended, submitted) << "seed " << seed;
  EXPECT_EQ(s.cancelled_total(), cancelled);
  (*exercised)[0] += s.preempted_total();
  (*exercised)[2] += s.cache_hit_tokens_total();
  for (int d = 0; d < devices; ++d) (*exercised)[1] += s.cache_stats(d).tree.evicted_pages;
  s.FlushCache();
  EXPECT_EQ(pools.Free(), initial) << "seed " << seed;
}

TEST(PrefixCacheSchedulerTest, StressLosesNothingAndReturnsEveryPageAndSlot) {
  std::array<int64_t, 3> exercised{};
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    Stress(seed, /*hybrid=*/false, &exercised);
    Stress(seed, /*hybrid=*/true, &exercised);
    if (HasFatalFailure()) return;
  }
  // The seeds must have driven every path the test claims to cover.
  EXPECT_GT(exercised[0], 0) << "no retraction";
  EXPECT_GT(exercised[1], 0) << "no eviction";
  EXPECT_GT(exercised[2], 0) << "no hit";
}

}  // namespace
}  // namespace sy::engine
