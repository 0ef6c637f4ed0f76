#include "engine/pools/kv_pool.h"

#include <cassert>

namespace sy::engine {

KvPool::KvPool(const KvPoolOptions& options)
    : options_(options),
      entries_(options.latent_dim > 0 ? 1 : 2),
      row_(options.latent_dim > 0 ? options.latent_dim
                                  : static_cast<int64_t>(options.kv_heads) * options.head_dim),
      capacity_(options.num_pages) {
  assert(options.num_pages > 0 && options.page_size > 0 && options.layers > 0 && row_ > 0);
  if (options.allocate_storage) {
    storage_.assign(static_cast<size_t>(options.num_pages) * options.layers * entries_ *
                        options.page_size * row_,
                    0.0f);
  }
  free_.reserve(options.num_pages);
  // Highest id first so that Allocate hands out 0, 1, 2, ... on a fresh pool.
  for (int p = options.num_pages - 1; p >= 0; --p) free_.push_back(p);
}

Status KvPool::Allocate(int n, std::vector<int32_t>* pages) {
  if (n < 0) return InvalidArgument("cannot allocate a negative number of pages");
  if (n > free_pages()) {
    return ResourceExhausted("KV pool has " + std::to_string(free_pages()) + " free pages, " +
                             std::to_string(n) + " requested");
  }
  for (int i = 0; i < n; ++i) {
    pages->push_back(free_.back());
    free_.pop_back();
  }
  return Status::Ok();
}

void KvPool::Free(const std::vector<int32_t>& pages) {
  for (int32_t p : pages) {
    assert(p >= 0 && p < options_.num_pages);
    free_.push_back(p);
  }
  assert(static_cast<int>(free_.size()) <= num_pages() && "page freed twice");
}

Status KvPool::SetCapacity(int pages) {
  if (pages < 1 || pages > num_pages()) {
    return InvalidArgument("KV pool capacity must be in [1, " + std::to_string(num_pages()) +
                           "], got " + std::to_string(pages));
  }
  if (used_pages() > pages) {
    return FailedPrecondition("KV pool has " + std::to_string(used_pages()) +
                              " pages in use, more than a capacity of " + std::to_string(pages));
  }
  capacity_ = pages;
  return Status::Ok();
}

std::vector<int32_t> KvPool::UsedPages() const {
  std::vector<char> is_free(options_.num_pages, 0);
  for (int32_t p : free_) is_free[p] = 1;
  std::vector<int32_t> used;
  used.reserve(options_.num_pages - free_.size());
  for (int p = 0; p < options_.num_pages; ++p) {
    if (!is_free[p]) used.push_back(p);
  }
  return used;
}

Status KvPool::SetShards(int shards) {
  if (shards < 1 || row_ % shards != 0) {
    return InvalidArgument("cannot shard KV rows of " + std::to_string(row_) + " floats " +
                           std::to_string(shards) + " ways");
  }
  shards_ = shards;
  return Status::Ok();
}

int64_t KvPool::page_floats() const {
  return static_cast<int64_t>(options_.layers) * entries_ * options_.page_size * row_floats();
}

float* KvPool::PageData(int page) {
  assert(has_storage());
  assert(page >= 0 && page < storage_pages());
  return &storage_[static_cast<size_t>(page) * page_floats()];
}

const float* KvPool::PageData(int page) const {
  assert(has_storage());
  assert(page >= 0 && page < storage_pages());
  return &storage_[static_cast<size_t>(page) * page_floats()];
}

size_t KvPool::Offset(int page, int layer, int kv, int slot) const {
  assert(has_storage());
  assert(page >= 0 && page < storage_pages() && layer >= 0 && layer < options_.layers);
  assert(slot >= 0 && slot < options_.page_size);
  return ((((static_cast<size_t>(page) * options_.layers + layer) * entries_ + kv) *
           options_.page_size) +
          slot) *
         row_floats();
}

int64_t KvPool::page_bytes() const {
  return static_cast<int64_t>(options_.layers) * entries_ * options_.page_size * row_ *
         static_cast<int64_t>(sizeof(float));
}

float* KvPool::Latent(int page, int layer, int slot) {
  assert(entries_ == 1);
  return &storage_[Offset(page, layer, 0, slot)];
}
const float* KvPool::Latent(int page, int layer, int slot) const {
  assert(entries_ == 1);
  return &storage_[Offset(page, layer, 0, slot)];
}

float* KvPool::K(int page, int layer, int slot) {
  assert(entries_ == 2);
  return &storage_[Offset(page, layer, 0, slot)];
}
float* KvPool::V(int page, int layer, int slot) {
  assert(entries_ == 2);
  return &storage_[Offset(page, layer, 1, slot)];
}
const float* KvPool::K(int page, int layer, int slot) const {
  assert(entries_ == 2);
  return &storage_[Offset(page, layer, 0, slot)];
}
const float* KvPool::V(int page, int layer, int slot) const {
  assert(entries_ == 2);
  return &storage_[Offset(page, layer, 1, slot)];
}

}  // namespace sy::engine
