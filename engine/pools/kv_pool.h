// File: engine/pools/kv_pool.h
//
// KvPool: one device's paged KV cache. It owns the storage for
// `num_pages` pages; a page holds the cache of `page_size` consecutive token
// positions of one request, for every full-attention layer (linear-attention
// layers keep their history in the StatePool instead, state_pool.h). Page ids
// are device-local ints in [0, num_pages).
//
// A token's entry in one layer is either K and V of kv_heads * head_dim each
// (MHA) or, when latent_dim > 0, one compressed MLA latent of latent_dim
// floats (kv_lora_rank + rope dims, seed 001 §3.3): no per-head K or V.
//
// The scheduler allocates and frees pages (admission is limited by free
// pages); the model runner reads and writes K/V through a request's page table.
// A page table maps position p to page pages[p / page_size], slot p % page_size.
//
// Shards (tensor-parallel attention, seed 003 §4.1; docs/PARALLELISM.md):
// with SetShards(P) the same storage is read as P * num_pages pages whose
// rows are 1/P as wide: device r's rows hold block r of every row (MHA: KV
// heads [r kv_heads/P, (r+1) kv_heads/P); MLA: latent columns
// [r latent_dim/P, (r+1) latent_dim/P)), and storage page d * num_pages + p
// holds block r of page p of device d's pool. Allocation is untouched: ids
// from Allocate stay in [0, num_pages) and still count device d's share of
// the cluster's pages, so page tables survive a switch unchanged. Moving the
// contents between the two readings is engine/parallelism/state_reshard.h's
// job; SetShards itself moves nothing.
//
// Thread-safety: Allocate/Free/counters are called by the scheduler thread
// only, between steps. K/V reads and writes happen on the owning device's
// worker thread during a step. The two never overlap (a step is a barrier).
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"

namespace sy::engine {

struct KvPoolOptions {
  int num_pages = 512;
  int page_size = 16;  // tokens per page; 16 keeps internal waste small for short prompts
  int layers = 0;      // full-attention layers
  int kv_heads = 0;    // MHA
  int head_dim = 0;    // MHA
  int latent_dim = 0;  // MLA: > 0 selects the latent layout (kv_heads/head_dim unused)
  // false: bookkeeping only (the simulated backend, engine/sim/): no storage
  // is allocated, so a pool the size of a real accelerator's costs nothing;
  // allocation, counters, SetShards, page_bytes() and bytes() (what the
  // pages would hold) work as usual. PageData/K/V/Latent then REQUIRE
  // storage (asserted).
  bool allocate_storage = true;
};

class KvPool {
 public:
  explicit KvPool(const KvPoolOptions& options);
  KvPool(const KvPool&) = delete;
  KvPool& operator=(const KvPool&) = delete;

  // Appends `n` page ids to *pages. RESOURCE_EXHAUSTED (and *pages unchanged)
  // if fewer than n pages are free.
  Status Allocate(int n, std::vector<int32_t>* pages);
  // REQUIRES: every id was returned by Allocate and not freed since.
  void Free(const std::vector<int32_t>& pages);

  int num_pages() const { return options_.num_pages; }
  int page_size() const { return options_.page_size; }
  // Pages Allocate may still hand out: capacity() less the used ones.
  int free_pages() const { return capacity_ - used_pages(); }
  int used_pages() const { return num_pages() - static_cast<int>(free_.size()); }

  // How many pages may be used at once; num_pages() unless lowered. A
  // layout that holds the same pages with more bytes per device (the
  // simulated TP layout replicating KV heads when they are fewer than the
  // devices, engine/sim/sim_runner.h) lowers it, so the scheduler, which
  // admits by free_pages(), cannot overfill the device. INVALID_ARGUMENT
  // unless 1 <= pages <= num_pages(); FAILED_PRECONDITION (unchanged) if
  // more than `pages` are in use.
  Status SetCapacity(int pages);
  int capacity() const { return capacity_; }
  static int PagesFor(int tokens, int page_size) { return (tokens + page_size - 1) / page_size; }

  // Ids of pages handed out and not freed, ascending.
  std::vector<int32_t> UsedPages() const;

  // INVALID_ARGUMENT unless shards >= 1 and it divides the row (kv_heads *
  // head_dim, or latent_dim; the caller checks that it also divides the
  // heads). Changes how storage is read (above), not its contents.
  Status SetShards(int shards);
  int shards() const { return shards_; }
  // Pages the storage holds under the current reading: num_pages * shards.
  int storage_pages() const { return options_.num_pages * shards_; }
  // Floats of one row (one token's K, V or latent) under the current reading.
  int64_t row_floats() const { return row_ / shards_; }
  // Rows per token per layer: 2 (K, V) or 1 (latent).
  int entries() const { return entries_; }
  int layers() const { return options_.layers; }
  // Storage page `page` (< storage_pages()) as one contiguous block of
  // page_floats() floats: [layers][entries][page_size][row_floats()].
  // PageData, K, V and Latent REQUIRE: has_storage().
  float* PageData(int page);
  const float* PageData(int page) const;
  int64_t page_floats() const;

  // Pointer to the row_floats() floats of K (or V) for `layer` at slot `slot`
  // of storage page `page` (< storage_pages()): all kv_heads * head_dim of
  // them unsharded. REQUIRES: MHA layout (latent_dim == 0).
  float* K(int page, int layer, int slot);
  float* V(int page, int layer, int slot);
  const float* K(int page, int layer, int slot) const;
  const float* V(int page, int layer, int slot) const;
  // The row_floats() floats of one token's MLA latent (all latent_dim of them
  // unsharded). REQUIRES: latent_dim > 0.
  float* Latent(int page, int layer, int slot);
  const float* Latent(int page, int layer, int slot) const;
  // Bytes one allocated page holds (all layers, all shards).
  int64_t page_bytes() const;
  // Bytes of the whole pool (num_pages x page_bytes()), allocated or not.
  int64_t bytes() const { return static_cast<int64_t>(options_.num_pages) * page_bytes(); }
  // False for a bookkeeping-only pool (KvPoolOptions::allocate_storage).
  bool has_storage() const { return options_.allocate_storage; }

 private:
  size_t Offset(int page, int layer, int kv, int slot) const;

  KvPoolOptions options_;
  int entries_ = 2;  // rows per token per layer: K and V, or the latent
  int64_t row_ = 0;  // floats per unsharded row: kv_heads * head_dim, or latent_dim
  int shards_ = 1;
  int capacity_ = 0;  // <= num_pages
  std::vector<float> storage_;
  std::vector<int32_t> free_;  // LIFO free list
};

}  // namespace sy::engine
