#include "engine/moe/expert_map.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "base/status_matchers.h"

namespace sy::engine {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ExpertMapTest, RoundRobinIsDeviceMajorWithExpertsModuloDevices) {
  const ExpertMap m = ExpertMap::RoundRobin(4, 1, 16, 4);
  EXPECT_EQ(m.layers(), 4);
  EXPECT_EQ(m.first_moe(), 1);
  EXPECT_EQ(m.slots(), 16);
  EXPECT_TRUE(m.uniform());
  EXPECT_EQ(m.slot_device(5), 1);
  EXPECT_EQ(m.device_first_slot(1), 4);
  EXPECT_EQ(m.phy2log(1, 5), 5);
  EXPECT_THAT(m.LocalExperts(1, 1), ElementsAre(1, 5, 9, 13));
  EXPECT_THAT(m.LocalExperts(0, 3), ElementsAre(3, 7, 11, 15));  // dense rows exist too
  EXPECT_THAT(m.replicas(2, 9), ElementsAre(6));
  for (int src = 0; src < 4; ++src) EXPECT_EQ(m.Replica(1, 5, 3, src), 5);
  EXPECT_THAT(m.ExpertsOnDevice(2), ElementsAre(2, 6, 10, 14));
}

TEST(ExpertMapTest, RoundRobinOverUnevenDevices) {
  const ExpertMap m = ExpertMap::RoundRobin(2, 0, 5, 3);
  EXPECT_FALSE(m.uniform());
  EXPECT_EQ(m.device_slots(0), 2);
  EXPECT_EQ(m.device_slots(2), 1);
  EXPECT_THAT(m.phy2log_row(0), ElementsAre(0, 3, 1, 4, 2));
  EXPECT_THAT(m.slot_device_row(), ElementsAre(0, 0, 1, 1, 2));
  EXPECT_THAT(m.LocalExperts(1, 1), ElementsAre(1, 4));
  // More devices than experts: the extra device holds nothing.
  const ExpertMap few = ExpertMap::RoundRobin(1, 0, 2, 4);
  EXPECT_EQ(few.device_slots(3), 0);
  EXPECT_TRUE(few.LocalExperts(0, 3).empty());
  EXPECT_TRUE(few.ExpertsOnDevice(3).empty());
}

TEST(ExpertMapTest, DeviceMajorRefusesBadRowsNamingTheProblem) {
  auto bad = [](int layers, int first_moe, const std::vector<std::vector<int>>& rows) {
    return ExpertMap::DeviceMajor(layers, first_moe, 4, 2, rows).status();
  };
  EXPECT_THAT(bad(2, 0, {}), StatusIs(StatusCode::kInvalidArgument, HasSubstr("no rows")));
  EXPECT_THAT(bad(2, 0, {{0, 1, 2, 3}}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("1 rows, expected one per")));
  EXPECT_THAT(bad(1, 0, {{0, 1, 2, 3, 0}}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("not a multiple of 2 devices")));
  EXPECT_THAT(bad(2, 0, {{0, 1, 2, 3}, {0, 1, 2, 3, 0, 1}}),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("layer 1"), HasSubstr("unequal length"))));
  EXPECT_THAT(bad(1, 0, {{0, 1, 2, 4}}),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("slot 3 holds expert 4"), HasSubstr("outside [0, 4)"))));
  EXPECT_THAT(bad(1, 0, {{0, 1, 2, 2, 1, 0}}),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("logical expert 3"), HasSubstr("no replica"))));
  // A dense layer's row is ignored (it copies the first MoE layer's).
  const Result<ExpertMap> m = ExpertMap::DeviceMajor(2, 1, 4, 2, {{9}, {3, 2, 1, 0}});
  ASSERT_THAT(m, IsOk());
  EXPECT_THAT(m->phy2log_row(0), ElementsAre(3, 2, 1, 0));
  EXPECT_THAT(m->LocalExperts(1, 1), ElementsAre(1, 0));
}

// E = 4 over P = 2 with N = 8: expert 0 has four replicas, two per device.
TEST(ExpertMapTest, ReplicasAreSpreadDeterministically) {
  const Result<ExpertMap> m = ExpertMap::DeviceMajor(1, 0, 4, 2, {{0, 1, 0, 2, 0, 3, 0, 1}});
  ASSERT_THAT(m, IsOk());
  EXPECT_EQ(m->device_slots(1), 4);
  EXPECT_THAT(m->replicas(0, 0), ElementsAre(0, 2, 4, 6));
  EXPECT_THAT(m->replicas(0, 1), ElementsAre(1, 7));
  EXPECT_THAT(m->ExpertsOnDevice(1), ElementsAre(0, 1, 3));
  // One source: consecutive rows cycle through the replicas in slot order.
  EXPECT_EQ(m->Replica(0, 0, 0, 0), 0);
  EXPECT_EQ(m->Replica(0, 0, 1, 0), 2);
  EXPECT_EQ(m->Replica(0, 0, 5, 0), 2);
  // Decode: every source sends one row (j = 0); with replicas >= sources
  // each source hits a different replica.
  std::set<int> used;
  for (int src = 0; src < 4; ++src) used.insert(m->Replica(0, 0, 0, src));
  EXPECT_EQ(used.size(), 4u);
  // Even to within one row per source: 6 rows from source 1 over 4 replicas.
  std::vector<int> per(8, 0);
  for (int j = 0; j < 6; ++j) per[m->Replica(0, 0, j, 1)] += 1;
  EXPECT_THAT(per, ElementsAre(1, 0, 2, 0, 2, 0, 1, 0));
}

TEST(ExpertMapTest, SetLayerReplacesOneRowOrNothing) {
  ExpertMap m = ExpertMap::RoundRobin(3, 1, 4, 2);  // rows {0, 2, 1, 3}
  const ExpertMap before = m;
  EXPECT_THAT(m.SetLayer(2, {1, 0, 3, 2}), IsOk());
  EXPECT_THAT(m.phy2log_row(2), ElementsAre(1, 0, 3, 2));
  EXPECT_THAT(m.phy2log_row(1), ElementsAre(0, 2, 1, 3));
  EXPECT_THAT(m.replicas(2, 3), ElementsAre(2));
  EXPECT_THAT(m.LocalExperts(2, 0), ElementsAre(1, 0));
  EXPECT_FALSE(m == before);
  const ExpertMap after = m;
  EXPECT_THAT(m.SetLayer(2, {1, 0, 3}), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(m.SetLayer(2, {1, 0, 3, 3}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("logical expert 2")));
  EXPECT_THAT(m.SetLayer(3, {0, 1, 2, 3}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("outside [0, 3)")));
  EXPECT_THAT(m.SetLayer(0, {0, 1, 2, 3}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("dense")));
  EXPECT_TRUE(m == after);
  EXPECT_THAT(m.SetLayer(2, before.phy2log_row(2)), IsOk());
  EXPECT_TRUE(m == before);
}

}  // namespace
}  // namespace sy::engine
