#include "engine/moe/layout.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace sy::engine {
namespace {

using ::testing::ElementsAre;

TEST(ExpertLayoutTest, RoundRobinPlacesExpertModuloDevices) {
  const ExpertLayout l = ExpertLayout::RoundRobin(16, 4);
  EXPECT_EQ(l.experts(), 16);
  EXPECT_EQ(l.devices(), 4);
  EXPECT_EQ(l.device_of(5), 1);
  EXPECT_THAT(l.local_experts(1), ElementsAre(1, 5, 9, 13));
}

TEST(ExpertLayoutTest, UnevenAndExplicitPlacements) {
  const ExpertLayout l = ExpertLayout::RoundRobin(5, 3);
  EXPECT_THAT(l.local_experts(0), ElementsAre(0, 3));
  EXPECT_THAT(l.local_experts(2), ElementsAre(2));
  const ExpertLayout m({2, 2, 0, 1}, 3);
  EXPECT_THAT(m.local_experts(2), ElementsAre(0, 1));
  EXPECT_THAT(m.expert_device(), ElementsAre(2, 2, 0, 1));
  // More devices than experts: some devices own nothing.
  EXPECT_TRUE(ExpertLayout::RoundRobin(2, 4).local_experts(3).empty());
}

}  // namespace
}  // namespace sy::engine
