// Algorithm 4 re-homing; see rehome.h.
//
// Two phases. The greedy phase fills anonymous bins (one per device, each
// with that device's capacity while being filled); the relabel phase then
// chooses which device each bin becomes. Only the second looks at the
// current homes, so the balance is that of plain longest-first and the
// relabel can only reduce what moves, never the balance.
#include "engine/scheduler/rehome.h"

#include <algorithm>
#include <numeric>
#include <utility>

namespace sy::engine {
namespace {

// Relabelling permutations are searched exhaustively up to this many
// devices (8! = 40320 permutations of 8 bins: well under a millisecond).
constexpr int kExhaustiveDevices = 8;

// What the items of one bin need from the device that bin becomes.
struct Bin {
  int64_t pages = 0;
  int slots = 0;
};

bool FitsOn(const Bin& b, const RehomeCapacity& c) {
  return b.pages <= c.pages && b.slots <= c.slots;
}

// The value of a labelling: pages kept home, then items kept home.
using Score = std::pair<int64_t, int64_t>;

Score ScoreOf(const std::vector<int>& label, const std::vector<std::vector<Score>>& keep) {
  Score s{0, 0};
  for (size_t b = 0; b < label.size(); ++b) {
    s.first += keep[b][label[b]].first;
    s.second += keep[b][label[b]].second;
  }
  return s;
}

bool Feasible(const std::vector<int>& label, const std::vector<Bin>& bins,
              const std::vector<RehomeCapacity>& capacity) {
  for (size_t b = 0; b < label.size(); ++b) {
    if (!FitsOn(bins[b], capacity[label[b]])) return false;
  }
  return true;
}

// Exhaustive over all P! labellings in lexicographic order; the first best
// one wins, and the identity (always feasible) comes first.
std::vector<int> RelabelExhaustive(const std::vector<Bin>& bins,
                                   const std::vector<RehomeCapacity>& capacity,
                                   const std::vector<std::vector<Score>>& keep) {
  std::vector<int> label(bins.size());
  std::iota(label.begin(), label.end(), 0);
  std::vector<int> best = label;
  Score best_score = ScoreOf(label, keep);
  while (std::next_permutation(label.begin(), label.end())) {
    if (!Feasible(label, bins, capacity)) continue;
    const Score s = ScoreOf(label, keep);
    if (s > best_score) {
      best_score = s;
      best = label;
    }
  }
  return best;
}

// Beyond kExhaustiveDevices: bins take the device they keep the most pages
// on, heaviest (bin, device) pairs first, the rest in order; then pairwise
// swaps while any improves. Falls back to the identity where the greedy
// matching leaves a bin with no device it fits.
std::vector<int> RelabelGreedy(const std::vector<Bin>& bins,
                               const std::vector<RehomeCapacity>& capacity,
                               const std::vector<std::vector<Score>>& keep) {
  const int p = static_cast<int>(bins.size());
  std::vector<int> label(p);
  std::iota(label.begin(), label.end(), 0);
  std::vector<int> greedy(p, -1);
  std::vector<bool> taken(p, false);
  std::vector<std::pair<int, int>> pairs;  // (bin, device) with something to keep
  for (int b = 0; b < p; ++b) {
    for (int d = 0; d < p; ++d) {
      if (keep[b][d].first > 0 || keep[b][d].second > 0) pairs.emplace_back(b, d);
    }
  }
  std::stable_sort(pairs.begin(), pairs.end(), [&keep](const auto& x, const auto& y) {
    return keep[x.first][x.second] > keep[y.first][y.second];
  });
  for (const auto& [b, d] : pairs) {
    if (greedy[b] >= 0 || taken[d] || !FitsOn(bins[b], capacity[d])) continue;
    greedy[b] = d;
    taken[d] = true;
  }
  bool complete = true;
  for (int b = 0; b < p && complete; ++b) {
    if (greedy[b] >= 0) continue;
    complete = false;
    for (int d = 0; d < p; ++d) {
      if (taken[d] || !FitsOn(bins[b], capacity[d])) continue;
      greedy[b] = d;
      taken[d] = true;
      complete = true;
      break;
    }
  }
  if (complete && ScoreOf(greedy, keep) > ScoreOf(label, keep)) label = greedy;
  // Pairwise swaps: each accepted one strictly raises the score, so this ends.
  for (bool improved = true; improved;) {
    improved = false;
    for (int a = 0; a < p; ++a) {
      for (int b = a + 1; b < p; ++b) {
        const Score before = ScoreOf(label, keep);
        std::swap(label[a], label[b]);
        if (FitsOn(bins[a], capacity[label[a]]) && FitsOn(bins[b], capacity[label[b]]) &&
            ScoreOf(label, keep) > before) {
          improved = true;
        } else {
          std::swap(label[a], label[b]);
        }
      }
    }
  }
  return label;
}

void FillStats(const std::vector<RehomeItem>& items, int devices, RehomePlan* plan) {
  plan->load.assign(devices, 0);
  plan->moved = 0;
  plan->moved_pages = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    const int h = plan->home[i];
    if (h >= 0 && h < devices) plan->load[h] += items[i].pages;
    if (h != items[i].home) {
      ++plan->moved;
      plan->moved_pages += items[i].pages;
    }
  }
}

}  // namespace

RehomePlan LongestFirstAssignment(const std::vector<RehomeItem>& items,
                                  const std::vector<RehomeCapacity>& capacity) {
  const int p = static_cast<int>(capacity.size());
  const int n = static_cast<int>(items.size());
  RehomePlan plan;
  plan.home.resize(n);
  for (int i = 0; i < n; ++i) plan.home[i] = items[i].home;

  // 1. Longest first, each to the least loaded bin it fits in.
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&items](int a, int b) { return items[a].pages > items[b].pages; });
  std::vector<Bin> bins(p);
  std::vector<int> bin_of(n, -1);
  for (int i : order) {
    const RehomeItem& it = items[i];
    int best = -1;
    for (int b = 0; b < p; ++b) {
      const Bin grown{bins[b].pages + it.pages, bins[b].slots + (it.needs_slot ? 1 : 0)};
      if (grown.pages > capacity[b].pages || (it.needs_slot && grown.slots > capacity[b].slots)) {
        continue;
      }
      if (best < 0 || bins[b].pages < bins[best].pages) best = b;
    }
    if (best < 0) {
      plan.fits = false;
      FillStats(items, p, &plan);
      return plan;
    }
    bin_of[i] = best;
    bins[best].pages += it.pages;
    if (it.needs_slot) ++bins[best].slots;
  }

  // 2. Relabel: bin b becomes device label[b], keeping the most pages home.
  std::vector<std::vector<Score>> keep(p, std::vector<Score>(p, Score{0, 0}));
  for (int i = 0; i < n; ++i) {
    const int h = items[i].home;
    if (h < 0 || h >= p) continue;
    keep[bin_of[i]][h].first += items[i].pages;
    keep[bin_of[i]][h].second += 1;
  }
  const std::vector<int> label = p <= kExhaustiveDevices ? RelabelExhaustive(bins, capacity, keep)
                                                         : RelabelGreedy(bins, capacity, keep);
  for (int i = 0; i < n; ++i) plan.home[i] = label[bin_of[i]];
  FillStats(items, p, &plan);
  return plan;
}

}  // namespace sy::engine
