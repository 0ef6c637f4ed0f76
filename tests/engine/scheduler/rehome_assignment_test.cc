// LongestFirstAssignment (rehome.h): Moebius Algorithm 4 step 1, greedy
// longest-first with the bin relabelling, on hand-made and random cases.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>

#include "engine/scheduler/rehome.h"

namespace sy::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<RehomeItem> Items(const std::vector<int>& pages, const std::vector<int>& homes,
                              bool slots = false) {
  std::vector<RehomeItem> items;
  for (size_t i = 0; i < pages.size(); ++i) {
    items.push_back({.id = static_cast<int64_t>(i + 1),
                     .home = homes[i],
                     .pages = pages[i],
                     .needs_slot = slots});
  }
  return items;
}

std::vector<RehomeCapacity> Caps(int devices, int pages = 1000, int slots = 1000) {
  return std::vector<RehomeCapacity>(devices, RehomeCapacity{pages, slots});
}

// Pages and slots a plan puts on each device must be within its capacity,
// and load / moved / moved_pages must agree with `home`.
void ExpectConsistent(const std::vector<RehomeItem>& items, const std::vector<RehomeCapacity>& caps,
                      const RehomePlan& plan) {
  ASSERT_EQ(plan.home.size(), items.size());
  std::vector<int64_t> load(caps.size(), 0);
  std::vector<int> slots(caps.size(), 0);
  int moved = 0;
  int64_t moved_pages = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    load[plan.home[i]] += items[i].pages;
    slots[plan.home[i]] += items[i].needs_slot ? 1 : 0;
    if (plan.home[i] != items[i].home) {
      ++moved;
      moved_pages += items[i].pages;
    }
  }
  EXPECT_EQ(plan.load, load);
  EXPECT_EQ(plan.moved, moved);
  EXPECT_EQ(plan.moved_pages, moved_pages);
  if (!plan.fits) return;
  for (size_t d = 0; d < caps.size(); ++d) {
    EXPECT_LE(load[d], caps[d].pages) << "device " << d;
    EXPECT_LE(slots[d], caps[d].slots) << "device " << d;
  }
}

TEST(LongestFirstAssignmentTest, ClassicGreedyOnAHandMadeExample) {
  // Sorted: 7 5 4 3 3 2 -> 7:b0 5:b1 4:b1(9) 3:b0(10) 3:b1(12) 2:b0(12).
  const auto items = Items({3, 7, 2, 5, 3, 4}, {0, 0, 0, 0, 0, 0});
  const RehomePlan plan = LongestFirstAssignment(items, Caps(2));
  EXPECT_TRUE(plan.fits);
  // Both bins keep 12 pages and 3 items on device 0: the identity labelling.
  EXPECT_THAT(plan.home, ElementsAre(0, 0, 0, 1, 1, 1));
  EXPECT_THAT(plan.load, ElementsAre(12, 12));
  EXPECT_EQ(plan.moved, 3);
  EXPECT_EQ(plan.moved_pages, 12);
  ExpectConsistent(items, Caps(2), plan);
}

TEST(LongestFirstAssignmentTest, EqualItemsAlternateInInputOrder) {
  const auto items = Items({4, 4, 4, 4}, {1, 1, 1, 1});
  const RehomePlan plan = LongestFirstAssignment(items, Caps(2));
  EXPECT_THAT(plan.home, ElementsAre(0, 1, 0, 1));
  EXPECT_EQ(plan.moved, 2);
}

TEST(LongestFirstAssignmentTest, WithinFourThirdsOfTheOptimum) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int p = 2 + static_cast<int>(rng() % 2);
    const int n = 1 + static_cast<int>(rng() % 8);
    std::vector<int> pages(n), homes(n);
    for (int i = 0; i < n; ++i) {
      pages[i] = 1 + static_cast<int>(rng() % 20);
      homes[i] = static_cast<int>(rng() % p);
    }
    const auto items = Items(pages, homes);
    const RehomePlan plan = LongestFirstAssignment(items, Caps(p));
    ASSERT_TRUE(plan.fits);
    ExpectConsistent(items, Caps(p), plan);
    // Brute force over all p^n assignments.
    int64_t best = INT64_MAX;
    std::vector<int> a(n, 0);
    for (;;) {
      std::vector<int64_t> load(p, 0);
      for (int i = 0; i < n; ++i) load[a[i]] += pages[i];
      best = std::min(best, *std::max_element(load.begin(), load.end()));
      int k = 0;
      while (k < n && ++a[k] == p) a[k++] = 0;
      if (k == n) break;
    }
    const int64_t got = *std::max_element(plan.load.begin(), plan.load.end());
    EXPECT_LE(3 * got, 4 * best) << "trial " << trial;
  }
}

TEST(LongestFirstAssignmentTest, RelabellingKeepsABalancedAssignmentInPlace) {
  // Longest-first gives bins {9,1} {8,2} {7,3}: exactly the current homes,
  // under other labels.
  const auto items = Items({9, 8, 7, 1, 2, 3}, {2, 0, 1, 2, 0, 1});
  const RehomePlan plan = LongestFirstAssignment(items, Caps(3));
  EXPECT_THAT(plan.home, ElementsAre(2, 0, 1, 2, 0, 1));
  EXPECT_EQ(plan.moved, 0);
  EXPECT_EQ(plan.moved_pages, 0);
  EXPECT_THAT(plan.load, ElementsAre(10, 10, 10));
}

