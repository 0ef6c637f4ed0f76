// File: engine/scheduler/rehome_scheduler.cc
//
// The Scheduler's side of re-homing (scheduler.h "Re-homing", rehome.h):
// what the assignment sees, and applying its result to the pools, the
// prefix caches and the requests' page tables.
#include <string>
#include <utility>
#include <vector>

#include "engine/scheduler/scheduler.h"

namespace sy::engine {

std::vector<RehomeItem> Scheduler::RehomeItems() const {
  std::vector<RehomeItem> items;
  items.reserve(running_.size());
  for (const auto& r : running_) {
    items.push_back({.id = r->id,
                     .home = r->device,
                     .pages = static_cast<int>(r->pages.size()),
                     .needs_slot = r->state_slot >= 0});
  }
  return items;
}

std::vector<RehomeCapacity> Scheduler::RehomeCapacities() const {
  // Free and evictable room plus what the running requests there hold now.
  // Tree pages shared by several requests count once per request, and room
  // a mover leaves behind is not free until after every allocation (see
  // Rehome), so this can promise more than Rehome finds; such a mover stays.
  std::vector<RehomeCapacity> caps(devices());
  for (int d = 0; d < devices(); ++d) {
    caps[d].pages = AvailablePages(d);
    caps[d].slots = AvailableSlots(d);
  }
  for (const auto& r : running_) {
    caps[r->device].pages += static_cast<int>(r->pages.size());
    if (r->state_slot >= 0) ++caps[r->device].slots;
  }
  return caps;
}

Result<std::vector<StateMove>> Scheduler::Rehome(const std::vector<int>& new_home) {
  if (new_home.size() != running_.size()) {
    return InvalidArgument("rehome got " + std::to_string(new_home.size()) + " homes for " +
                           std::to_string(running_.size()) + " running requests");
  }
  for (size_t i = 0; i < new_home.size(); ++i) {
    if (new_home[i] < 0 || new_home[i] >= devices()) {
      return InvalidArgument("rehome: request " + std::to_string(running_[i]->id) +
                             " sent to device " + std::to_string(new_home[i]) + ", outside [0, " +
                             std::to_string(devices()) + ")");
    }
  }
  if (!planned_.empty()) {
    return FailedPrecondition("rehome between Plan() and Commit(): the planned batch reads " +
                              std::to_string(planned_.size()) + " page tables");
  }

  // 1. Every allocation first: the old pages and slots stay held, so no
  // destination can be another mover's source.
  struct Pending {
    Request* r;
    int to;
    std::vector<int32_t> pages;
    int slot;
  };
  std::vector<Pending> pending;
  for (size_t i = 0; i < running_.size(); ++i) {
    Request* r = running_[i].get();
    const int to = new_home[i];
    if (to == r->device) continue;
    // A pending checkpoint copy reads the old device's tree (only between
    // Plan and Commit); a slot must exist on both sides or on neither.
    if (r->state_copy_from >= 0 || (r->state_slot >= 0) != needs_slot(to)) continue;
    const int need = static_cast<int>(r->pages.size());
    KvPool* pool = pools_[to];
    if (prefix_cache() && pool->free_pages() < need) caches_[to]->EvictPages(need);
    Pending p{r, to, {}, -1};
    if (!pool->Allocate(need, &p.pages).ok()) continue;
    if (r->state_slot >= 0) {
      StatePool* sp = state_pools_[to];
      if (prefix_cache() && sp->free_slots() == 0) caches_[to]->EvictSlots(1);
      Result<int> slot = sp->Allocate();
      if (!slot.ok()) {
        pool->Free(p.pages);
        continue;
      }
      p.slot = *slot;
    }
    pending.push_back(std::move(p));
  }

  // 2. The copies, then 3. the old side released and the request re-pointed.
  std::vector<StateMove> moves;
  moves.reserve(pending.size());
  for (Pending& p : pending) {
    Request* r = p.r;
    const int from = r->device;
    moves.push_back({.request_id = r->id,
                     .from = from,
                     .to = p.to,
                     .from_pages = r->pages,
                     .to_pages = p.pages,
                     .from_slot = r->state_slot,
                     .to_slot = p.slot});
    // Pages past the tree-owned prefix are the request's own; the prefix
    // stays in the old device's tree, unpinned by this request.
    const std::vector<int32_t> own(r->pages.begin() + r->cached_len / page_size_, r->pages.end());
    pools_[from]->Free(own);
    if (r->cache_node >= 0) caches_[from]->Unlock(r->cache_node);
    r->cache_node = -1;
    r->cached_len = 0;
    if (r->state_slot >= 0) state_pools_[from]->Free(r->state_slot);
    // An unpublished checkpoint is dropped rather than copied: it only
    // serves a later hit, and the request publishes again on its new home.
    if (r->ckpt_slot >= 0) state_pools_[from]->Free(r->ckpt_slot);
    r->ckpt_slot = -1;
    r->ckpt_len = 0;
    r->device = p.to;
    r->pages = std::move(p.pages);
    r->state_slot = p.slot;
  }
  return moves;
}

}  // namespace sy::engine
