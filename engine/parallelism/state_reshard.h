// File: engine/parallelism/state_reshard.h
//
// Request-state redistribution for a TP <-> EP switch (seed 003 §4): moves
// one device's KV pages and recurrent-state slots between the data-parallel
// reading of its pools (each device holds whole pages / slots of the
// requests homed on it) and the sharded reading (every device holds its
// block of every page / slot of every home; kv_pool.h and state_pool.h
// "Shards"). Page tables and slot ids are preserved both ways: storage page
// d * num_pages + p of the sharded reading is block r of page p of home d
// (Algorithm 3 with "page table preserved"; the way back is Algorithm 4's
// migration with each request returning to its home).
//
//   EP -> TP (every rank r):
//     metadata   AllGather of every home's used page and slot ids (ascending)
//     pack       for each used page of this home, the page's block for rank q
//                goes to send[q] (KV rows split into P contiguous blocks; a
//                state layer into its heads block and the channel block of
//                each conv group)
//     exchange   Communicator::AllToAll
//     place      recv[d] (home d's used pages, ascending) written to storage
//                pages d * num_pages + p of the sharded reading; SetShards(P)
//   TP -> EP: the inverse (each rank sends home d its block of d's pages;
//             home d joins the P blocks in rank order; SetShards(1)).
//
// Whole pages move, partly filled or not (seed 003 W3 "partial pages"), and
// so do pages the prefix cache holds (used pages are used, whoever holds
// them), so a shared prefix moves once and stays shared. Free pages and
// slots are not read or written; their contents are garbage in either
// reading.
//
// In place: the two readings share the storage, so every block a rank will
// send is packed before anything is placed; the send and receive buffers
// are the transport's scratch (about 2x the used bytes of this rank, freed
// on return). Failure atomicity (seed 003 W5): after pack, after the
// exchange and after place all ranks vote (AllReduceSum of a failure flag);
// a failure anywhere makes every rank restore its source reading from its
// own send buffers (which hold every block of every page it had) and keep
// its shards, so the pools are bit-identical to before for every used page
// and slot; the call then returns UNAVAILABLE naming the phase and the
// failed rank. `fault` (FaultPlan with part == kState; others ignored)
// injects one: pack stops halfway, exchange poisons the received payload,
// place writes half and poisons the rest.
//
// Thread-safety: a collective: every rank calls it on its own thread with
// its own pools, between steps (no Forward runs).
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "engine/distributed/communicator.h"
#include "engine/parallelism/expert_buffer.h"
#include "engine/pools/kv_pool.h"
#include "engine/pools/state_pool.h"
#include "engine/trace/span_recorder.h"

namespace sy::engine {

struct StateReshardStats {
  ParallelMode from = ParallelMode::kEP;
  ParallelMode to = ParallelMode::kEP;
  int kv_pages = 0;        // used pages of this home moved (EP -> TP) or gathered (TP -> EP)
  int state_slots = 0;     // likewise, recurrent-state slots
  double metadata_ms = 0;  // the used-id all-gather
  double pack_ms = 0;
  double exchange_ms = 0;
  double place_ms = 0;
  double vote_ms = 0;
  double rollback_ms = 0;
  double total_ms = 0;
  int64_t bytes_sent = 0;  // payload bytes this rank sent to other ranks
  // FNV-1a over this rank's used storage in the source reading before
  // anything moved, and in the target reading after place (0 on failure):
  // comparable with the other call's value for the same reading, so a
  // round trip A -> B -> A must give target == the first call's source.
  uint64_t checksum_source = 0;
  uint64_t checksum_target = 0;
};

// Send and receive buffers kept from one switch to the next (one per
// device, owned by its caller). Fresh buffers cost first-touch page faults
// on every switch, which measured most of the state phase on the dev box
// (22 MB: 110 ms with fresh buffers); kept, they cost memory: about 2x the
// largest state a device has moved, held until the owner goes.
struct StateReshardScratch {
  std::vector<std::vector<float>> send, recv;
  int64_t bytes() const;  // capacity held
};

// Moves this rank's pools to `target` (kTP: shards = comm->size(); kEP:
// shards = 1). Already there: OK, nothing moves (kv_pages 0). `state` may
// have no slots (no linear layers). `rec` (may be null) gets the spans
// ("state_pack", "state_place" and the comm spans "state_meta",
// "state_a2a"). `scratch` (may be null: buffers for this call only) is
// reused. FAILED_PRECONDITION (nothing moved, on every rank) when a
// pool cannot be sharded P ways (KvPool / StatePool::SetShards would
// refuse). UNAVAILABLE "state reshard <from>-><to> failed in <phase> (rank
// r): ..." after a rolled-back failure; INTERNAL if a rollback left a used
// page or slot different (a bug). REQUIRES: the same call on every rank;
// both pools in the same reading.
Result<StateReshardStats> ReshardState(int rank, ParallelMode target, KvPool* kv, StatePool* state,
                                       Communicator* comm, const FaultPlan* fault = nullptr,
                                       SpanRecorder* rec = nullptr,
                                       StateReshardScratch* scratch = nullptr);

}  // namespace sy::engine
