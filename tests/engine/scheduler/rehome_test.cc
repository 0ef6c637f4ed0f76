// Re-homing before a TP -> EP switch (rehome.h): Scheduler::Rehome applied
// to real pools, prefix caches and running requests (the assignment alone:
// rehome_assignment_test.cc).
#include "engine/scheduler/rehome.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <random>
#include <set>

#include "engine/scheduler/scheduler.h"
#include "tests/engine/scheduler/test_util.h"

namespace sy::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int kPageSize = 4;

// A prompt: `shared` tokens of system prompt `sys`, then `own` tokens of its own.
RequestSpec Prompt(int sys, int shared, int own, int max_new, int salt = 0) {
  RequestSpec s;
  for (int i = 0; i < shared; ++i) s.prompt.push_back(1 + (sys * 31 + i * 7) % 200);
  for (int i = 0; i < own; ++i) s.prompt.push_back(1 + (salt * 13 + i * 11) % 200);
  s.max_new_tokens = max_new;
  s.ignore_eos = true;
  return s;
}

void Step(Scheduler& s, int64_t* now) {
  BatchInput b = s.Plan();
  ASSERT_THAT(s.Commit(Outputs(b), *now += 1000).status(), IsOk());
}

const Request* Find(const Scheduler& s, int64_t id) {
  for (const Request* r : s.running_requests()) {
    if (r->id == id) return r;
  }
  return nullptr;
}

// Every used page is a request's own (no two share one) or the tree's, and
// every used slot a request's working or checkpoint slot or the tree's.
void ExpectAccounting(const Scheduler& s, const std::vector<KvPool*>& kv,
                      const std::vector<StatePool*>& state) {
  for (int d = 0; d < s.devices(); ++d) {
    std::set<int32_t> own;
    int slots = 0;
    for (const Request* r : s.running_requests()) {
      if (r->device != d) continue;
      for (size_t i = r->cached_len / kPageSize; i < r->pages.size(); ++i) {
        EXPECT_TRUE(own.insert(r->pages[i]).second) << "page " << r->pages[i] << " twice";
      }
      slots += (r->state_slot >= 0) + (r->ckpt_slot >= 0);
    }
    const RadixCacheStats tree = s.cache_stats(d).tree;
    EXPECT_EQ(kv[d]->used_pages(), static_cast<int>(own.size()) + tree.cached_pages)
        << "device " << d;
    const std::vector<int32_t> used = kv[d]->UsedPages();
    for (int32_t p : own) EXPECT_TRUE(std::binary_search(used.begin(), used.end(), p));
    if (!state.empty()) {
      EXPECT_EQ(state[d]->used_slots(), slots + tree.checkpoint_slots) << "device " << d;
    }
  }
}

TEST(SchedulerRehomeTest, MovesTheRequestLongestFirstNeedsAndKeepsDecoding) {
  Pools pools(2, 64, kPageSize);
  Scheduler s(Opts(512), pools.ptrs);
  int64_t now = 0;
  // A filler pins device 0 while three long requests go to device 1; once it
  // is gone, three short ones go to device 0.
  auto filler = s.Submit(Spec(160, 30), now);
  ASSERT_THAT(filler, IsOk());
  for (int i = 0; i < 3; ++i) ASSERT_THAT(s.Submit(Spec(40, 30), now), IsOk());  // ids 2-4
  Step(s, &now);
  ASSERT_THAT(s.Cancel(*filler, now).status(), IsOk());
  for (int i = 0; i < 3; ++i) ASSERT_THAT(s.Submit(Spec(4, 30), now), IsOk());  // ids 5-7
  for (int i = 0; i < 3; ++i) Step(s, &now);
  ASSERT_EQ(s.running_on(1), 3);
  ASSERT_EQ(s.running_on(0), 3);

  const std::vector<RehomeItem> items = s.RehomeItems();
  ASSERT_EQ(items.size(), 6u);
  EXPECT_EQ(items[0].pages, 11);  // 43 positions
  EXPECT_EQ(items[3].pages, 2);
  const std::vector<RehomeCapacity> caps = s.RehomeCapacities();
  EXPECT_EQ(caps[0].pages, 64);  // free + held: no cache
  EXPECT_EQ(caps[1].pages, 64);
  const RehomePlan plan = LongestFirstAssignment(items, caps);
  // Bins {11, 11} and {11, 2, 2, 2}: the middle long request goes to device 0.
  EXPECT_THAT(plan.home, ElementsAre(1, 0, 1, 0, 0, 0));
  EXPECT_THAT(plan.load, ElementsAre(17, 22));

  const std::vector<int32_t> old_pages = Find(s, 3)->pages;
  const std::vector<int32_t> stayer = Find(s, 2)->pages;
  const int free0 = pools.ptrs[0]->free_pages(), free1 = pools.ptrs[1]->free_pages();
  Result<std::vector<StateMove>> moves = s.Rehome(plan.home);
  ASSERT_THAT(moves.status(), IsOk());
  ASSERT_EQ(moves->size(), 1u);
  const StateMove& m = (*moves)[0];
  EXPECT_EQ(m.request_id, 3);
  EXPECT_EQ(m.from, 1);
  EXPECT_EQ(m.to, 0);
  EXPECT_EQ(m.from_pages, old_pages);
  EXPECT_EQ(m.to_pages, Find(s, 3)->pages);
  EXPECT_EQ(m.to_pages.size(), old_pages.size());
  EXPECT_EQ(m.from_slot, -1);
  EXPECT_EQ(m.to_slot, -1);
  EXPECT_EQ(Find(s, 3)->device, 0);
  EXPECT_EQ(Find(s, 2)->pages, stayer);
  EXPECT_EQ(pools.ptrs[0]->free_pages(), free0 - 11);
  EXPECT_EQ(pools.ptrs[1]->free_pages(), free1 + 11);
  EXPECT_EQ(s.running_on(0), 4);
  EXPECT_EQ(s.running_on(1), 2);
  for (int d = 0; d < 2; ++d) EXPECT_EQ(pools.ptrs[d]->used_pages(), plan.load[d]);
  ExpectAccounting(s, pools.ptrs, {});

  // It keeps decoding on its new home, from its new page table.
  BatchInput b = s.Plan();
  auto seq = std::find_if(b.seqs.begin(), b.seqs.end(),
                          [](const SeqInput& q) { return q.request_id == 3; });
  ASSERT_NE(seq, b.seqs.end());
  EXPECT_EQ(seq->device, 0);
  EXPECT_TRUE(std::equal(m.to_pages.begin(), m.to_pages.end(), seq->pages.begin()));
  ASSERT_THAT(s.Commit(Outputs(b), now += 1000).status(), IsOk());
  EXPECT_EQ(Drain(s, &now).size(), 6u);
  s.FlushCache();
  EXPECT_EQ(pools.free_total(), 128);
}

