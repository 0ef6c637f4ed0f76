// File: engine/scheduler/rehome.h
//
// Request re-homing for a TP -> EP switch (Moebius Algorithm 4, seed 003
// §4.2). Under TP every device holds its block of every request's state, so
// which device a request calls home is only bookkeeping until the engine
// goes back to EP, where the home device computes the request alone. Before
// that switch the engine re-balances the homes by KV load:
//
//   1. LongestFirstAssignment: requests sorted by KV pages, longest first,
//      each to the device with the least pages so far (greedy bin packing,
//      within 4/3 of optimal), respecting each device's capacity (pages it
//      can hold, state slots). The devices are interchangeable bins, so the
//      bins are then relabelled (over all P! labellings for P <= 8, else
//      greedily) to keep as many pages as possible on their current home:
//      a request moves only where the load balance needs it.
//   2. Scheduler::Rehome (scheduler.h) takes the moves: new pages and slot
//      on the new home, the old ones released, and returns the copies
//      (StateMove) the model runner must make before the next step
//      (ModelRunner::MoveRequestState: under TP, a local copy of every
//      device's block, storage page from * N + p -> to * N + p'; no
//      collective).
//
// Page tables of the requests that stay are untouched; a moved request's
// page table is rewritten on its new home (Algorithm 4 "update page table
// entry on rank r"). A moved request gives up its share of the prefix cache
// (its cached prefix becomes its own copy on the new home; the tree on the
// old home keeps the original) and an unpublished checkpoint.
//
// Thread-safety: pure functions and plain values.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/pools/state_move.h"  // StateMove: the copies Rehome returns

namespace sy::engine {

// One request as the assignment sees it.
struct RehomeItem {
  int64_t id = 0;
  int home = 0;   // current home device
  int pages = 0;  // KV pages it holds now (the load proxy, seed 003 §4.2)
  bool needs_slot = false;
};

// Per device: what a request re-homed there may take.
struct RehomeCapacity {
  int pages = 0;  // pages the device can hold for running requests (all of them, incl. stayers)
  int slots = 0;  // state slots likewise (ignored for items without needs_slot)
};

struct RehomePlan {
  std::vector<int> home;      // new home of items[i]
  std::vector<int64_t> load;  // pages per device after the plan
  int moved = 0;              // items whose home changes
  int64_t moved_pages = 0;    // their pages
  bool fits = true;           // false: no capacity-respecting plan found; `home` is the identity
};

// Algorithm 4 step 1 with the relabelling above. Deterministic (ties: lower
// device id, then the input order). `capacity` has one entry per device.
RehomePlan LongestFirstAssignment(const std::vector<RehomeItem>& items,
                                  const std::vector<RehomeCapacity>& capacity);

}  // namespace sy::engine
