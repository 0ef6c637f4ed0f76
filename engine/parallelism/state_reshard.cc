// ReshardState; see state_reshard.h. The block arithmetic (how a page or a
// slot splits P ways, pack / place / checksum loops) is in state_blocks.h;
// this file is the protocol: agreement, metadata, the three voted phases and
// the rollback.
#include "engine/parallelism/state_reshard.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <limits>
#include <string>
#include <vector>

#include "base/stopwatch.h"
#include "engine/parallelism/state_blocks.h"

namespace sy::engine {

namespace {

using Clock = SteadyClock;
using state_blocks::BlockStore;

// The phases as state_reshard.h names them (FaultPlan's kPermute is pack).
std::string PhaseName(ReshardPhase phase) {
  switch (phase) {
    case ReshardPhase::kPermute:
      return "pack";
    case ReshardPhase::kExchange:
      return "exchange";
    case ReshardPhase::kPlace:
      return "place";
  }
  return "?";
}

// What every rank contributes to the agreement all-reduce, one float per
// rank per field (all small integers, exact as floats).
enum Field { kShards, kTarget, kRefused, kPages, kSlots, kUsedPages, kUsedSlots, kFields };

// OK iff both pools are in one reading that is EP (1) or TP (P) for this
// communicator.
Status CheckReading(const KvPool& kv, const StatePool& state, int p) {
  if (kv.shards() != 1 && kv.shards() != p) {
    return FailedPrecondition("the KV pool is read in " + std::to_string(kv.shards()) +
                              " shards, neither 1 (EP) nor " + std::to_string(p) + " (TP)");
  }
  if (state.shards() != kv.shards()) {
    return FailedPrecondition("the KV pool is read in " + std::to_string(kv.shards()) +
                              " shards and the state pool in " + std::to_string(state.shards()));
  }
  return Status::Ok();
}

// OK iff both pools can be read in P shards. The block split itself needs
// the recurrent state and every conv group divisible by P; then SetShards
// is asked (a trial that changes the reading only, restored at once), so
// nothing moves that the final SetShards would refuse.
Status CheckShardable(KvPool* kv, StatePool* state, int p) {
  const int64_t st = state->state_floats() * state->shards();
  const int64_t conv = state->conv_floats() * state->shards();
  const int groups = state->options().conv_groups;
  const bool conv_ok = conv == 0 || (groups > 0 && conv % groups == 0 && (conv / groups) % p == 0);
  if (state->slots() > 0 && (st % p != 0 || !conv_ok)) {
    return FailedPrecondition("the state pool's recurrent state (" + std::to_string(st) +
                              " floats) or its conv state (" + std::to_string(conv) +
                              " floats in conv_groups = " + std::to_string(groups) +
                              " equal groups) cannot be split " + std::to_string(p) + " ways");
  }
  const int kv_was = kv->shards(), state_was = state->shards();
  Status s = kv->SetShards(p).WithContext("KV pool");
  if (s.ok()) s = state->SetShards(p).WithContext("state pool");
  const bool restored = kv->SetShards(kv_was).ok() && state->SetShards(state_was).ok();
  assert(restored && "a reading the pool was in is always valid");
  (void)restored;
  if (!s.ok()) return FailedPrecondition(s.message());
  return Status::Ok();
}

// The pools as block stores, with every home's used ids (from metadata).
std::vector<BlockStore> MakeStores(KvPool* kv, StatePool* state, int p,
                                   std::vector<std::vector<int>> pages,
                                   std::vector<std::vector<int>> slots) {
  std::vector<BlockStore> stores;
  const int64_t row = kv->row_floats() * kv->shards();
  BlockStore k;
  k.base = kv->PageData(0);
  k.units = kv->num_pages();
  k.split = {.parts = p,
             .count = static_cast<int64_t>(kv->layers()) * kv->entries() * kv->page_size(),
             .period = row,
             .segments = {{0, row}}};
  k.used = std::move(pages);
  stores.push_back(std::move(k));
  if (state->slots() > 0) {
    const int64_t st = state->state_floats() * state->shards();
    const int64_t conv = state->conv_floats() * state->shards();
    BlockStore s;
    s.base = state->SlotData(0);
    s.units = state->slots();
    s.split = {.parts = p, .count = state->options().layers, .period = st + conv, .segments = {}};
    if (st > 0) s.split.segments.push_back({0, st});
    const int groups = conv > 0 ? state->options().conv_groups : 0;
    for (int g = 0; g < groups; ++g)
      s.split.segments.push_back({st + g * (conv / groups), conv / groups});
    s.used = std::move(slots);
    stores.push_back(std::move(s));
  }
  return stores;
}

// AllReduceSum of one failure flag per rank; the lowest failed rank or -1.
int Vote(int rank, bool failed, Communicator* comm, SpanRecorder* rec, StateReshardStats* stats) {
  const Clock::time_point t0 = Clock::now();
  std::vector<float> flags(comm->size(), 0.0f);
  flags[rank] = failed ? 1.0f : 0.0f;
  comm->AllReduceSum(rank, &flags, rec, "state_vote", -1);
  stats->vote_ms += MsSince(t0);
  for (int d = 0; d < comm->size(); ++d) {
    if (flags[d] != 0.0f) return d;
  }
  return -1;
}

}  // namespace

int64_t StateReshardScratch::bytes() const {
  int64_t n = 0;
  for (const auto* side : {&send, &recv}) {
    for (const std::vector<float>& v : *side) n += static_cast<int64_t>(v.capacity());
  }
  return n * static_cast<int64_t>(sizeof(float));
}

Result<StateReshardStats> ReshardState(int rank, ParallelMode target, KvPool* kv, StatePool* state,
                                       Communicator* comm, const FaultPlan* fault,
                                       SpanRecorder* rec, StateReshardScratch* scratch) {
  const Clock::time_point start = Clock::now();
  const int p = comm->size();
  const int target_shards = target == ParallelMode::kTP ? p : 1;
  const int shards = kv->shards();
  const bool noop = shards == target_shards;
  StateReshardStats stats;
  stats.from =
      noop ? target : (target == ParallelMode::kTP ? ParallelMode::kEP : ParallelMode::kTP);
  stats.to = target;
  const std::string what = "state reshard " + std::string(ParallelModeName(stats.from)) + "->" +
                           std::string(ParallelModeName(target));

  // Agreement: one all-reduce so every rank takes the same branch below and
  // no rank is left waiting in a collective the others skipped.
  Status local = CheckReading(*kv, *state, p);
  if (local.ok() && !noop) local = CheckShardable(kv, state, p);
  const std::vector<int32_t> my_pages = kv->UsedPages();
  const std::vector<int> my_slots = state->UsedSlots();
  std::vector<float> agree(static_cast<size_t>(kFields) * p, 0.0f);
  auto put = [&](Field f, int64_t v) { agree[f * p + rank] = static_cast<float>(v); };
  put(kShards, shards);
  put(kTarget, target == ParallelMode::kTP ? 1 : 0);
  put(kRefused, local.ok() ? 0 : 1);
  put(kPages, kv->num_pages());
  put(kSlots, state->slots());
  put(kUsedPages, static_cast<int64_t>(my_pages.size()));
  put(kUsedSlots, static_cast<int64_t>(my_slots.size()));
  {
    const Clock::time_point t0 = Clock::now();
    comm->AllReduceSum(rank, &agree, rec, "state_vote", -1);
    stats.vote_ms += MsSince(t0);
  }
  auto get = [&](Field f, int d) { return static_cast<int>(agree[f * p + d]); };
  for (int d = 0; d < p; ++d) {
    for (Field f : {kShards, kTarget, kPages, kSlots}) {
      if (get(f, d) != get(f, rank)) {
        return FailedPrecondition(what +
                                  ": ranks disagree on the pools' reading, the target or "
                                  "the pool sizes (rank " +
                                  std::to_string(d) + " differs from rank " + std::to_string(rank) +
                                  "); nothing moved");
      }
    }
  }
  for (int d = 0; d < p; ++d) {
    if (get(kRefused, d) == 0) continue;
    return FailedPrecondition(what + ": " +
                              (d == rank
                                   ? std::string(local.message())
                                   : "rank " + std::to_string(d) + " cannot shard its pools " +
                                         std::to_string(p) + " ways") +
                              "; nothing moved");
  }
  if (noop) {
    stats.total_ms = MsSince(start);
    return stats;
  }

  // Metadata: every home's used page and slot ids, ascending (the counts
  // came with the agreement).
  std::vector<std::vector<int>> pages(p), slots(p);
  {
    const Clock::time_point t0 = Clock::now();
    std::vector<float> mine, all;
    mine.reserve(my_pages.size() + my_slots.size());
    for (int32_t id : my_pages) mine.push_back(static_cast<float>(id));
    for (int id : my_slots) mine.push_back(static_cast<float>(id));
    comm->AllGather(rank, mine, &all, rec, "state_meta", -1);
    stats.metadata_ms = MsSince(t0);
    size_t at = 0;
    for (int d = 0; d < p; ++d) {
      const size_t np = static_cast<size_t>(get(kUsedPages, d)),
                   ns = static_cast<size_t>(get(kUsedSlots, d));
      if (at + np + ns > all.size()) break;
      for (size_t i = 0; i < np; ++i) pages[d].push_back(static_cast<int>(all[at++]));
      for (size_t i = 0; i < ns; ++i) slots[d].push_back(static_cast<int>(all[at++]));
    }
    // Every rank sees the same gather, so every rank returns here alike.
    if (at != all.size() || static_cast<int>(pages[rank].size()) != get(kUsedPages, rank)) {
      return Internal(what + ": the used-id gather returned " + std::to_string(all.size()) +
                      " ids, not the announced counts; nothing moved");
    }
  }
  const std::vector<BlockStore> stores =
      MakeStores(kv, state, p, std::move(pages), std::move(slots));
  stats.kv_pages = static_cast<int>(my_pages.size());
  stats.state_slots = static_cast<int>(my_slots.size());
  const bool to_tp = target == ParallelMode::kTP;
  auto checksum = [&](bool sharded) {
    return sharded ? state_blocks::ChecksumSharded(stores) : state_blocks::ChecksumEp(stores, rank);
  };
  stats.checksum_source = checksum(!to_tp);

  auto fails_at = [&](ReshardPhase ph) {
    return fault != nullptr && fault->part == SwitchPart::kState && fault->rank == rank &&
           fault->phase == ph;
  };
  std::string reason;  // this rank's own failure, if any
  auto failed_in = [&](ReshardPhase ph, int who, bool rolled_back) {
    return Unavailable(what + " failed in " + PhaseName(ph) + " (rank " + std::to_string(who) +
                       "): " + (who == rank ? reason : "reported by that rank") + "; " +
                       (rolled_back ? "rolled back, " : "nothing placed, ") +
                       "every used page and slot as before, the pools stay in the " +
                       std::string(ParallelModeName(stats.from)) + " reading");
  };
  const int64_t my_bytes =
      state_blocks::MessageFloats(stores, rank) * p * static_cast<int64_t>(sizeof(float));
  StateReshardScratch own;
  if (scratch == nullptr) scratch = &own;
  std::vector<std::vector<float>>& send = scratch->send;
  std::vector<std::vector<float>>& recv = scratch->recv;
  send.resize(p);
  recv.resize(p);

  // Pack: every block this rank sends is copied out before anything is
  // placed (the two readings share the storage).
  Clock::time_point t0 = Clock::now();
  bool failed = fails_at(ReshardPhase::kPermute);
  {
    SpanRecorder::Scope span(rec, "state_pack", -1, 0, 0, 2 * my_bytes);
    const int peers = failed ? p / 2 : p;
    if (to_tp) {
      state_blocks::PackEp(stores, rank, peers, &send);
    } else {
      state_blocks::PackSharded(stores, peers, &send);
    }
    if (failed)
      reason = "injected fault: packing stopped after " + std::to_string(peers) + " of " +
               std::to_string(p) + " messages";
  }
  stats.pack_ms = MsSince(t0);
  if (int who = Vote(rank, failed, comm, rec, &stats); who >= 0) {
    return failed_in(ReshardPhase::kPermute, who, false);
  }

  // Exchange.
  t0 = Clock::now();
  comm->AllToAll(rank, send, &recv, rec, "state_a2a", -1);
  for (int q = 0; q < p; ++q) {
    if (q != rank) stats.bytes_sent += static_cast<int64_t>(send[q].size() * sizeof(float));
  }
  failed = false;
  for (int q = 0; q < p && !failed; ++q) {
    const int64_t want = state_blocks::MessageFloats(stores, to_tp ? q : rank);
    if (static_cast<int64_t>(recv[q].size()) != want) {
      failed = true;
      reason = "received " + std::to_string(recv[q].size()) + " floats from rank " +
               std::to_string(q) + ", expected " + std::to_string(want);
    }
  }
  if (fails_at(ReshardPhase::kExchange)) {
    for (auto& v : recv) std::fill(v.begin(), v.end(), std::numeric_limits<float>::quiet_NaN());
    failed = true;
    reason = "injected fault: the received payload is corrupt (poisoned)";
  }
  stats.exchange_ms = MsSince(t0);
  if (int who = Vote(rank, failed, comm, rec, &stats); who >= 0) {
    return failed_in(ReshardPhase::kExchange, who, false);
  }

  // Place.
  t0 = Clock::now();
  failed = fails_at(ReshardPhase::kPlace);
  {
    SpanRecorder::Scope span(rec, "state_place", -1, 0, 0, 2 * my_bytes);
    const int sources = failed ? p / 2 : p;
    if (to_tp) {
      state_blocks::PlaceSharded(stores, recv, sources, failed);
    } else {
      state_blocks::PlaceEp(stores, rank, recv, sources, failed);
    }
    if (failed)
      reason = "injected fault: placed " + std::to_string(sources) + " of " + std::to_string(p) +
               " messages, the rest torn";
  }
  stats.place_ms = MsSince(t0);
  if (int who = Vote(rank, failed, comm, rec, &stats); who >= 0) {
    // Every rank placed (some of) what it received: restore the source
    // reading from this rank's own send buffers, which are the inverse
    // direction's messages (state_blocks.h).
    t0 = Clock::now();
    {
      SpanRecorder::Scope span(rec, "state_rollback", -1, 0, 0, 2 * my_bytes);
      if (to_tp) {
        state_blocks::PlaceEp(stores, rank, send, p, false);
      } else {
        state_blocks::PlaceSharded(stores, send, p, false);
      }
    }
    stats.rollback_ms = MsSince(t0);
    if (const uint64_t now = checksum(!to_tp); now != stats.checksum_source) {
      return Internal(what + " failed in place (rank " + std::to_string(who) +
                      ") and the rollback left a used page or slot of rank " +
                      std::to_string(rank) + " different (checksum " + std::to_string(now) +
                      ", was " + std::to_string(stats.checksum_source) + "); a bug");
    }
    return failed_in(ReshardPhase::kPlace, who, true);
  }

  stats.checksum_target = checksum(to_tp);
  const bool set = kv->SetShards(target_shards).ok() && state->SetShards(target_shards).ok();
  assert(set && "CheckShardable accepted this reading");
  (void)set;
  stats.total_ms = MsSince(start);
  return stats;
}

}  // namespace sy::engine
