// File: engine/attention/tp_batch.h
//
// TpBatch: one step as every rank sees it when attention runs tensor
// parallel (Moebius' TP layout, seed 003 §2 and §4; docs/PARALLELISM.md).
// Each request keeps a home device, which owns its rows of the residual
// stream and runs everything that is not per head (norms, projections, the
// router, the LM head), exactly as in the data-parallel (EP) layout; what
// is split is the request's attention state and the per-head core that
// reads it:
//
//   MHA / GQA   device r holds KV heads [r kv_heads/P, (r+1) kv_heads/P) of
//               every request and runs the query heads that read them
//   MLA         every head reads the whole latent, so the latent is split by
//               columns instead: device r holds columns [r L/P, (r+1) L/P)
//               of every cached [c | k_rope] row (the cache stays 1/P per
//               device, as under EP, and page tables are unchanged); scores
//               are sums of P partial dot products, taken in block order
//   KDA / GLA   device r holds heads [r heads/P, (r+1) heads/P) of every
//               request's recurrent state and their conv channels
//
// A layer is then: home projections -> all-to-all of each owner's share of
// the new rows -> the core on every rank over every request (its block of
// heads or columns) -> all-to-all of the per-head outputs back home -> home
// output projection. The output projection stays on the home device over
// the whole row, so a TP step adds the same numbers in the same order as an
// EP step: the two layouts give bit-identical outputs (every kind's EP path
// computes in the same blocks).
//
// Rows. The global packing is home-major: home 0's tokens in its local
// order, then home 1's, ...; home d's local row i is global row
// home_row[d] + i. Page tables, state slots and checkpoint slots in `all`
// and `local` are storage ids of the sharded pools (kv_pool.h,
// state_pool.h): home * num_pages + page, home * slots + slot.
//
// Every rank calls a layer's ForwardTp, also with no rows of its own: it
// still joins the collectives and runs the core for the other homes' rows.
//
// Thread-safety: a view, valid for one Forward; owned by the device worker.
#pragma once

#include <span>

#include "engine/attention/seq_rows.h"
#include "engine/distributed/communicator.h"

namespace sy::engine {

struct TpBatch {
  int rank = 0;
  Communicator* comm = nullptr;  // P = comm->size() ranks
  // Every seq of the step, home-major, rows in the global packing.
  std::span<const SeqRows> all;
  // all[i]'s home device.
  std::span<const int> home;
  // P + 1 entries: home d's rows are [home_row[d], home_row[d + 1]) of the
  // global packing; home_row[P] is the step's total rows.
  std::span<const int> home_row;
  // This rank's own seqs: the entries of `all` homed here, rows shifted to
  // the local packing (row - home_row[rank]).
  std::span<const SeqRows> local;

  int parts() const { return comm->size(); }
  int total_rows() const { return home_row.empty() ? 0 : home_row.back(); }
  int rows_of(int device) const { return home_row[device + 1] - home_row[device]; }
};

}  // namespace sy::engine