TEST(LongestFirstAssignmentTest, RelabellingBeyondEightDevicesIsGreedyButFindsAPermutation) {
  std::vector<int> pages, homes;
  for (int i = 0; i < 10; ++i) {
    pages.push_back(100 - i);
    homes.push_back((3 * i + 1) % 10);
  }
  const auto items = Items(pages, homes);
  const RehomePlan plan = LongestFirstAssignment(items, Caps(10));
  EXPECT_EQ(plan.home, homes);
  EXPECT_EQ(plan.moved, 0);
  // With unequal capacities the relabel must still respect them.
  std::vector<RehomeCapacity> caps = Caps(10, 100);
  caps[1].pages = 95;  // item 0 (100 pages, home 1) can live elsewhere only
  const RehomePlan tight = LongestFirstAssignment(items, caps);
  ASSERT_TRUE(tight.fits);
  ExpectConsistent(items, caps, tight);
  EXPECT_NE(tight.home[0], 1);
}

TEST(LongestFirstAssignmentTest, RespectsPageAndSlotCapacity) {
  // 8:b0, 8:b1 (b0 would be 16 > 10), 8:b1, 2:b0 -> bins 10 and 16.
  const std::vector<RehomeCapacity> caps{{10, 100}, {30, 100}};
  const auto items = Items({8, 8, 8, 2}, {0, 0, 0, 0});
  const RehomePlan plan = LongestFirstAssignment(items, caps);
  ASSERT_TRUE(plan.fits);
  // Labelling bin 1 as device 0 would keep 16 pages home, but 16 > 10.
  EXPECT_THAT(plan.home, ElementsAre(0, 1, 1, 0));
  EXPECT_THAT(plan.load, ElementsAre(10, 16));
  EXPECT_EQ(plan.moved_pages, 16);
  ExpectConsistent(items, caps, plan);

  // One slot on device 0: the least loaded device is skipped when full.
  const std::vector<RehomeCapacity> slot_caps{{100, 1}, {100, 5}};
  const auto hybrid = Items({5, 5, 5}, {0, 0, 0}, /*slots=*/true);
  const RehomePlan s = LongestFirstAssignment(hybrid, slot_caps);
  ASSERT_TRUE(s.fits);
  EXPECT_THAT(s.home, ElementsAre(0, 1, 1));
  ExpectConsistent(hybrid, slot_caps, s);

  // Random capacities: whatever fits respects them.
  std::mt19937 rng(11);
  for (int trial = 0; trial < 300; ++trial) {
    const int p = 2 + static_cast<int>(rng() % 4);
    std::vector<RehomeCapacity> c(p);
    for (auto& x : c) x = {static_cast<int>(10 + rng() % 40), static_cast<int>(rng() % 5)};
    std::vector<int> pg, hm;
    for (int i = 0, n = 1 + static_cast<int>(rng() % 10); i < n; ++i) {
      pg.push_back(1 + static_cast<int>(rng() % 12));
      hm.push_back(static_cast<int>(rng() % p));
    }
    const auto it = Items(pg, hm, trial % 2 == 0);
    const RehomePlan r = LongestFirstAssignment(it, c);
    ExpectConsistent(it, c, r);
    if (!r.fits) {
      EXPECT_EQ(r.home, hm);
    }
  }
}

TEST(LongestFirstAssignmentTest, WhatFitsNowhereLeavesEveryHome) {
  const auto items = Items({6, 1}, {0, 1});
  const RehomePlan plan = LongestFirstAssignment(items, Caps(2, 5));
  EXPECT_FALSE(plan.fits);
  EXPECT_THAT(plan.home, ElementsAre(0, 1));
  EXPECT_THAT(plan.load, ElementsAre(6, 1));
  EXPECT_EQ(plan.moved, 0);
  // Slots alone can also rule a plan out.
  const RehomePlan slots = LongestFirstAssignment(Items({1, 1, 1}, {0, 0, 1}, true), Caps(2, 9, 1));
  EXPECT_FALSE(slots.fits);
  EXPECT_THAT(slots.home, ElementsAre(0, 0, 1));
}

TEST(LongestFirstAssignmentTest, IsDeterministic) {
  std::mt19937 rng(3);
  std::vector<int> pages, homes;
  for (int i = 0; i < 40; ++i) {
    pages.push_back(1 + static_cast<int>(rng() % 6));  // many ties
    homes.push_back(static_cast<int>(rng() % 4));
  }
  const auto items = Items(pages, homes);
  const RehomePlan a = LongestFirstAssignment(items, Caps(4));
  const RehomePlan b = LongestFirstAssignment(items, Caps(4));
  EXPECT_EQ(a.home, b.home);
  EXPECT_EQ(a.load, b.load);
  EXPECT_EQ(a.moved, b.moved);
}

}  // namespace
}  // namespace sy::engine
