// File: tests/engine/eplb/eplb_reference.h
//
// A second, independent implementation of DeepSeek's eplb.py
// (deepseek-ai/EPLB: rebalance_experts), for tests only. It is a plain, slow,
// line-by-line port of the tensor program: whole [rows x cols] matrices,
// view() as a row-major reshape, gather/scatter and inverse() as in PyTorch,
// an insertion sort for the stable descending sort. It shares no code with
// engine/eplb/placement.cc, so agreement between the two means something.
// Arithmetic is double (the original casts to float32); see placement.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace sy::engine::eplb_reference {

using Mat = std::vector<std::vector<double>>;
using IMat = std::vector<std::vector<int64_t>>;

// torch .view(rows, -1) of a row-major matrix.
template <typename T>
std::vector<std::vector<T>> View(const std::vector<std::vector<T>>& m, size_t rows) {
  std::vector<T> flat;
  for (const auto& r : m) flat.insert(flat.end(), r.begin(), r.end());
  const size_t cols = flat.size() / rows;
  std::vector<std::vector<T>> out(rows, std::vector<T>(cols));
  for (size_t i = 0; i < flat.size(); ++i) out[i / cols][i % cols] = flat[i];
  return out;
}

// out[i][j] = src[i][index[i][j]]
template <typename T>
std::vector<std::vector<T>> Gather(const std::vector<std::vector<T>>& src, const IMat& index) {
  std::vector<std::vector<T>> out(index.size());
  for (size_t i = 0; i < index.size(); ++i) {
    for (int64_t k : index[i]) out[i].push_back(src[i][k]);
  }
  return out;
}

// inv.scatter_(1, perm, arange)
inline IMat Inverse(const IMat& perm) {
  IMat inv(perm.size(), std::vector<int64_t>(perm[0].size(), -1));
  for (size_t i = 0; i < perm.size(); ++i) {
    for (size_t j = 0; j < perm[i].size(); ++j) inv[i][perm[i][j]] = static_cast<int64_t>(j);
  }
  return inv;
}

// weight.sort(-1, descending=True).indices, stable.
inline std::vector<int64_t> SortDescending(const std::vector<double>& w) {
  std::vector<int64_t> idx;
  for (size_t j = 0; j < w.size(); ++j) {
    size_t pos = idx.size();
    while (pos > 0 && w[idx[pos - 1]] < w[j]) --pos;  // equal keys stay in index order
    idx.insert(idx.begin() + static_cast<std::ptrdiff_t>(pos), static_cast<int64_t>(j));
  }
  return idx;
}

inline std::pair<IMat, IMat> BalancedPacking(const Mat& weight, int64_t num_packs) {
  const size_t num_layers = weight.size();
  const int64_t num_groups = static_cast<int64_t>(weight[0].size());
  const int64_t groups_per_pack = num_groups / num_packs;
  IMat pack_index(num_layers, std::vector<int64_t>(num_groups, -1));
  IMat rank_in_pack = pack_index;
  if (groups_per_pack == 1) {
    for (size_t i = 0; i < num_layers; ++i) {
      for (int64_t j = 0; j < num_groups; ++j) {
        pack_index[i][j] = j;
        rank_in_pack[i][j] = 0;
      }
    }
    return {pack_index, rank_in_pack};
  }
  for (size_t i = 0; i < num_layers; ++i) {
    std::vector<double> pack_weights(num_packs, 0);
    std::vector<int64_t> pack_items(num_packs, 0);
    for (int64_t group : SortDescending(weight[i])) {
      // min(candidates, key=pack_weights): first minimum
      int64_t pack = -1;
      for (int64_t p = 0; p < num_packs; ++p) {
        if (pack_items[p] < groups_per_pack && (pack == -1 || pack_weights[p] < pack_weights[pack]))
          pack = p;
      }
      pack_index[i][group] = pack;
      rank_in_pack[i][group] = pack_items[pack];
      pack_weights[pack] += weight[i][group];
      pack_items[pack] += 1;
    }
  }
  return {pack_index, rank_in_pack};
}

struct Replicated {
  IMat phy2log, rank, logcnt;
};

inline Replicated ReplicateExperts(const Mat& weight, int64_t num_phy) {
  const size_t n = weight.size();
  const int64_t num_log = static_cast<int64_t>(weight[0].size());
  Replicated r;
  r.phy2log.assign(n, std::vector<int64_t>(num_phy));
  r.rank.assign(n, std::vector<int64_t>(num_phy, 0));
  r.logcnt.assign(n, std::vector<int64_t>(num_log, 1));
  for (size_t row = 0; row < n; ++row) {
    for (int64_t j = 0; j < num_phy; ++j) r.phy2log[row][j] = j;
  }
  for (int64_t i = num_log; i < num_phy; ++i) {
    for (size_t row = 0; row < n; ++row) {
      // (weight / logcnt).max(dim=-1).indices: the first maximum
      int64_t best = 0;
      double best_v = weight[row][0] / static_cast<double>(r.logcnt[row][0]);
      for (int64_t j = 1; j < num_log; ++j) {
        const double v = weight[row][j] / static_cast<double>(r.logcnt[row][j]);
        if (v > best_v) {
          best = j;
          best_v = v;
        }
      }
      r.phy2log[row][i] = best;
      r.rank[row][i] = r.logcnt[row][best];
      r.logcnt[row][best] += 1;
    }
  }
  return r;
}

