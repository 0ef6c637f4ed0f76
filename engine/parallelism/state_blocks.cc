#include "engine/parallelism/state_blocks.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cstring>
#include <limits>

namespace sy::engine::state_blocks {

namespace {

void CopyFloats(float* dst, const float* src, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

constexpr uint64_t kFnvBasis = 0xcbf29ce484222325ULL;

uint64_t Fnv(uint64_t h, const float* p, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    h ^= std::bit_cast<uint32_t>(p[i]);
    h *= 0x100000001b3ULL;
  }
  return h;
}

}  // namespace

void UnitSplit::Gather(const float* unit, int q, float* out) const {
  for (int64_t c = 0; c < count; ++c) {
    const float* period_start = unit + c * period;
    for (const auto& [offset, len] : segments) {
      const int64_t w = len / parts;
      CopyFloats(out, period_start + offset + q * w, w);
      out += w;
    }
  }
}

void UnitSplit::Scatter(const float* in, int q, float* unit) const {
  for (int64_t c = 0; c < count; ++c) {
    float* period_start = unit + c * period;
    for (const auto& [offset, len] : segments) {
      const int64_t w = len / parts;
      CopyFloats(period_start + offset + q * w, in, w);
      in += w;
    }
  }
}

void UnitSplit::Poison(int q, float* unit) const {
  for (int64_t c = 0; c < count; ++c) {
    float* period_start = unit + c * period;
    for (const auto& [offset, len] : segments) {
      const int64_t w = len / parts;
      std::fill_n(period_start + offset + q * w, w, std::numeric_limits<float>::quiet_NaN());
    }
  }
}

int64_t MessageFloats(const std::vector<BlockStore>& stores, int home) {
  int64_t n = 0;
  for (const BlockStore& s : stores)
    n += static_cast<int64_t>(s.used[home].size()) * s.split.block_floats();
  return n;
}

void PackEp(const std::vector<BlockStore>& stores, int rank, int peers,
            std::vector<std::vector<float>>* send) {
  const int64_t n = MessageFloats(stores, rank);
  for (auto& v : *send) v.clear();
  for (int q = 0; q < peers; ++q) {
    std::vector<float>& out = (*send)[q];
    out.resize(static_cast<size_t>(n));
    float* cursor = out.data();
    for (const BlockStore& s : stores) {
      for (int p : s.used[rank]) {
        s.split.Gather(s.ep(p), q, cursor);
        cursor += s.split.block_floats();
      }
    }
  }
}

void PackSharded(const std::vector<BlockStore>& stores, int peers,
                 std::vector<std::vector<float>>* send) {
  for (auto& v : *send) v.clear();
  for (int d = 0; d < peers; ++d) {
    std::vector<float>& out = (*send)[d];
    out.resize(static_cast<size_t>(MessageFloats(stores, d)));
    float* cursor = out.data();
    for (const BlockStore& s : stores) {
      for (int p : s.used[d]) {
        CopyFloats(cursor, s.sharded(d, p), s.split.block_floats());
        cursor += s.split.block_floats();
      }
    }
  }
}

void PlaceSharded(const std::vector<BlockStore>& stores,
                  const std::vector<std::vector<float>>& msgs, int sources, bool poison_rest) {
  const int homes = static_cast<int>(msgs.size());
  for (int d = 0; d < homes; ++d) {
    const bool place = d < sources;
    if (!place && !poison_rest) continue;
    assert(!place || static_cast<int64_t>(msgs[d].size()) == MessageFloats(stores, d));
    const float* cursor = place ? msgs[d].data() : nullptr;
    for (const BlockStore& s : stores) {
      const int64_t b = s.split.block_floats();
      for (int p : s.used[d]) {
        if (place) {
          CopyFloats(s.sharded(d, p), cursor, b);
          cursor += b;
        } else {
          std::fill_n(s.sharded(d, p), b, std::numeric_limits<float>::quiet_NaN());
        }
      }
    }
  }
}

void PlaceEp(const std::vector<BlockStore>& stores, int rank,
             const std::vector<std::vector<float>>& msgs, int sources, bool poison_rest) {
  const int parts = static_cast<int>(msgs.size());
  for (int q = 0; q < parts; ++q) {
    const bool place = q < sources;
    if (!place && !poison_rest) continue;
    assert(!place || static_cast<int64_t>(msgs[q].size()) == MessageFloats(stores, rank));
    const float* cursor = place ? msgs[q].data() : nullptr;
    for (const BlockStore& s : stores) {
      for (int p : s.used[rank]) {
        if (place) {
          s.split.Scatter(cursor, q, s.ep(p));
          cursor += s.split.block_floats();
        } else {
          s.split.Poison(q, s.ep(p));
        }
      }
    }
  }
}

uint64_t ChecksumEp(const std::vector<BlockStore>& stores, int rank) {
  uint64_t h = kFnvBasis;
  for (const BlockStore& s : stores) {
    for (int p : s.used[rank]) h = Fnv(h, s.ep(p), s.split.unit_floats());
  }
  return h;
}

uint64_t ChecksumSharded(const std::vector<BlockStore>& stores) {
  uint64_t h = kFnvBasis;
  for (const BlockStore& s : stores) {
    for (size_t d = 0; d < s.used.size(); ++d) {
      for (int p : s.used[d]) h = Fnv(h, s.sharded(static_cast<int>(d), p), s.split.block_floats());
    }
  }
  return h;
}

}  // namespace sy::engine::state_blocks
