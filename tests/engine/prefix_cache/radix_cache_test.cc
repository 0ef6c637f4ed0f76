// Tests of engine/prefix_cache/radix_cache.h over real pools: matching in
// whole pages under a limit, node splits (handles and locks survive), exact
// page and slot accounting, checkpoint semantics, path locks, LRU eviction of
// pages and slots, Clear/destruction, and a randomized comparison with a
// page-by-page reference model.
#include "engine/prefix_cache/radix_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "tests/engine/prefix_cache/radix_cache_reference.h"

namespace sy::engine {
namespace {

using radix_reference::Reference;
using radix_reference::Tokens;
constexpr int kMax = std::numeric_limits<int>::max();

struct Pools {
  explicit Pools(int page_size, int pages = 32, int slots = 8)
      : kv({.num_pages = pages,
            .page_size = page_size,
            .layers = 1,
            .kv_heads = 1,
            .head_dim = 1,
            .latent_dim = 0}),
        state({.slots = slots, .layers = 1, .state_floats = 1, .conv_floats = 0}) {}
  KvPool kv;
  StatePool state;
};

std::vector<int32_t> Alloc(KvPool* kv, int n) {
  std::vector<int32_t> pages;
  EXPECT_THAT(kv->Allocate(n, &pages), StatusIs(StatusCode::kOk));
  return pages;
}

int Slot(StatePool* state) {
  Result<int> s = state->Allocate();
  EXPECT_TRUE(s.ok());
  return s.ok() ? *s : -1;
}

Tokens Iota(int n, int32_t from = 0) {
  Tokens t(n);
  std::iota(t.begin(), t.end(), from);
  return t;
}

Tokens Head(const std::vector<int32_t>& v, int n) { return Tokens(v.begin(), v.begin() + n); }

// Every page (slot) is free exactly once: allocating all of them gives each id once.
void ExpectPoolsWhole(Pools* p) {
  ASSERT_EQ(p->kv.free_pages(), p->kv.num_pages());
  std::vector<int32_t> all = Alloc(&p->kv, p->kv.num_pages());
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, Iota(p->kv.num_pages()));
  p->kv.Free(all);
  ASSERT_EQ(p->state.free_slots(), p->state.slots());
}

TEST(RadixCacheTest, EmptyTreeMisses) {
  Pools p(4);
  RadixCache cache({.page_size = 4, .needs_state = false}, &p.kv, &p.state);
  const Tokens t = Iota(12);
  RadixCache::Match m = cache.MatchPrefix(t, 12);
  EXPECT_EQ(m.tokens, 0);
  EXPECT_TRUE(m.pages.empty());
  EXPECT_EQ(m.checkpoint_slot, -1);
  EXPECT_EQ(m.node, RadixCache::kRoot);
  EXPECT_EQ(cache.stats().nodes, 0);
  EXPECT_EQ(cache.stats().cached_pages, 0);
}

TEST(RadixCacheTest, MatchesWholePagesUnderTheLimit) {
  Pools p(4);
  RadixCache cache({.page_size = 4, .needs_state = false}, &p.kv, &p.state);
  const Tokens t = Iota(14);  // 3 whole pages and a partial one
  const std::vector<int32_t> pages = Alloc(&p.kv, 3);
  RadixCache::Inserted ins = cache.Insert(t, pages, -1);
  EXPECT_EQ(ins.pages, pages);
  EXPECT_EQ(ins.new_pages, 3);
  EXPECT_EQ(cache.stats().cached_pages, 3);
  EXPECT_EQ(cache.stats().cached_tokens, 12);

  RadixCache::Match full = cache.MatchPrefix(t, 14);
  EXPECT_EQ(full.tokens, 12);
  EXPECT_EQ(full.pages, pages);
  EXPECT_EQ(full.node, ins.node);

  RadixCache::Match limited = cache.MatchPrefix(t, 11);  // rounds down to 8
  EXPECT_EQ(limited.tokens, 8);
  EXPECT_EQ(limited.pages, Head(pages, 2));
  EXPECT_NE(limited.node, ins.node);
  EXPECT_EQ(cache.stats().nodes, 2);  // split so the handle ends at 8
  EXPECT_EQ(cache.MatchPrefix(t, 3).tokens, 0);

  Tokens other = t;
  other[5] = 99;  // differs inside the second page
  RadixCache::Match m = cache.MatchPrefix(other, 14);
  EXPECT_EQ(m.tokens, 4);
  EXPECT_EQ(m.pages, Head(pages, 1));
  other = t;
  other[10] = 99;  // differs in the third page
  EXPECT_EQ(cache.MatchPrefix(other, 14).tokens, 8);
  EXPECT_EQ(p.kv.used_pages(), cache.stats().cached_pages);
}

TEST(RadixCacheTest, ChildrenSharingAFirstTokenAreDistinct) {
  Pools p(4);
  RadixCache cache({.page_size = 4, .needs_state = false}, &p.kv, &p.state);
  const Tokens a = {1, 2, 3, 4, 5, 6, 7, 8};
  const Tokens b = {1, 2, 3, 9, 5, 6, 7, 8};  // same first token, other first page
  const std::vector<int32_t> pa = Alloc(&p.kv, 2), pb = Alloc(&p.kv, 2);
  cache.Insert(a, pa, -1);
  RadixCache::Inserted ib = cache.Insert(b, pb, -1);
  EXPECT_EQ(ib.new_pages, 2);
  EXPECT_EQ(cache.MatchPrefix(a, 8).pages, pa);
  EXPECT_EQ(cache.MatchPrefix(b, 8).pages, pb);
  EXPECT_EQ(cache.stats().nodes, 2);
}

TEST(RadixCacheTest, SplitKeepsHandlesAndLocks) {
  Pools p(2);
  RadixCache cache({.page_size = 2, .needs_state = false}, &p.kv, &p.state);
  const Tokens a = Iota(8);  // 4 pages
  Tokens b = a;
  b[4] = 50;  // shares 2 pages, then diverges
  const std::vector<int32_t> pa = Alloc(&p.kv, 4);
  RadixCache::Inserted ia = cache.Insert(a, pa, -1);
  cache.Lock(ia.node);
  EXPECT_EQ(cache.stats().evictable_pages, 0);

  RadixCache::Inserted ib = cache.Insert(b, Alloc(&p.kv, 4), -1);
  EXPECT_EQ(ib.new_pages, 2);
  EXPECT_EQ(Head(ib.pages, 2), Head(pa, 2));
  EXPECT_EQ(cache.stats().nodes, 3);
  EXPECT_EQ(p.kv.used_pages(), cache.stats().cached_pages);
  // The handle still denotes the node ending at 8 tokens, and the upper half
  // inherited its lock: only b's own two pages can go.
  EXPECT_EQ(cache.MatchPrefix(a, 8).node, ia.node);
  EXPECT_EQ(cache.stats().evictable_pages, 2);
  EXPECT_EQ(cache.EvictPages(kMax), 2);
  EXPECT_EQ(cache.MatchPrefix(a, 8).pages, pa);
  EXPECT_EQ(cache.MatchPrefix(b, 8).tokens, 4);

  cache.Unlock(ia.node);
  EXPECT_EQ(cache.stats().evictable_pages, 4);
  EXPECT_EQ(cache.EvictPages(kMax), 4);
  EXPECT_EQ(cache.stats().nodes, 0);
  ExpectPoolsWhole(&p);
}

TEST(RadixCacheTest, DuplicatesAreFreedAndTreePagesKept) {
  Pools p(2);
  RadixCache cache({.page_size = 2, .needs_state = false}, &p.kv, &p.state);
  const Tokens t = Iota(8);
  const std::vector<int32_t> first = Alloc(&p.kv, 3);
  cache.Insert(t, first, -1);
  // Same prefix again with other pages: the tree keeps its own, frees ours.
  RadixCache::Inserted again = cache.Insert(t, Alloc(&p.kv, 3), -1);
  EXPECT_EQ(again.new_pages, 0);
  EXPECT_EQ(again.pages, first);
  EXPECT_EQ(p.kv.used_pages(), 3);
  // A page table rewritten from Inserted::pages, extended by one own page:
  // the tree's pages are not freed, the new one is kept.
  std::vector<int32_t> table = again.pages;
  const std::vector<int32_t> extra = Alloc(&p.kv, 1);
  table.push_back(extra[0]);
  RadixCache::Inserted longer = cache.Insert(t, table, -1);
  EXPECT_EQ(longer.new_pages, 1);
  EXPECT_EQ(longer.pages, table);
  EXPECT_EQ(p.kv.used_pages(), 4);
  EXPECT_EQ(cache.stats().cached_pages, 4);
  // An empty insert returns the root and frees a given slot.
  RadixCache::Inserted none = cache.Insert(t, {}, Slot(&p.state));
  EXPECT_EQ(none.node, RadixCache::kRoot);
  EXPECT_EQ(p.state.used_slots(), 0);
}

TEST(RadixCacheTest, NeedsStateMatchesTheDeepestCheckpoint) {
  Pools p(2);
  RadixCache cache({.page_size = 2, .needs_state = true}, &p.kv, &p.state);
  const Tokens t = Iota(12);  // 6 pages
  const std::vector<int32_t> pages = Alloc(&p.kv, 6);
  const int s2 = Slot(&p.state);
  cache.Insert(t, Head(pages, 2), s2);
  cache.Insert(t, pages, -1);  // pages only, no checkpoint at 12
  RadixCache::Match m = cache.MatchPrefix(t, 12);
  EXPECT_EQ(m.tokens, 4);
  EXPECT_EQ(m.checkpoint_slot, s2);
  EXPECT_EQ(m.pages, Head(pages, 2));
  EXPECT_EQ(cache.MatchPrefix(t, 3).node, RadixCache::kRoot);  // no checkpoint at 2

  const int s6 = Slot(&p.state);
  RadixCache::Inserted i6 = cache.Insert(t, pages, s6);
  cache.Lock(i6.node);
  EXPECT_EQ(cache.MatchPrefix(t, 12).checkpoint_slot, s6);
  EXPECT_EQ(cache.MatchPrefix(t, 11).tokens, 4);  // no checkpoint at 10: no split either
  const int nodes = cache.stats().nodes;

  // A checkpoint at 8 splits the 4..12 node; 12's checkpoint and handle stay deeper.
  const int s4 = Slot(&p.state);
  RadixCache::Inserted i4 = cache.Insert(t, Head(pages, 4), s4);
  EXPECT_EQ(cache.stats().nodes, nodes + 1);
  RadixCache::Match deep = cache.MatchPrefix(t, 12);
  EXPECT_EQ(deep.node, i6.node);
  EXPECT_EQ(deep.checkpoint_slot, s6);
  RadixCache::Match mid = cache.MatchPrefix(t, 11);
  EXPECT_EQ(mid.node, i4.node);
  EXPECT_EQ(mid.tokens, 8);
  EXPECT_EQ(mid.checkpoint_slot, s4);

  // A second checkpoint for the same end is freed.
  cache.Insert(t, Head(pages, 2), Slot(&p.state));
  EXPECT_EQ(cache.MatchPrefix(t, 5).checkpoint_slot, s2);
  EXPECT_EQ(p.state.used_slots(), 3);
  EXPECT_EQ(cache.stats().checkpoint_slots, 3);
  EXPECT_EQ(cache.stats().evictable_slots, 0);  // all on the locked path
  cache.Unlock(i6.node);
  EXPECT_EQ(cache.stats().evictable_slots, 3);
}

TEST(RadixCacheTest, LockPreventsEviction) {
  Pools p(2);
  RadixCache cache({.page_size = 2, .needs_state = true}, &p.kv, &p.state);
  const Tokens t = Iota(6);
  RadixCache::Inserted ins = cache.Insert(t, Alloc(&p.kv, 3), Slot(&p.state));
  cache.Lock(ins.node);
  cache.Lock(ins.node);  // counted
  EXPECT_EQ(cache.EvictPages(kMax), 0);
  EXPECT_EQ(cache.EvictSlots(kMax), 0);
  cache.Unlock(ins.node);
  EXPECT_EQ(cache.EvictPages(kMax), 0);
  cache.Unlock(ins.node);
  EXPECT_EQ(cache.EvictPages(kMax), 3);
  EXPECT_EQ(cache.stats().evicted_pages, 3);
  EXPECT_EQ(cache.stats().evicted_slots, 1);
  ExpectPoolsWhole(&p);
}

// Three 2-page leaves a, b, c, inserted in that order into a cache they
// fill (6 pages): a is the least recently used.
struct ThreeLeaves {
  ThreeLeaves() {
    for (const Tokens* t : {&a, &b, &c}) cache.Insert(*t, Alloc(&p.kv, 2), -1);
  }
  Pools p{2, /*pages=*/6};
  RadixCache cache{RadixCacheOptions{.page_size = 2, .needs_state = false}, &p.kv, &p.state};
  const Tokens a = Iota(4, 0), b = Iota(4, 100), c = Iota(4, 200);
};

// CachedPrefix answers what MatchPrefix would, but leaves the tree alone: no
// split inside an edge, no use mark for the LRU order.
TEST(RadixCacheTest, CachedPrefixPeeksWithoutSplittingOrTouching) {
  ThreeLeaves leaves;
  RadixCache& cache = leaves.cache;
  const Tokens &a = leaves.a, &b = leaves.b;
  EXPECT_EQ(cache.CachedPrefix(a, 4), 4);
  EXPECT_EQ(cache.CachedPrefix(a, 3), 2);  // ends inside a's edge: MatchPrefix would split
  EXPECT_EQ(cache.CachedPrefix(Iota(4, 50), 4), 0);
  EXPECT_EQ(cache.stats().nodes, 3);
  // a, asked last, is still the oldest: eviction takes it first.
  EXPECT_EQ(cache.EvictPages(2), 2);
  EXPECT_EQ(cache.CachedPrefix(a, 4), 0);
  EXPECT_EQ(cache.CachedPrefix(b, 4), 4);

  // With state, a hit needs a checkpoint at its end.
  Pools q(2);
  RadixCache hybrid({.page_size = 2, .needs_state = true}, &q.kv, &q.state);
  const Tokens t = Iota(8);
  const std::vector<int32_t> pages = Alloc(&q.kv, 4);
  hybrid.Insert(t, Head(pages, 1), Slot(&q.state));
  hybrid.Insert(t, pages, -1);  // no checkpoint at 8
  EXPECT_EQ(hybrid.CachedPrefix(t, 8), 2);
  EXPECT_EQ(hybrid.CachedPrefix(t, 8), hybrid.MatchPrefix(t, 8).tokens);
}

TEST(RadixCacheTest, EvictsLeastRecentlyUsedFirst) {
  ThreeLeaves leaves;
  RadixCache& cache = leaves.cache;
  const Tokens &a = leaves.a, &b = leaves.b, &c = leaves.c;
  EXPECT_EQ(cache.MatchPrefix(a, 4).tokens, 4);  // a is now the newest
  EXPECT_EQ(cache.EvictPages(2), 2);
  EXPECT_EQ(cache.MatchPrefix(b, 4).tokens, 0);
  EXPECT_EQ(cache.EvictPages(2), 0);  // already 2 free
  EXPECT_EQ(cache.EvictPages(4), 2);
  EXPECT_EQ(cache.MatchPrefix(c, 4).tokens, 0);
  EXPECT_EQ(cache.MatchPrefix(a, 4).tokens, 4);
}

TEST(RadixCacheTest, EvictSlotsDropsInternalCheckpointsAndUselessLeaves) {
  Pools p(2);
  RadixCache cache({.page_size = 2, .needs_state = true}, &p.kv, &p.state);
  const Tokens t = Iota(8);
  const std::vector<int32_t> pages = Alloc(&p.kv, 4);
  cache.Insert(t, Head(pages, 2), Slot(&p.state));
  cache.Insert(t, pages, -1);  // a leaf below the checkpoint, without one
  // The internal checkpoint goes, its pages stay (they have a child).
  EXPECT_EQ(cache.EvictSlots(kMax), 1);
  EXPECT_EQ(cache.stats().cached_pages, 4);
  EXPECT_EQ(cache.MatchPrefix(t, 8).tokens, 0);

  // A leaf's checkpoint takes the leaf and its checkpoint-less ancestors.
  cache.Insert(t, pages, Slot(&p.state));
  EXPECT_EQ(cache.EvictSlots(kMax), 1);
  EXPECT_EQ(cache.stats().cached_pages, 0);
  EXPECT_EQ(cache.stats().evicted_pages, 4);
  EXPECT_EQ(cache.stats().evicted_slots, 2);
  ExpectPoolsWhole(&p);

  // Without needs_state, pages stay after their checkpoint goes.
  RadixCache plain({.page_size = 2, .needs_state = false}, &p.kv, &p.state);
  plain.Insert(t, Alloc(&p.kv, 4), Slot(&p.state));
  EXPECT_EQ(plain.EvictSlots(kMax), 1);
  RadixCache::Match m = plain.MatchPrefix(t, 8);
  EXPECT_EQ(m.tokens, 8);
  EXPECT_EQ(m.checkpoint_slot, -1);
}

TEST(RadixCacheTest, ClearAndDestructorReturnEverything) {
  Pools p(2);
  {
    RadixCache cache({.page_size = 2, .needs_state = true}, &p.kv, &p.state);
    for (int i = 0; i < 4; ++i) {
      cache.Insert(Iota(6, i % 2 == 0 ? 0 : 10 * i), Alloc(&p.kv, 3), Slot(&p.state));
    }
    EXPECT_GT(cache.stats().cached_pages, 0);
    cache.Clear();
    EXPECT_EQ(cache.stats().nodes, 0);
    EXPECT_EQ(cache.stats().cached_pages, 0);
    EXPECT_EQ(cache.stats().checkpoint_slots, 0);
    EXPECT_EQ(cache.stats().evicted_pages, 0);  // Clear is not eviction
    ExpectPoolsWhole(&p);
    // Usable after Clear; the destructor frees what is left.
    cache.Insert(Iota(6), Alloc(&p.kv, 3), Slot(&p.state));
    cache.Insert(Iota(8), Alloc(&p.kv, 4), Slot(&p.state));
    EXPECT_EQ(cache.MatchPrefix(Iota(8), 8).tokens, 8);
    EXPECT_EQ(p.kv.used_pages(), 4);
  }
  ExpectPoolsWhole(&p);
}

// Random inserts, matches, locks, unlocks and evictions over sequences built
// from a few shared bases, checked op by op against Reference.
void RunRandom(uint32_t seed, bool needs_state) {
  SCOPED_TRACE("seed " + std::to_string(seed) + (needs_state ? " needs_state" : ""));
  constexpr int kPs = 2;
  Pools p(kPs, /*pages=*/24, /*slots=*/6);
  std::mt19937 rng(seed);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::vector<Tokens> bases(3);
  for (Tokens& b : bases) {
    for (int i = 0; i < 7 * kPs; ++i) b.push_back(uniform(0, 2));
  }
  auto sequence = [&] {
    Tokens t = Head(bases[uniform(0, 2)], uniform(0, 5) * kPs);
    const int extra = uniform(0, 3 * kPs);
    for (int i = 0; i < extra; ++i) t.push_back(uniform(0, 2));
    return t;
  };
  struct Held {
    RadixCache::NodeId node;
    Tokens tokens;
    int pages;
  };
  std::vector<Held> held;
  Reference ref(kPs, needs_state);
  {
    RadixCache cache({.page_size = kPs, .needs_state = needs_state}, &p.kv, &p.state);
    auto evict_pages = [&](int target) {
      const int expect = ref.EvictPages(p.kv.free_pages(), target);
      EXPECT_EQ(cache.EvictPages(target), expect);
    };
    auto evict_slots = [&](int target) {
      const int expect = ref.EvictSlots(p.state.free_slots(), target);
      EXPECT_EQ(cache.EvictSlots(target), expect);
    };
    for (int op = 0; op < 300; ++op) {
      const int kind = uniform(0, 9);
      if (kind < 4) {  // insert, like a request publishing its prefix
        const Tokens t = sequence();
        const int n = static_cast<int>(t.size()) / kPs;
        // The slot first: evicting slots may evict pages (needs_state), and
        // the tree pages reused below must still be there when inserted.
        int slot = -1;
        if (uniform(0, 2) > 0) {
          if (p.state.free_slots() == 0) evict_slots(1);
          if (p.state.free_slots() > 0) slot = Slot(&p.state);
        }
        const int reuse = uniform(0, 1) ? ref.Existing(t, n) : 0;
        if (p.kv.free_pages() < n - reuse) evict_pages(n - reuse);
        if (p.kv.free_pages() < n - reuse || ref.Existing(t, n) < reuse) {
          if (slot >= 0) p.state.Free(slot);
          continue;
        }
        std::vector<int32_t> pages;
        for (int k = 1; k <= reuse; ++k) pages.push_back(ref.at(t, k).page);
        std::vector<int32_t> own = Alloc(&p.kv, n - reuse);
        pages.insert(pages.end(), own.begin(), own.end());
        int kept = 0;
        const std::vector<int32_t> expect = ref.Insert(t, pages, slot, &kept);
        RadixCache::Inserted ins = cache.Insert(t, pages, slot);
        EXPECT_EQ(ins.pages, expect);
        EXPECT_EQ(ins.new_pages, kept);
        if (n > 0 && uniform(0, 2) == 0) {
          cache.Lock(ins.node);
          ref.Lock(t, n, +1);
          held.push_back({ins.node, t, n});
        }
      } else if (kind < 7) {  // match
        const Tokens t = sequence();
        const int limit = uniform(0, static_cast<int>(t.size()));
        const RadixCache::Match expect = ref.Match(t, limit);
        EXPECT_EQ(cache.CachedPrefix(t, limit), expect.tokens);  // asked first: no split yet
        const RadixCache::Match m = cache.MatchPrefix(t, limit);
        EXPECT_EQ(m.tokens, expect.tokens);
        EXPECT_EQ(m.pages, expect.pages);
        EXPECT_EQ(m.checkpoint_slot, expect.checkpoint_slot);
        EXPECT_EQ(m.node == RadixCache::kRoot, m.tokens == 0);
        if (m.tokens > 0 && uniform(0, 2) == 0) {
          cache.Lock(m.node);
          ref.Lock(t, m.tokens / kPs, +1);
          held.push_back({m.node, t, m.tokens / kPs});
        }
      } else if (kind == 7) {
        if (held.empty()) continue;
        const size_t i = uniform(0, static_cast<int>(held.size()) - 1);
        cache.Unlock(held[i].node);
        ref.Lock(held[i].tokens, held[i].pages, -1);
        held.erase(held.begin() + i);
      } else if (kind == 8) {
        evict_pages(p.kv.free_pages() + uniform(0, 12));
      } else {
        evict_slots(p.state.free_slots() + uniform(0, 3));
      }
      ASSERT_NO_FATAL_FAILURE(ref.ExpectStatsEqual(cache.stats()));
      ASSERT_EQ(p.kv.used_pages(), cache.stats().cached_pages) << "op " << op;
      ASSERT_EQ(p.state.used_slots(), cache.stats().checkpoint_slots) << "op " << op;
      if (::testing::Test::HasFailure()) return;
    }
    // Everything held survives a full eviction; then it all goes.
    evict_pages(kMax);
    evict_slots(kMax);
    ref.ExpectStatsEqual(cache.stats());
    for (const Held& h : held) {
      const RadixCache::Match expect = ref.Match(h.tokens, h.pages * kPs);
      const RadixCache::Match m = cache.MatchPrefix(h.tokens, h.pages * kPs);
      EXPECT_EQ(m.pages, expect.pages);
      EXPECT_EQ(m.checkpoint_slot, expect.checkpoint_slot);
      if (!needs_state) {
        EXPECT_EQ(m.tokens, h.pages * kPs);
      }
    }
    for (const Held& h : held) cache.Unlock(h.node);
    EXPECT_EQ(cache.stats().evictable_pages, cache.stats().cached_pages);
    EXPECT_EQ(cache.stats().evictable_slots, cache.stats().checkpoint_slots);
  }
  ExpectPoolsWhole(&p);
}

TEST(RadixCacheTest, RandomOpsMatchReference) {
  for (uint32_t seed = 1; seed <= 60; ++seed) {
    RunRandom(seed, /*needs_state=*/false);
    RunRandom(seed, /*needs_state=*/true);
    if (::testing::Test::HasFailure()) return;
  }
}

}  // namespace
}  // namespace sy::engine
