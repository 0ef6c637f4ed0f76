// File: engine/scheduler/prefix_sharing.cc
//
// The Scheduler's admission and its use of the per-device prefix caches
// (scheduler.h "Prefix cache"): where a request goes, what it reuses, and
// when its computed prefix is published.
#include <algorithm>
#include <cassert>
#include <limits>
#include <span>
#include <vector>

#include "engine/scheduler/scheduler.h"

namespace sy::engine {
namespace {

std::vector<int32_t> TokensOf(const Request& r, int len) {
  std::vector<int32_t> t;
  t.reserve(len);
  for (int p = 0; p < len; ++p) t.push_back(r.token_at(p));
  return t;
}

}  // namespace

int Scheduler::CachedTokens(const Request& r) const {
  if (!prefix_cache()) return 0;
  const int total = r.total_len();
  // Called for waiting requests every step (pending_prefill_tokens): most
  // have generated nothing, and their prompt is the whole sequence.
  std::vector<int32_t> copy;
  std::span<const int32_t> tokens = r.spec.prompt;
  if (!r.generated.empty()) {
    copy = TokensOf(r, total);
    tokens = copy;
  }
  int best = 0;
  for (const auto& cache : caches_) best = std::max(best, cache->CachedPrefix(tokens, total - 1));
  return best;
}

int Scheduler::AvailablePages(int d) const {
  const int evictable = prefix_cache() ? caches_[d]->stats().evictable_pages : 0;
  return pools_[d]->free_pages() + evictable;
}

int Scheduler::AvailableSlots(int d) const {
  if (!needs_slot(d)) return 0;
  const int evictable = prefix_cache() ? caches_[d]->stats().evictable_slots : 0;
  return state_pools_[d]->free_slots() + evictable;
}

bool Scheduler::Fits(const Request& r, int d, int hit_pages) const {
  if (needs_slot(d) && AvailableSlots(d) < 1) return false;
  const int need = KvPool::PagesFor(r.total_len(), page_size_) - hit_pages;
  const int reserve = running_on(d) == 0 ? 0 : options_.admission_reserve_pages;
  return AvailablePages(d) - need >= reserve;
}

Scheduler::Placement Scheduler::PickDevice(const Request& r) {
  struct Candidate {
    int device;
    int avail;
    RadixCache::Match hit;
  };
  std::vector<Candidate> cands;
  const int total = r.total_len();
  const std::vector<int32_t> tokens = prefix_cache() ? TokensOf(r, total) : std::vector<int32_t>{};
  for (int d = 0; d < devices(); ++d) {
    RadixCache::Match hit;
    if (prefix_cache()) hit = caches_[d]->MatchPrefix(tokens, total - 1);
    // Before pinning, the hit's own pages still count as evictable: a
    // first filter only, checked exactly below.
    if (!Fits(r, d, static_cast<int>(hit.pages.size()))) continue;
    cands.push_back({d, AvailablePages(d), std::move(hit)});
  }
  int best_hit = 0;
  for (const Candidate& c : cands) best_hit = std::max(best_hit, c.hit.tokens);
  const bool affinity = best_hit > 0 && best_hit >= options_.cache_threshold * total;
  std::stable_sort(cands.begin(), cands.end(), [&](const Candidate& a, const Candidate& b) {
    if (affinity && a.hit.tokens != b.hit.tokens) return a.hit.tokens > b.hit.tokens;
    if (a.avail != b.avail) return a.avail > b.avail;
    return running_on(a.device) < running_on(b.device);
  });
  for (Candidate& c : cands) {
    if (PrefillRoom(c.device) == 0) {
      // Its group has prefilled its share this step: a device the cache
      // decides is waited for, any other is passed over.
      if (affinity && c.hit.tokens == best_hit) return {};
      continue;
    }
    // Pin first: what the hit reuses must not count as evictable room.
    const bool pin = c.hit.tokens > 0;
    if (pin) caches_[c.device]->Lock(c.hit.node);
    if (Fits(r, c.device, static_cast<int>(c.hit.pages.size()))) {
      return {.device = c.device, .hit = std::move(c.hit)};
    }
    if (pin) caches_[c.device]->Unlock(c.hit.node);
  }
  return {};
}

void Scheduler::Admit(Request* r, Placement p) {
  const int d = p.device;
  r->device = d;
  r->pages.clear();
  r->computed = 0;
  r->cache_hit_tokens = p.hit.tokens;
  if (p.hit.tokens > 0) {
    r->cache_node = p.hit.node;  // pinned by PickDevice
    r->pages = std::move(p.hit.pages);
    r->cached_len = r->computed = p.hit.tokens;
    if (needs_slot(d)) r->state_copy_from = p.hit.checkpoint_slot;
  }
  hit_tokens_[d] += p.hit.tokens;
  query_tokens_[d] += r->total_len();
  KvPool* pool = pools_[d];
  const int need = KvPool::PagesFor(r->total_len(), page_size_) - static_cast<int>(r->pages.size());
  if (prefix_cache() && pool->free_pages() < need) caches_[d]->EvictPages(need);
  const Status s = pool->Allocate(need, &r->pages);
  assert(s.ok());  // PickDevice counted free plus evictable pages
  s.IgnoreError();
  if (needs_slot(d)) {
    StatePool* sp = state_pools_[d];
    if (prefix_cache() && sp->free_slots() == 0) caches_[d]->EvictSlots(1);
    Result<int> slot = sp->Allocate();
    assert(slot.ok());  // PickDevice counted free plus evictable slots
    r->state_slot = slot.ok() ? *slot : -1;
  }
}

int Scheduler::PlanCheckpoint(Request* r, int n) {
  if (!prefix_cache()) return 0;
  const int boundary = (r->computed + n) / page_size_ * page_size_;
  if (boundary <= r->computed || boundary <= r->cached_len) return 0;
  if (!needs_slot(r->device)) return boundary;
  if (r->ckpt_slot < 0) {
    // Only a slot nobody waits for: a checkpoint is worth less than admitting
    // the next request, and a skipped boundary costs only a later hit.
    StatePool* sp = state_pools_[r->device];
    const int keep = waiting_.empty() ? 0 : 1;
    if (sp->free_slots() <= keep) return 0;
    Result<int> slot = sp->Allocate();
    if (!slot.ok()) return 0;
    r->ckpt_slot = *slot;
  }
  return boundary;
}

void Scheduler::CommitCheckpoint(Request* r, int ckpt_len, bool decode) {
  if (needs_slot(r->device)) {
    if (r->ckpt_slot < 0) return;
    r->ckpt_len = ckpt_len;
    // A prefill chunk's checkpoint is published at once (a request behind the
    // same system prompt can hit it while this one still runs); a decode
    // checkpoint is overwritten at the next boundary and published at the end.
    if (!decode) Publish(r, ckpt_len, /*with_slot=*/true);
  } else if (!decode) {
    Publish(r, ckpt_len, /*with_slot=*/false);
  }
}

void Scheduler::Publish(Request* r, int len, bool with_slot) {
  assert(len % page_size_ == 0 && len <= r->computed && len > r->cached_len);
  RadixCache& cache = *caches_[r->device];
  const std::vector<int32_t> tokens = TokensOf(*r, len);
  const std::span<const int32_t> pages(r->pages.data(), static_cast<size_t>(len / page_size_));
  RadixCache::Inserted ins = cache.Insert(tokens, pages, with_slot ? r->ckpt_slot : -1);
  if (with_slot) {
    r->ckpt_slot = -1;  // the tree's now
    r->ckpt_len = 0;
  }
  cache.Lock(ins.node);
  if (r->cache_node >= 0) cache.Unlock(r->cache_node);
  r->cache_node = ins.node;
  std::copy(ins.pages.begin(), ins.pages.end(), r->pages.begin());
  r->cached_len = len;
}

int Scheduler::FlushCache() {
  int freed = 0;
  for (int d = 0; d < static_cast<int>(caches_.size()); ++d) {
    freed += caches_[d]->EvictPages(std::numeric_limits<int>::max());
    if (needs_slot(d)) caches_[d]->EvictSlots(std::numeric_limits<int>::max());
  }
  return freed;
}

int Scheduler::EvictCachePages(int device, int pages) {
  if (!prefix_cache() || pages <= 0) return 0;
  // RadixCache::EvictPages takes the free pages wanted, not a count.
  return caches_[device]->EvictPages(pools_[device]->free_pages() + pages);
}

CacheStats Scheduler::cache_stats(int device) const {
  CacheStats s;
  if (prefix_cache()) s.tree = caches_[device]->stats();
  s.hit_tokens = hit_tokens_[device];
  s.query_tokens = query_tokens_[device];
  return s;
}

int64_t Scheduler::cache_hit_tokens_total() const {
  int64_t n = 0;
  for (int64_t h : hit_tokens_) n += h;
  return n;
}

}  // namespace sy::engine
