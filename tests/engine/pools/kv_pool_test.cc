#include "engine/pools/kv_pool.h"

#include <gtest/gtest.h>

#include "base/status_matchers.h"

namespace sy::engine {
namespace {

KvPoolOptions Small() {
  return {.num_pages = 4, .page_size = 2, .layers = 2, .kv_heads = 1, .head_dim = 3};
}

TEST(KvPoolTest, AllocatesUntilExhaustedAndRefusesWithoutChange) {
  KvPool pool(Small());
  std::vector<int32_t> pages;
  ASSERT_THAT(pool.Allocate(3, &pages), IsOk());
  EXPECT_EQ(pages, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(pool.free_pages(), 1);
  EXPECT_THAT(pool.Allocate(2, &pages), StatusIs(StatusCode::kResourceExhausted));
  EXPECT_EQ(pages.size(), 3u);
  pool.Free(pages);
  EXPECT_EQ(pool.free_pages(), 4);
  EXPECT_EQ(pool.used_pages(), 0);
}

TEST(KvPoolTest, SlotsAreDisjoint) {
  KvPool pool(Small());
  pool.K(1, 1, 1)[2] = 7.0f;
  pool.V(1, 1, 1)[2] = 9.0f;
  EXPECT_EQ(pool.K(1, 1, 1)[2], 7.0f);
  EXPECT_EQ(pool.V(1, 1, 1)[2], 9.0f);
  EXPECT_EQ(pool.K(1, 1, 0)[2], 0.0f);
  EXPECT_EQ(pool.K(1, 0, 1)[2], 0.0f);
  EXPECT_EQ(pool.K(2, 1, 1)[2], 0.0f);
  EXPECT_EQ(KvPool::PagesFor(5, 2), 3);
}

}  // namespace
}  // namespace sy::engine
