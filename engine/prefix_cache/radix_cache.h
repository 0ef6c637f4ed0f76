// File: engine/prefix_cache/radix_cache.h
//
// RadixCache: one data-parallel rank's (device's) prefix cache over the
// hybrid memory pools (seed 002 §2.1, seed 000 "Radix cache over the hybrid
// memory pools"). A radix tree over token ids whose edges are whole pages:
// every node covers a page-aligned run of tokens and owns the KvPool pages
// holding their KV, so a hit reuses pages by reference, never by copy.
// Separate caches per device are what "keys include the rank" means here: a
// request can only reuse pages that live on its own home device.
//
// Linear-attention layers make a KV hit insufficient: the recurrent state at
// the hit boundary must come with it. A node may therefore own one
// checkpoint slot of the device's StatePool holding the state after exactly
// the node's end position (a "checkpoint"). With `needs_state`, a match is
// the deepest matched node that has a checkpoint; without it (no linear
// layers), the deepest matched page. Checkpoint slots are tree-owned and
// never written once inserted: a request that hits copies the checkpoint
// into its own working slot (copy-on-write, done by the model runner).
//
// Ownership: pages and slots passed to Insert belong to the cache from then
// on (duplicates of what it already holds are freed at once); the cache
// frees them on eviction, Clear or destruction. Lock pins a node and its
// ancestors (pages and checkpoints) while a request reads them.
//
//   RadixCache cache({.page_size = 16, .needs_state = true}, &kv, &state);
//   RadixCache::Match m = cache.MatchPrefix(tokens, /*limit=*/tokens.size() - 1);
//   cache.Lock(m.node);                      // request now reads m.pages
//   ... request computes tokens [m.tokens, B) into its own pages ...
//   RadixCache::Inserted ins = cache.Insert(tokens_0_B, pages_0_B, ckpt_slot);
//   cache.Lock(ins.node); cache.Unlock(m.node);
//   request's page table [0, B) := ins.pages  (the tree's copies)
//   ... on finish: cache.Unlock(ins.node)
//   cache.EvictPages(n);                     // LRU, unlocked leaves first
//
// Eviction is least-recently-used over unlocked nodes: EvictPages frees
// whole leaves (their pages and checkpoint), EvictSlots drops checkpoints
// (of internal nodes too; a needs_state leaf left without a checkpoint and
// without children serves no hit and is evicted with it, and so are its
// ancestors left the same way). "Used" is a tick taken once per MatchPrefix
// hit or Insert and stamped on its whole root path (no clocks); on equal
// ticks (only nodes on one path) the deeper node goes first.
//
// Node handles: a NodeId indexes the cache's node table and stays valid while
// its node lives; a locked node always lives, ids of evicted nodes are
// reused. Insert and MatchPrefix may split a node at a page boundary: the
// handle keeps denoting the node ending where it did (with its checkpoint),
// the new upper part gets a new id and inherits the lock count, so locks held
// across a split stay balanced. Nodes are never re-merged after an eviction.
//
// Thread-safety: single-threaded; used by the scheduler between steps, like
// the pools it draws from.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/pools/kv_pool.h"
#include "engine/pools/state_pool.h"

namespace sy::engine {

struct RadixCacheOptions {
  int page_size = 16;
  // True for hybrid models: a hit must end on a node with a checkpoint slot.
  bool needs_state = false;
};

struct RadixCacheStats {
  int nodes = 0;              // excluding the root
  int cached_pages = 0;       // pages owned by the tree
  int64_t cached_tokens = 0;  // cached_pages * page_size
  int checkpoint_slots = 0;   // state slots owned by the tree
  int evictable_pages = 0;    // pages EvictPages could free now (those of unlocked nodes)
  int evictable_slots = 0;    // slots EvictSlots could free now (those of unlocked nodes)
  int64_t evicted_pages = 0;  // since construction
  int64_t evicted_slots = 0;
};

class RadixCache {
 public:
  // Opaque node handle; kRoot is the empty prefix (always present, never evicted).
  using NodeId = int32_t;
  static constexpr NodeId kRoot = 0;