TEST(SchedulerRehomeTest, HybridMoverWithACacheHitTakesItsSlotAndUnpinsItsNode) {
  HybridPools pools({64, 64}, {12, 12}, kPageSize);
  Scheduler s(Opts(512, 8, 0, /*cache=*/true), pools.kv.ptrs, pools.state_ptrs);
  const auto initial = pools.Free();
  int64_t now = 0;
  // A system prompt cached on device 0 draws the long requests there.
  ASSERT_THAT(s.Submit(Prompt(1, 24, 0, 1), now), IsOk());
  Drain(s, &now);
  for (int i = 0; i < 3; ++i) ASSERT_THAT(s.Submit(Prompt(1, 24, 8, 20, i), now), IsOk());
  for (int i = 0; i < 3; ++i) ASSERT_THAT(s.Submit(Prompt(9 + i, 4, 0, 20), now), IsOk());
  for (int i = 0; i < 6; ++i) Step(s, &now);  // decode crosses boundary 36: a checkpoint
  ASSERT_EQ(s.running_on(0), 3);
  ASSERT_EQ(s.running_on(1), 3);
  const Request* mover = Find(s, 3);
  ASSERT_NE(mover, nullptr);
  ASSERT_EQ(mover->cached_len, 32);  // its prefill published [0, 32)
  ASSERT_GE(mover->ckpt_slot, 0);    // and decode checkpointed at 36
  ASSERT_EQ(mover->ckpt_len, 36);
  s.FlushCache();  // whatever is unpinned now
  ASSERT_EQ(s.cache_stats(0).tree.evictable_pages, 0);
  ExpectAccounting(s, pools.kv.ptrs, pools.state_ptrs);

  const std::vector<RehomeCapacity> caps = s.RehomeCapacities();
  for (int d = 0; d < 2; ++d) {
    int held = 0, slots = 0;
    for (const Request* r : s.running_requests()) {
      if (r->device != d) continue;
      held += static_cast<int>(r->pages.size());
      ++slots;
    }
    const RadixCacheStats t = s.cache_stats(d).tree;
    EXPECT_EQ(caps[d].pages, pools.kv.ptrs[d]->free_pages() + t.evictable_pages + held);
    EXPECT_EQ(caps[d].slots, pools.state[d]->free_slots() + t.evictable_slots + slots);
  }
  const RehomePlan plan = LongestFirstAssignment(s.RehomeItems(), caps);
  ASSERT_THAT(plan.home, ElementsAre(0, 1, 0, 1, 1, 1));

  const std::vector<int32_t> old_pages = mover->pages;
  const int old_slot = mover->state_slot;
  const auto before = pools.Free();
  Result<std::vector<StateMove>> moves = s.Rehome(plan.home);
  ASSERT_THAT(moves.status(), IsOk());
  ASSERT_EQ(moves->size(), 1u);
  const StateMove& m = (*moves)[0];
  EXPECT_EQ(m.request_id, 3);
  EXPECT_EQ(m.from_pages, old_pages);
  EXPECT_EQ(m.to_pages, mover->pages);  // the Request lives on, re-pointed
  EXPECT_EQ(m.from_slot, old_slot);
  EXPECT_EQ(m.to_slot, mover->state_slot);
  EXPECT_GE(m.to_slot, 0);
  EXPECT_EQ(mover->device, 1);
  EXPECT_EQ(mover->cached_len, 0);
  EXPECT_EQ(mover->cache_node, -1);
  EXPECT_EQ(mover->ckpt_slot, -1);
  EXPECT_EQ(mover->ckpt_len, 0);
  // Device 0 got back the 2 pages past 32 and both slots; the 8 tree pages
  // stay cached. Device 1 gave 10 pages and a slot.
  const int n = static_cast<int>(old_pages.size());
  EXPECT_EQ(pools.Free()[0], std::make_pair(before[0].first + n - 8, before[0].second + 2));
  EXPECT_EQ(pools.Free()[1], std::make_pair(before[1].first - n, before[1].second - 1));
  ExpectAccounting(s, pools.kv.ptrs, pools.state_ptrs);
  // Its leaf [24, 32) (2 pages and a checkpoint) is no longer pinned.
  EXPECT_EQ(s.cache_stats(0).tree.evictable_pages, 2);
  EXPECT_EQ(s.cache_stats(0).tree.evictable_slots, 1);
  EXPECT_EQ(s.FlushCache(), 2);

  BatchInput b = s.Plan();
  for (const SeqInput& q : b.seqs) {
    if (q.request_id != 3) continue;
    EXPECT_EQ(q.device, 1);
    EXPECT_EQ(q.state_slot, m.to_slot);
    EXPECT_EQ(q.state_copy_from, -1);
  }
  ASSERT_THAT(s.Commit(Outputs(b), now += 1000).status(), IsOk());
  EXPECT_EQ(Drain(s, &now).size(), 6u);
  s.FlushCache();
  EXPECT_EQ(pools.Free(), initial);
}

