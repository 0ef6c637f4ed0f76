#include "engine/pools/pool_sizing.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "base/status_matchers.h"
#include "engine/pools/kv_pool.h"
#include "engine/pools/state_pool.h"

namespace sy::engine {
namespace {

using ::testing::HasSubstr;

ModelConfig Preset(const char* name) { return PresetConfig(name).value(); }

// The numbers below are worked out by hand from the presets' dimensions, not
// through ModelConfig's helpers, so a wrong helper cannot agree with itself.

TEST(PoolSizingTest, Ling3TinySlotAndPageBytes) {
  const ModelConfig c = Preset("ling3-tiny");
  // 24 layers in groups of 4: 6 MLA, 18 KDA. KDA slot: 16 heads x [128 x 128]
  // recurrent state + conv state of the last 3 inputs of q, k, v (16 x 128 each).
  const int64_t slot = int64_t{18} * (16 * 128 * 128 + 3 * 3 * 16 * 128) * 4;
  EXPECT_EQ(slot, 20'201'472);
  EXPECT_EQ(StateSlotBytes(c), slot);
  // MLA latent: kv_lora_rank 512 + rope 64 per token per layer.
  const int64_t page = int64_t{6} * 16 * (512 + 64) * 4;
  EXPECT_EQ(page, 221'184);
  EXPECT_EQ(KvPageBytes(c, 16), page);
}

TEST(PoolSizingTest, Ling3TinySplitsAGigabyte) {
  const ModelConfig c = Preset("ling3-tiny");
  const int64_t budget = int64_t{1} << 30;
  const int64_t slot = 20'201'472, page = 221'184;
  Result<PoolSizing> s = SizePools(c, 16, budget, 0.25);
  ASSERT_THAT(s.status(), IsOk());
  // floor(268435456 / 20201472) = 13 slots; the rest to pages.
  EXPECT_EQ(s->state_slots, 13);
  EXPECT_EQ(s->state_bytes, 13 * slot);
  EXPECT_EQ(s->kv_pages, (budget - 13 * slot) / page);
  EXPECT_EQ(s->kv_pages, 3667);
  EXPECT_EQ(s->kv_bytes, int64_t{3667} * page);
  EXPECT_LE(s->kv_bytes + s->state_bytes, budget);
  EXPECT_GT(s->kv_bytes + s->state_bytes + page, budget);  // less than a page left over
}

TEST(PoolSizingTest, TinyHybridMatchesTheRealPools) {
  const ModelConfig c = Preset("tiny-hybrid");
  // 8 layers: 2 MLA (latent 128 + 32), 6 KDA (4 heads x [64 x 64] + 3 x 3 x 4 x 64).
  const int64_t slot = int64_t{6} * (4 * 64 * 64 + 3 * 3 * 4 * 64) * 4;
  const int64_t page = int64_t{2} * 16 * (128 + 32) * 4;
  EXPECT_EQ(slot, 448'512);
  EXPECT_EQ(page, 20'480);
  Result<PoolSizing> s = SizePools(c, 16, 64 << 20, 0.5);
  ASSERT_THAT(s.status(), IsOk());
  EXPECT_EQ(s->state_slots, (32 << 20) / slot);  // 74
  EXPECT_EQ(s->state_slots, 74);
  EXPECT_EQ(s->kv_pages, ((64 << 20) - 74 * slot) / page);
  // The pools built from the sizing hold exactly the bytes it promised.
  KvPool kv({.num_pages = s->kv_pages,
             .page_size = 16,
             .layers = c.full_attention_layers(),
             .latent_dim = c.mla_latent_dim()});
  StatePool state({.slots = s->state_slots,
                   .layers = c.linear_layers(),
                   .state_floats = int64_t{c.heads} * c.linear_head_dim * c.linear_head_dim,
                   .conv_floats = c.conv_state_floats()});
  EXPECT_EQ(kv.page_bytes(), page);
  EXPECT_EQ(kv.bytes(), s->kv_bytes);
  EXPECT_EQ(state.slot_bytes(), slot);
  EXPECT_EQ(state.bytes(), s->state_bytes);
}

TEST(PoolSizingTest, NonHybridGivesEverythingToKvAndIgnoresTheFraction) {
  const ModelConfig c = Preset("tiny");
  // 4 MHA layers x 16 tokens x K and V of 4 heads x 64.
  const int64_t page = int64_t{4} * 16 * 2 * 4 * 64 * 4;
  EXPECT_EQ(KvPageBytes(c, 16), page);
  EXPECT_EQ(StateSlotBytes(c), 0);
  for (double f : {0.0, 0.3}) {
    Result<PoolSizing> s = SizePools(c, 16, 100 * page + 5, f);
    ASSERT_THAT(s.status(), IsOk()) << f;
    EXPECT_EQ(s->kv_pages, 100);
    EXPECT_EQ(s->kv_bytes, 100 * page);
    EXPECT_EQ(s->state_slots, 0);
    EXPECT_EQ(s->state_bytes, 0);
  }
  EXPECT_THAT(SizePools(c, 16, 100 * page, 1.0).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("[0, 1)")));
  EXPECT_THAT(SizePools(c, 16, 100 * page, -0.1).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("[0, 1)")));
}

TEST(PoolSizingTest, HybridFractionMustBeStrictlyBetweenZeroAndOne) {
  const ModelConfig c = Preset("tiny-hybrid");
  for (double f : {0.0, 1.0, -0.5, 1.5, std::nan("")}) {
    EXPECT_THAT(SizePools(c, 16, 64 << 20, f).status(),
                StatusIs(StatusCode::kInvalidArgument, HasSubstr("(0, 1)")))
        << f;
  }
}

TEST(PoolSizingTest, RefusesABudgetTooSmallForOneSlot) {
  const ModelConfig c = Preset("tiny-hybrid");
  // 10% of 4 MB is 419430 bytes < one 448512-byte slot.
  EXPECT_THAT(SizePools(c, 16, 4 << 20, 0.1).status(),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("cannot hold one recurrent-state slot of 448512 bytes")));
}

TEST(PoolSizingTest, RefusesABudgetTooSmallForOneMaxSeqRequest) {
  const ModelConfig c = Preset("tiny-hybrid");
  // max_seq 2048 needs 128 pages of 20480 bytes = 2621440 bytes of KV.
  const int64_t slot = 448'512, need = 128 * 20'480;
  EXPECT_THAT(SizePools(c, 16, need + slot - 1, 0.2).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("fewer than the 128")));
  // One byte more fits exactly one slot and one max_seq request... at a
  // fraction that gives the state pool just the slot.
  const double f = static_cast<double>(slot) / static_cast<double>(need + slot);
  Result<PoolSizing> s = SizePools(c, 16, need + slot, f + 1e-12);
  ASSERT_THAT(s.status(), IsOk());
  EXPECT_EQ(s->state_slots, 1);
  EXPECT_EQ(s->kv_pages, 128);
}

TEST(PoolSizingTest, RefusesBadArguments) {
  const ModelConfig c = Preset("tiny-hybrid");
  EXPECT_THAT(SizePools(c, 0, 64 << 20, 0.5).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("page_size")));
  EXPECT_THAT(SizePools(c, 16, 0, 0.5).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("budget")));
  ModelConfig bad = c;
  bad.linear_head_dim = 0;
  EXPECT_THAT(SizePools(bad, 16, 64 << 20, 0.5).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("model")));
}

}  // namespace
}  // namespace sy::engine
