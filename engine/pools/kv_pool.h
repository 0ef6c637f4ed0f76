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
  int free_pages() const { return static_cast<int>(free_.size()); }
  int used_pages() const { return num_pages() - free_pages(); }
  static int PagesFor(int tokens, int page_size) { return (tokens + page_size - 1) / page_size; }

  // Pointer to the kv_heads*head_dim floats of K (or V) for `layer` at slot
  // `slot` of page `page`. REQUIRES: MHA layout (latent_dim == 0).
  float* K(int page, int layer, int slot);
  float* V(int page, int layer, int slot);
  const float* K(int page, int layer, int slot) const;
  const float* V(int page, int layer, int slot) const;
  // The latent_dim floats of one token's MLA latent. REQUIRES: latent_dim > 0.
  float* Latent(int page, int layer, int slot);
  const float* Latent(int page, int layer, int slot) const;
  // Bytes one page holds (all layers).
  int64_t page_bytes() const;
  int64_t bytes() const { return static_cast<int64_t>(storage_.size()) * sizeof(float); }

 private:
  size_t Offset(int page, int layer, int kv, int slot) const;

  KvPoolOptions options_;
  int entries_ = 2;  // rows per token per layer: K and V, or the latent
  int64_t row_ = 0;  // floats per row: kv_heads * head_dim, or latent_dim
  std::vector<float> storage_;
  std::vector<int32_t> free_;  // LIFO free list
};

}  // namespace sy::engine
