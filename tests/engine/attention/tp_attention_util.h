// File: tests/engine/attention/tp_attention_util.h
//
// Test harness for tensor-parallel attention (engine/attention/tp_batch.h):
// builds the per-rank TpBatch views of one step from each seq's home, its
// EP page table / slots (ids in its home's pool) and row count, and runs one
// function per rank on its own thread (the collectives need all P at once).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "engine/attention/seq_rows.h"
#include "engine/attention/tp_batch.h"
#include "engine/distributed/communicator.h"

namespace sy::engine::testing {

// One seq of a step, in EP terms.
struct TpSeqSpec {
  int home = 0;
  int n = 1;  // new tokens
  int start_pos = 0;
  std::vector<int32_t> pages;  // ids in the home's KvPool (covering start_pos + n)
  int state_slot = -1;         // id in the home's StatePool
  int checkpoint_slot = -1;    // id in the home's StatePool, or -1
  int checkpoint_at = 0;
};

// The views of one step for every rank. Seqs are ordered home-major (stable
// within a home), as the device worker orders them.
class TpStep {
 public:
  // num_pages / slots: per-device pool sizes (storage id = home * size + id).
  TpStep(std::vector<TpSeqSpec> seqs, int parts, int num_pages, int slots);
  TpBatch For(int rank, Communicator* comm) const;
  int parts() const { return parts_; }
  // Rows of `device` in the local packing.
  int local_rows(int device) const { return home_row_[device + 1] - home_row_[device]; }
  int total_rows() const { return home_row_.back(); }
  // The seqs in the order of `all`, and each one's first global row.
  const std::vector<TpSeqSpec>& seqs() const { return seqs_; }
  const std::vector<SeqRows>& all() const { return all_; }
  // EP view of `device`: its seqs with local rows and EP ids (what Forward takes).
  std::vector<SeqRows> EpLocal(int device) const;

 private:
  int parts_;
  std::vector<TpSeqSpec> seqs_;
  std::vector<std::vector<int32_t>> storage_pages_;
  std::vector<SeqRows> all_;
  std::vector<int> home_, home_row_;
  std::vector<std::vector<SeqRows>> local_;
};

// Runs fn(rank) for rank 0..parts-1 on parts threads and joins them.
void RunRanks(int parts, const std::function<void(int)>& fn);

}  // namespace sy::engine::testing
