// Tests of engine/pools/state_pool.h: slot allocation, layout (every layer's
// recurrent and conv state are disjoint per slot), Zero and Copy.
#include "engine/pools/state_pool.h"

#include <gtest/gtest.h>

#include <vector>

#include "base/status_matchers.h"

namespace sy::engine {
namespace {

StatePoolOptions Small() { return {.slots = 3, .layers = 2, .state_floats = 5, .conv_floats = 4}; }

// A distinct value for every float of a slot, so a copy that misses or
// shifts anything shows up.
void Fill(StatePool* pool, int slot, float base) {
  for (int l = 0; l < pool->options().layers; ++l) {
    for (int i = 0; i < pool->options().state_floats; ++i)
      pool->State(slot, l)[i] = base + 10 * l + i;
    for (int i = 0; i < pool->options().conv_floats; ++i) {
      pool->Conv(slot, l)[i] = base + 10 * l + 5 + i;
    }
  }
}

std::vector<float> Contents(const StatePool& pool, int slot) {
  std::vector<float> v;
  for (int l = 0; l < pool.options().layers; ++l) {
    const float* s = pool.State(slot, l);
    v.insert(v.end(), s, s + pool.options().state_floats);
    const float* c = pool.Conv(slot, l);
    v.insert(v.end(), c, c + pool.options().conv_floats);
  }
  return v;
}

TEST(StatePoolTest, AllocatesUntilExhausted) {
  StatePool pool(Small());
  EXPECT_EQ(pool.slot_bytes(), 2 * (5 + 4) * 4);
  for (int want = 0; want < 3; ++want) EXPECT_EQ(pool.Allocate().value(), want);
  EXPECT_THAT(pool.Allocate(), StatusIs(StatusCode::kResourceExhausted));
  pool.Free(1);
  EXPECT_EQ(pool.used_slots(), 2);
  EXPECT_EQ(pool.Allocate().value(), 1);
}

TEST(StatePoolTest, CopyDuplicatesEveryLayerAndLeavesOtherSlotsAlone) {
  StatePool pool(Small());
  Fill(&pool, 0, 100.0f);
  Fill(&pool, 1, 200.0f);
  Fill(&pool, 2, 300.0f);
  const std::vector<float> src = Contents(pool, 0), other = Contents(pool, 2);
  pool.Copy(0, 1);
  EXPECT_EQ(Contents(pool, 1), src);
  EXPECT_EQ(Contents(pool, 0), src);    // the source is untouched
  EXPECT_EQ(Contents(pool, 2), other);  // so is every other slot
  // The copy is independent of its source afterwards.
  pool.State(1, 1)[0] = -1.0f;
  EXPECT_EQ(pool.State(0, 1)[0], src[9]);
  pool.Copy(2, 2);  // onto itself: nothing changes
  EXPECT_EQ(Contents(pool, 2), other);
}

TEST(StatePoolTest, ZeroClearsOnlyItsSlot) {
  StatePool pool(Small());
  Fill(&pool, 0, 1.0f);
  Fill(&pool, 1, 2.0f);
  const std::vector<float> kept = Contents(pool, 1);
  pool.Zero(0);
  EXPECT_EQ(Contents(pool, 0), std::vector<float>(18, 0.0f));
  EXPECT_EQ(Contents(pool, 1), kept);
}

TEST(StatePoolTest, CopyWithoutConvState) {
  StatePool pool({.slots = 2, .layers = 3, .state_floats = 4, .conv_floats = 0});
  for (int l = 0; l < 3; ++l) {
    for (int i = 0; i < 4; ++i) pool.State(0, l)[i] = static_cast<float>(l * 4 + i + 1);
  }
  pool.Copy(0, 1);
  for (int l = 0; l < 3; ++l) {
    for (int i = 0; i < 4; ++i) EXPECT_EQ(pool.State(1, l)[i], pool.State(0, l)[i]);
  }
}

}  // namespace
}  // namespace sy::engine