TEST(SchedulerRehomeTest, AMoverThatDoesNotFitStaysHome) {
  // Device 1: 8 pages, 1 slot.
  HybridPools pools({64, 8}, {4, 1}, kPageSize);
  Scheduler s(Opts(512), pools.kv.ptrs, pools.state_ptrs);
  int64_t now = 0;
  ASSERT_THAT(s.Submit(Spec(40, 10), now), IsOk());  // 10 pages: never fits on device 1
  ASSERT_THAT(s.Submit(Spec(4, 10), now), IsOk());
  ASSERT_THAT(s.Submit(Spec(4, 10), now), IsOk());
  Step(s, &now);
  ASSERT_EQ(s.running_on(0), 3);
  const std::vector<int32_t> big = Find(s, 1)->pages;
  const std::vector<int32_t> third = Find(s, 3)->pages;
  Result<std::vector<StateMove>> moves = s.Rehome({1, 1, 1});
  ASSERT_THAT(moves.status(), IsOk());
  // 1: too many pages. 2: moves. 3: its pages fit but the only slot is
  // taken, so they are given back.
  ASSERT_EQ(moves->size(), 1u);
  EXPECT_EQ((*moves)[0].request_id, 2);
  EXPECT_EQ(Find(s, 1)->pages, big);
  EXPECT_EQ(Find(s, 3)->pages, third);
  EXPECT_EQ(Find(s, 3)->device, 0);
  EXPECT_EQ(pools.kv.ptrs[1]->free_pages(), 8 - 1);
  EXPECT_EQ(pools.state[1]->free_slots(), 0);
  ExpectAccounting(s, pools.kv.ptrs, pools.state_ptrs);
  EXPECT_EQ(Drain(s, &now).size(), 3u);
  EXPECT_EQ(pools.Free(), (std::vector<std::pair<int, int>>{{64, 4}, {8, 1}}));
}

