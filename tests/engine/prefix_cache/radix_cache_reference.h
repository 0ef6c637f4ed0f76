// File: tests/engine/prefix_cache/radix_cache_reference.h
//
// A brute-force model of RadixCache for the randomized test: one entry per
// cached page-aligned prefix (no tree), with the same LRU ticks, path locks
// and node boundaries as the real cache, so eviction order, match results
// and every stats() counter can be predicted independently.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "engine/prefix_cache/radix_cache.h"

namespace sy::engine::radix_reference {

using Tokens = std::vector<int32_t>;

// Page-by-page reference: one entry per cached page-aligned prefix, with the
// same LRU ticks, path locks and node boundaries (where the tree has a node
// end: insert ends, branch points, non-state match ends) as the tree.
class Reference {
 public:
  struct Entry {
    int32_t page = -1;
    int ckpt = -1;
    int lock = 0;
    uint64_t tick = 0;
    bool boundary = false;
    int children = 0;
  };

  Reference(int page_size, bool needs_state) : ps_(page_size), needs_state_(needs_state) {}

  Tokens Prefix(const Tokens& t, int pages) const {
    return Tokens(t.begin(), t.begin() + pages * ps_);
  }
  int Existing(const Tokens& t, int max_pages) const {
    int k = 0;
    while (k < max_pages && map_.count(Prefix(t, k + 1))) ++k;
    return k;
  }
  const Entry& at(const Tokens& t, int pages) const { return map_.at(Prefix(t, pages)); }

  // Returns the tree's pages after the insert; *kept = caller pages kept.
  std::vector<int32_t> Insert(const Tokens& t, const std::vector<int32_t>& pages, int ckpt,
                              int* kept) {
    const int n = static_cast<int>(pages.size());
    *kept = 0;
    if (n == 0) return {};
    ++tick_;
    std::vector<int32_t> out;
    for (int k = 1; k <= n; ++k) {
      auto [it, fresh] = map_.try_emplace(Prefix(t, k));
      if (fresh) {
        it->second.page = pages[k - 1];
        ++*kept;
        if (k > 1) {
          Entry& parent = map_.at(Prefix(t, k - 1));
          ++parent.children;
          if (*kept == 1) parent.boundary = true;  // the new branch hangs here
        }
      }
      it->second.tick = tick_;
      out.push_back(it->second.page);
    }
    Entry& end = map_.at(Prefix(t, n));
    end.boundary = true;
    if (ckpt >= 0 && end.ckpt < 0) end.ckpt = ckpt;
    return out;
  }

  RadixCache::Match Match(const Tokens& t, int limit) {
    int k = Existing(t, limit / ps_);
    if (!needs_state_ && k > 0) map_.at(Prefix(t, k)).boundary = true;
    while (needs_state_ && k > 0 && map_.at(Prefix(t, k)).ckpt < 0) --k;
    RadixCache::Match m;
    if (k == 0) return m;
    ++tick_;
    for (int j = 1; j <= k; ++j) {
      Entry& e = map_.at(Prefix(t, j));
      e.tick = tick_;
      m.pages.push_back(e.page);
    }
    m.tokens = k * ps_;
    m.checkpoint_slot = map_.at(Prefix(t, k)).ckpt;
    return m;
  }

  void Lock(const Tokens& t, int pages, int delta) {
    for (int j = 1; j <= pages; ++j) map_.at(Prefix(t, j)).lock += delta;
  }

  int EvictPages(int free_before, int target) {
    int freed = 0;
    while (free_before + freed < target) {
      auto best = Oldest([](const Entry& e) { return e.children == 0 && e.lock == 0; });
      if (best == map_.end()) break;
      freed += RemoveNode(best->first);
    }
    return freed;
  }

  int EvictSlots(int free_before, int target) {
    int freed = 0;
    while (free_before + freed < target) {
      auto best = Oldest([](const Entry& e) { return e.ckpt >= 0 && e.lock == 0; });
      if (best == map_.end()) break;
      best->second.ckpt = -1;
      ++freed;
      ++evicted_slots_;
      Tokens key = best->first;
      while (needs_state_ && !key.empty()) {
        const Entry& e = map_.at(key);
        if (e.children > 0 || e.ckpt >= 0 || e.lock > 0) break;
        Tokens upper = UpperBoundary(key);
        RemoveNode(key);
        key = std::move(upper);
      }
    }
    return freed;
  }

  void ExpectStatsEqual(const RadixCacheStats& s) const {
    RadixCacheStats r;
    for (const auto& [key, e] : map_) {
      r.nodes += e.boundary;
      ++r.cached_pages;
      r.checkpoint_slots += e.ckpt >= 0;
      r.evictable_pages += e.lock == 0;
      r.evictable_slots += e.lock == 0 && e.ckpt >= 0;
    }
    EXPECT_EQ(s.nodes, r.nodes);
    EXPECT_EQ(s.cached_pages, r.cached_pages);
    EXPECT_EQ(s.checkpoint_slots, r.checkpoint_slots);
    EXPECT_EQ(s.evictable_pages, r.evictable_pages);
    EXPECT_EQ(s.evictable_slots, r.evictable_slots);
    EXPECT_EQ(s.evicted_pages, evicted_pages_);
    EXPECT_EQ(s.evicted_slots, evicted_slots_);
  }

 private:
  using Map = std::map<Tokens, Entry>;

  template <typename Pred>
  Map::iterator Oldest(Pred pred) {
    auto best = map_.end();
    for (auto it = map_.begin(); it != map_.end(); ++it) {
      if (!pred(it->second)) continue;
      // Older first; on a tie (one path) the deeper first, as the tree does.
      if (best == map_.end() || it->second.tick < best->second.tick ||
          (it->second.tick == best->second.tick && it->first.size() > best->first.size())) {
        best = it;
      }
    }
    return best;
  }

  // The key of the nearest boundary above `key` (empty: the root).
  Tokens UpperBoundary(Tokens key) const {
    do key.resize(key.size() - ps_);
    while (!key.empty() && !map_.at(key).boundary);
    return key;
  }

  // Removes the node ending at `key` (a childless boundary): its entries up to
  // the boundary above. Returns pages removed.
  int RemoveNode(const Tokens& key) {
    const Tokens upper = UpperBoundary(key);
    int n = 0;
    for (Tokens k = key; k.size() > upper.size(); k.resize(k.size() - ps_)) {
      if (map_.at(k).ckpt >= 0) ++evicted_slots_;
      map_.erase(k);
      ++n;
    }
    if (!upper.empty()) --map_.at(upper).children;
    evicted_pages_ += n;
    return n;
  }

  int ps_;
  bool needs_state_;
  Map map_;
  uint64_t tick_ = 0;
  int64_t evicted_pages_ = 0;
  int64_t evicted_slots_ = 0;
};

}  // namespace sy::engine::radix_reference
