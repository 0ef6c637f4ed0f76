#include "tp_attention_util.h"

#include <algorithm>
#include <thread>
#include <utility>

namespace sy::engine::testing {

TpStep::TpStep(std::vector<TpSeqSpec> seqs, int parts, int num_pages, int slots)
    : parts_(parts), seqs_(std::move(seqs)) {
  std::stable_sort(seqs_.begin(), seqs_.end(),
                   [](const TpSeqSpec& a, const TpSeqSpec& b) { return a.home < b.home; });
  home_row_.assign(parts + 1, 0);
  for (const TpSeqSpec& s : seqs_) home_row_[s.home + 1] += s.n;
  for (int d = 0; d < parts; ++d) home_row_[d + 1] += home_row_[d];
  local_.resize(parts);
  storage_pages_.reserve(seqs_.size());
  int row = 0;
  for (const TpSeqSpec& s : seqs_) {
    std::vector<int32_t> pages;
    for (int32_t p : s.pages) pages.push_back(s.home * num_pages + p);
    storage_pages_.push_back(std::move(pages));
    SeqRows r{.row = row,
              .n = s.n,
              .start_pos = s.start_pos,
              .pages = storage_pages_.back().data(),
              .state_slot = s.state_slot >= 0 ? s.home * slots + s.state_slot : -1,
              .checkpoint_slot = s.checkpoint_slot >= 0 ? s.home * slots + s.checkpoint_slot : -1,
              .checkpoint_at = s.checkpoint_at};
    all_.push_back(r);
    home_.push_back(s.home);
    r.row -= home_row_[s.home];
    local_[s.home].push_back(r);
    row += s.n;
  }
}

TpBatch TpStep::For(int rank, Communicator* comm) const {
  return TpBatch{.rank = rank,
                 .comm = comm,
                 .all = all_,
                 .home = home_,
                 .home_row = home_row_,
                 .local = local_[rank]};
}

std::vector<SeqRows> TpStep::EpLocal(int device) const {
  std::vector<SeqRows> out;
  int row = 0;
  for (const TpSeqSpec& s : seqs_) {
    if (s.home != device) continue;
    out.push_back(SeqRows{.row = row,
                          .n = s.n,
                          .start_pos = s.start_pos,
                          .pages = s.pages.data(),
                          .state_slot = s.state_slot,
                          .checkpoint_slot = s.checkpoint_slot,
                          .checkpoint_at = s.checkpoint_at});
    row += s.n;
  }
  return out;
}

void RunRanks(int parts, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  threads.reserve(parts);
  for (int r = 0; r < parts; ++r) threads.emplace_back(fn, r);
  for (std::thread& t : threads) t.join();
}

}  // namespace sy::engine::testing
