// File: engine/pools/pool_sizing.cc
#include "engine/pools/pool_sizing.h"

#include <cmath>
#include <limits>
#include <string>

#include "engine/pools/kv_pool.h"

namespace sy::engine {
namespace {

constexpr int64_t kFloat = sizeof(float);

std::string Fraction(double f) {
  std::string s = std::to_string(f);
  while (s.size() > 1 && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.push_back('0');
  return s;
}

}  // namespace

int64_t KvPageBytes(const ModelConfig& c, int page_size) {
  return static_cast<int64_t>(c.full_attention_layers()) * page_size *
         c.kv_floats_per_token_layer() * kFloat;
}

int64_t StateSlotBytes(const ModelConfig& c) {
  return static_cast<int64_t>(c.linear_layers()) * c.state_floats_per_layer() * kFloat;
}

Result<PoolSizing> SizePools(const ModelConfig& c, int page_size, int64_t budget_bytes_per_device,
                             double state_fraction) {
  RETURN_IF_ERROR(c.Validate().WithContext("model"));
  if (page_size < 1) {
    return InvalidArgument("page_size must be >= 1, got " + std::to_string(page_size));
  }
  if (budget_bytes_per_device <= 0) {
    return InvalidArgument("pool memory budget must be > 0 bytes per device, got " +
                           std::to_string(budget_bytes_per_device));
  }
  const int64_t slot_bytes = StateSlotBytes(c);
  const bool has_state = c.hybrid() && c.linear_layers() > 0 && slot_bytes > 0;
  // !(x >= 0) also catches NaN.
  if (has_state && !(state_fraction > 0.0 && state_fraction < 1.0)) {
    return InvalidArgument("state_fraction must be in (0, 1) for model '" + c.name + "' with " +
                           std::to_string(c.linear_layers()) + " linear layers, got " +
                           Fraction(state_fraction));
  }
  if (!has_state && !(state_fraction >= 0.0 && state_fraction < 1.0)) {
    return InvalidArgument("state_fraction must be in [0, 1), got " + Fraction(state_fraction));
  }

  PoolSizing s;
  const double budget = static_cast<double>(budget_bytes_per_device);
  if (has_state) {
    const auto state_budget = static_cast<int64_t>(std::floor(budget * state_fraction));
    const int64_t slots = state_budget / slot_bytes;
    if (slots < 1) {
      return InvalidArgument(
          "state pool share of " + std::to_string(state_budget) + " bytes (" +
          Fraction(state_fraction) + " of " + std::to_string(budget_bytes_per_device) +
          ") cannot hold one recurrent-state slot of " + std::to_string(slot_bytes) + " bytes (" +
          std::to_string(c.linear_layers()) + " linear layers x " +
          std::to_string(c.state_floats_per_layer()) + " floats)");
    }
    if (slots > std::numeric_limits<int>::max()) {
      return InvalidArgument("state pool share holds " + std::to_string(slots) +
                             " slots, more than an int counts");
    }
    s.state_slots = static_cast<int>(slots);
    s.state_bytes = slots * slot_bytes;
  }

  const int64_t page_bytes = KvPageBytes(c, page_size);
  const int64_t kv_budget = budget_bytes_per_device - s.state_bytes;
  const int64_t pages = page_bytes > 0 ? kv_budget / page_bytes : 0;
  const int need = KvPool::PagesFor(c.max_seq, page_size);
  if (pages < need) {
    return InvalidArgument("KV pool share of " + std::to_string(kv_budget) + " bytes holds " +
                           std::to_string(pages) + " pages of " + std::to_string(page_bytes) +
                           " bytes, fewer than the " + std::to_string(need) +
                           " one request of max_seq " + std::to_string(c.max_seq) + " needs (" +
                           std::to_string(need * page_bytes) + " bytes)");
  }
  if (pages > std::numeric_limits<int>::max()) {
    return InvalidArgument("KV pool share holds " + std::to_string(pages) +
                           " pages, more than an int counts; use a larger page_size");
  }
  s.kv_pages = static_cast<int>(pages);
  s.kv_bytes = pages * page_bytes;
  return s;
}

}  // namespace sy::engine