  struct Match {
    int tokens = 0;              // reusable prefix length: a multiple of page_size, <= limit
    std::vector<int32_t> pages;  // tokens / page_size tree-owned page ids, in order
    int checkpoint_slot = -1;    // needs_state and tokens > 0: state after `tokens` tokens
    NodeId node = kRoot;         // the node ending at `tokens` (kRoot on a miss)
  };

  struct Inserted {
    NodeId node = kRoot;         // the node ending at the inserted length
    std::vector<int32_t> pages;  // the tree's pages for the whole inserted prefix
    int new_pages = 0;           // how many of the caller's pages the tree kept
  };

  // REQUIRES: page_size >= 1 and equal to kv's; kv outlives the cache; state
  // outlives it and is non-null when needs_state.
  RadixCache(const RadixCacheOptions& options, KvPool* kv, StatePool* state);
  // Frees every page and slot the tree owns. REQUIRES: no node is locked.
  ~RadixCache();
  RadixCache(const RadixCache&) = delete;
  RadixCache& operator=(const RadixCache&) = delete;

  // The longest reusable prefix of tokens[0, limit) (limit <= tokens.size()),
  // in whole pages. Without needs_state, the deepest matched page boundary;
  // a node is split there if the match ends inside its edge, so `node` ends
  // exactly at `tokens`. With needs_state, the deepest matched node that has
  // a checkpoint (no split). checkpoint_slot is that node's checkpoint (-1
  // if it has none, possible only without needs_state). Marks the path to
  // `node` as recently used (a miss marks nothing). Does not lock.
  Match MatchPrefix(std::span<const int32_t> tokens, int limit);
  // MatchPrefix(tokens, limit).tokens as the tree stands, without its side
  // effects (no split, no use mark): what a request queued now would reuse
  // if admitted now. Cheap enough to ask every step for the queue's head.
  int CachedPrefix(std::span<const int32_t> tokens, int limit) const;

  // Takes tokens [0, pages.size() * page_size) with their pages, and
  // optionally (checkpoint_slot >= 0) the state after that many tokens.
  // Splits nodes at page boundaries as needed. Pages for a prefix the tree
  // already holds, and a checkpoint where the end node already has one, are
  // freed to their pools; the caller must switch its page table to
  // Inserted::pages. A page id equal to the tree's own page at that position
  // (a page table rewritten from an earlier Match or Insert) and a slot equal
  // to the end node's own checkpoint are kept, not freed. With no pages the
  // result is kRoot and a given slot is freed (the root holds no state).
  // Marks the inserted path as recently used.
  // REQUIRES: tokens.size() >= pages.size() * page_size; state non-null if
  // checkpoint_slot >= 0; the caller owned the pages and slot and stops
  // owning them now.
  Inserted Insert(std::span<const int32_t> tokens, std::span<const int32_t> pages,
                  int checkpoint_slot);

  // Pins `node` and its ancestors against eviction (counted: n Locks need n
  // Unlocks). REQUIRES: node is a live handle from MatchPrefix or Insert;
  // Unlock only after a matching Lock. Lock(kRoot) and Unlock(kRoot) do
  // nothing.
  void Lock(NodeId node);
  void Unlock(NodeId node);

  // Evicts unlocked leaves, least recently used first, until the KvPool has
  // `free_pages` free pages or nothing more can go (whole leaves, so it may
  // free more). A parent left childless becomes a candidate. Returns pages
  // freed. An evicted leaf's checkpoint goes too (counted in evicted_slots).
  int EvictPages(int free_pages);
  // Drops unlocked checkpoints, least recently used first, until the StatePool
  // has `free_slots` free slots or none can go. Returns slots freed.
  int EvictSlots(int free_slots);
  // Frees everything (not counted as eviction). REQUIRES: no node is locked.
  void Clear();

  // O(1): kept up to date by every operation.
  RadixCacheStats stats() const;
  const RadixCacheOptions& options() const { return options_; }

 private:
  struct Impl;  // node table, free ids, LRU tick, counters (radix_cache.cc)
  RadixCacheOptions options_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sy::engine