TEST(SchedulerRehomeTest, BadHomesChangeNothing) {
  Pools pools(2, 64, kPageSize);
  Scheduler s(Opts(512), pools.ptrs);
  int64_t now = 0;
  ASSERT_THAT(s.Submit(Spec(8, 10), now), IsOk());
  ASSERT_THAT(s.Submit(Spec(8, 10), now), IsOk());
  Step(s, &now);
  const int d1 = Find(s, 1)->device, d2 = Find(s, 2)->device;
  ASSERT_NE(d1, d2);
  std::vector<int32_t> p1, p2;
  int free = 0;
  auto snapshot = [&] {
    p1 = Find(s, 1)->pages;
    p2 = Find(s, 2)->pages;
    free = pools.free_total();
  };
  auto unchanged = [&] {
    EXPECT_EQ(Find(s, 1)->pages, p1);
    EXPECT_EQ(Find(s, 2)->pages, p2);
    EXPECT_EQ(Find(s, 1)->device, d1);
    EXPECT_EQ(Find(s, 2)->device, d2);
    EXPECT_EQ(pools.free_total(), free);
  };
  snapshot();
  EXPECT_THAT(s.Rehome({d2}).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("1 homes for 2")));
  EXPECT_THAT(s.Rehome({d2, 2}).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("device 2")));
  EXPECT_THAT(s.Rehome({d2, -1}).status(), StatusIs(StatusCode::kInvalidArgument));
  unchanged();
  // Staying home everywhere is a no-op.
  Result<std::vector<StateMove>> none = s.Rehome({d1, d2});
  ASSERT_THAT(none.status(), IsOk());
  EXPECT_TRUE(none->empty());
  unchanged();
  // Between Plan and Commit the planned batch reads the page tables.
  BatchInput b = s.Plan();
  snapshot();
  EXPECT_THAT(s.Rehome({d2, d1}).status(), StatusIs(StatusCode::kFailedPrecondition));
  unchanged();
  ASSERT_THAT(s.Commit(Outputs(b), now += 1000).status(), IsOk());
  EXPECT_EQ(Drain(s, &now).size(), 2u);
}

// Random workloads with random re-homings between steps: the accounting
// holds after each, everything finishes, and every page and slot comes back.
TEST(SchedulerRehomeTest, StressRandomRehomesLoseNothing) {
  int moved = 0, hits_moved = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    const bool hybrid = seed % 2 == 0;
    std::mt19937_64 rng(seed);
    const int devices = 2 + static_cast<int>(rng() % 2);
    HybridPools pools(std::vector<int>(devices, 24), std::vector<int>(devices, 5), kPageSize);
    const std::vector<StatePool*> state = hybrid ? pools.state_ptrs : std::vector<StatePool*>{};
    Scheduler s(Opts(48, 6, 1, /*cache=*/true), pools.kv.ptrs, state);
    const auto initial = pools.Free();
    int64_t now = 0;
    int submitted = 0, finished = 0;
    for (int step = 0; step < 400 && (submitted < 30 || !s.idle()); ++step) {
      if (submitted < 30 && rng() % 3 == 0) {
        ASSERT_THAT(s.Submit(Prompt(static_cast<int>(rng() % 3), 4 + static_cast<int>(rng() % 20),
                                    static_cast<int>(rng() % 8), 1 + static_cast<int>(rng() % 16),
                                    static_cast<int>(rng() % 4)),
                             now),
                    IsOk());
        ++submitted;
      }
      if (s.running() > 0 && rng() % 4 == 0) {
        std::vector<int> homes;
        std::map<int64_t, int> cached;  // id -> cached_len before
        for (const Request* r : s.running_requests()) {
          homes.push_back(rng() % 2 ? static_cast<int>(rng() % devices) : r->device);
          cached[r->id] = r->cached_len;
        }
        if (rng() % 2) homes = LongestFirstAssignment(s.RehomeItems(), s.RehomeCapacities()).home;
        Result<std::vector<StateMove>> m = s.Rehome(homes);
        ASSERT_THAT(m.status(), IsOk());
        moved += static_cast<int>(m->size());
        for (const StateMove& mv : *m) {
          hits_moved += cached[mv.request_id] > 0;
          const Request* r = Find(s, mv.request_id);
          EXPECT_EQ(r->device, mv.to);
          EXPECT_EQ(r->pages, mv.to_pages);
          EXPECT_EQ(r->state_slot, mv.to_slot);
          EXPECT_EQ(mv.from_pages.size(), mv.to_pages.size());
          EXPECT_EQ(mv.to_slot >= 0, hybrid);
        }
        ExpectAccounting(s, pools.kv.ptrs, state);
        if (HasFailure()) return;
      }
      BatchInput b = s.Plan();
      for (const SeqInput& q : b.seqs) {
        ASSERT_GE(static_cast<int>(q.pages.size()) * kPageSize,
                  q.start_pos + static_cast<int>(q.tokens.size()));
      }
      auto done = s.Commit(Outputs(b), now += 1000);
      ASSERT_THAT(done.status(), IsOk());
      finished += static_cast<int>(done->size());
    }
    EXPECT_TRUE(s.idle()) << "seed " << seed;
    EXPECT_EQ(finished, submitted) << "seed " << seed;
    s.FlushCache();
    EXPECT_EQ(pools.Free(), initial) << "seed " << seed;
  }
  EXPECT_GT(moved, 50);
  EXPECT_GT(hits_moved, 0);
}

}  // namespace
}  // namespace sy::engine