struct Result3 {
  IMat phy2log, phyrank, logcnt;
};

inline Result3 RebalanceHierarchical(const Mat& weight, int64_t num_physical_experts,
                                     int64_t num_groups, int64_t num_nodes, int64_t num_gpus) {
  const size_t num_layers = weight.size();
  const int64_t num_logical_experts = static_cast<int64_t>(weight[0].size());
  const int64_t group_size = num_logical_experts / num_groups;
  const int64_t groups_per_node = num_groups / num_nodes;
  const int64_t phy_experts_per_gpu = num_physical_experts / num_gpus;

  // Step 1
  Mat tokens_per_group(num_layers, std::vector<double>(num_groups, 0));
  for (size_t l = 0; l < num_layers; ++l) {
    for (int64_t g = 0; g < num_groups; ++g) {
      for (int64_t j = 0; j < group_size; ++j)
        tokens_per_group[l][g] += weight[l][g * group_size + j];
    }
  }
  auto [group_pack_index, group_rank_in_pack] = BalancedPacking(tokens_per_group, num_nodes);
  IMat log2mlog(num_layers);
  for (size_t l = 0; l < num_layers; ++l) {
    for (int64_t g = 0; g < num_groups; ++g) {
      for (int64_t j = 0; j < group_size; ++j) {
        log2mlog[l].push_back(
            (group_pack_index[l][g] * groups_per_node + group_rank_in_pack[l][g]) * group_size + j);
      }
    }
  }
  const IMat mlog2log = Inverse(log2mlog);

  // Step 2
  const Mat tokens_per_mlog = View(Gather(weight, mlog2log), num_layers * num_nodes);
  Replicated rep = ReplicateExperts(tokens_per_mlog, num_physical_experts / num_nodes);

  // Step 3
  Mat per_replica = tokens_per_mlog;
  for (size_t r = 0; r < per_replica.size(); ++r) {
    for (size_t j = 0; j < per_replica[r].size(); ++j) {
      per_replica[r][j] /= static_cast<double>(rep.logcnt[r][j]);
    }
  }
  const Mat tokens_per_phy = Gather(per_replica, rep.phy2log);
  auto [pack_index, rank_in_pack] = BalancedPacking(tokens_per_phy, num_gpus / num_nodes);
  IMat phy2pphy = pack_index;
  for (size_t r = 0; r < phy2pphy.size(); ++r) {
    for (size_t j = 0; j < phy2pphy[r].size(); ++j) {
      phy2pphy[r][j] = pack_index[r][j] * phy_experts_per_gpu + rank_in_pack[r][j];
    }
  }
  const IMat pphy2phy = Inverse(phy2pphy);

  IMat pphy2mlog = Gather(rep.phy2log, pphy2phy);  // [L*K, N/K]
  for (size_t r = 0; r < pphy2mlog.size(); ++r) {
    const int64_t node = static_cast<int64_t>(r % static_cast<size_t>(num_nodes));
    for (int64_t& v : pphy2mlog[r]) v += node * (num_logical_experts / num_nodes);
  }
  pphy2mlog = View(pphy2mlog, num_layers);
  Result3 out;
  out.phy2log = Gather(mlog2log, pphy2mlog);
  out.phyrank = View(Gather(rep.rank, pphy2phy), num_layers);
  out.logcnt = Gather(View(rep.logcnt, num_layers), log2mlog);
  return out;
}

struct Rebalanced {
  IMat phy2log;
  std::vector<IMat> log2phy;  // [L][E][maxcnt]
  IMat logcnt;
};

// DeepSeek's entry point (current version: the global policy is the
// hierarchical one with one group on one node). force_global mirrors our
// EplbPolicy::kGlobal.
inline Rebalanced RebalanceExperts(const Mat& weight, int64_t num_replicas, int64_t num_groups,
                                   int64_t num_nodes, int64_t num_gpus, bool force_global = false) {
  const size_t num_layers = weight.size();
  const int64_t num_logical_experts = static_cast<int64_t>(weight[0].size());
  Result3 r = (!force_global && num_groups % num_nodes == 0)
                  ? RebalanceHierarchical(weight, num_replicas, num_groups, num_nodes, num_gpus)
                  : RebalanceHierarchical(weight, num_replicas, 1, 1, num_gpus);
  int64_t maxlogcnt = 0;
  for (const auto& row : r.logcnt) {
    for (int64_t c : row) maxlogcnt = c > maxlogcnt ? c : maxlogcnt;
  }
  // log2phy.view(L, -1).scatter_(-1, phy2log * maxlogcnt + phyrank, arange)
  IMat flat(num_layers, std::vector<int64_t>(num_logical_experts * maxlogcnt, -1));
  for (size_t l = 0; l < num_layers; ++l) {
    for (int64_t p = 0; p < num_replicas; ++p) {
      flat[l][r.phy2log[l][p] * maxlogcnt + r.phyrank[l][p]] = p;
    }
  }
  Rebalanced out{r.phy2log, {}, r.logcnt};
  for (size_t l = 0; l < num_layers; ++l)
    out.log2phy.push_back(View(IMat{flat[l]}, num_logical_experts));
  return out;
}

}  // namespace sy::engine::eplb_reference
