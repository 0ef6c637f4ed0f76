#include "engine/eplb/placement.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>

#include "base/status_matchers.h"
#include "tests/engine/eplb/eplb_reference.h"

namespace sy::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

struct Config {
  int experts, replicas, groups, nodes, devices;
  EplbPolicy policy;
};

std::string Describe(const Config& c) {
  return "E=" + std::to_string(c.experts) + " N=" + std::to_string(c.replicas) +
         " G=" + std::to_string(c.groups) + " K=" + std::to_string(c.nodes) +
         " P=" + std::to_string(c.devices) + " " + std::string(EplbPolicyName(c.policy));
}

EplbOptions OptionsOf(const Config& c) {
  return EplbOptions{.num_replicas = c.replicas,
                     .num_groups = c.groups,
                     .num_nodes = c.nodes,
                     .num_devices = c.devices,
                     .policy = c.policy};
}

// Matrices of several shapes of skew, including ties and zeros (which
// exercise the tie-breaking rules) and non-integer weights.
EplbLoad RandomLoad(std::mt19937& rng, int layers, int experts, int kind) {
  EplbLoad load(layers, std::vector<double>(experts));
  for (auto& row : load) {
    std::vector<int> perm(experts);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int e = 0; e < experts; ++e) {
      switch (kind % 4) {
        case 0:  // uniform small integers: many ties
          row[e] = static_cast<double>(rng() % 8);
          break;
        case 1:  // Zipf-like: a few hot experts
          row[e] = std::floor(5000.0 / std::pow(perm[e] + 1, 1.3));
          break;
        case 2:  // real-valued
          row[e] = std::uniform_real_distribution<double>(0, 1000)(rng);
          break;
        default:  // one very hot expert, some idle ones
          row[e] = perm[e] == 0 ? 10000.0 : (perm[e] % 3 == 0 ? 0.0 : 1.0 + rng() % 50);
      }
    }
  }
  return load;
}

// The placement's invariants, independent of how it was computed.
void CheckInvariants(const EplbLoad& load, const Config& c, const EplbPlacement& p) {
  SCOPED_TRACE(Describe(c));
  const int layers = static_cast<int>(load.size());
  ASSERT_EQ(p.num_layers(), layers);
  ASSERT_EQ(p.num_replicas(), c.replicas);
  ASSERT_EQ(p.num_logical(), c.experts);
  ASSERT_EQ(p.num_devices, c.devices);
  ASSERT_EQ(p.slots_per_device() * c.devices, c.replicas);  // equal slots per device
  ASSERT_EQ(static_cast<int>(p.balancedness.size()), layers);
  int max_cnt = 0;
  for (int l = 0; l < layers; ++l) {
    const auto& logcnt = p.logcnt[l];
    EXPECT_EQ(std::accumulate(logcnt.begin(), logcnt.end(), 0), c.replicas);
    std::vector<int> seen(c.experts, 0);
    for (int s = 0; s < c.replicas; ++s) {
      const int e = p.phy2log[l][s];
      ASSERT_GE(e, 0);
      ASSERT_LT(e, c.experts);
      // log2phy lists slot s at its replica rank.
      ASSERT_EQ(p.log2phy[l][e][p.phy_rank[l][s]], s);
      ++seen[e];
    }
    for (int e = 0; e < c.experts; ++e) {
      EXPECT_GE(logcnt[e], 1) << "expert " << e << " has no replica";
      EXPECT_EQ(seen[e], logcnt[e]);
      max_cnt = std::max(max_cnt, logcnt[e]);
      for (int r = 0; r < p.max_replicas(); ++r) {
        EXPECT_EQ(p.log2phy[l][e][r] >= 0, r < logcnt[e]) << "log2phy padding";
      }
    }
    if (p.policy == EplbPolicy::kHierarchical) {
      // All replicas of a group's experts live on one node.
      const int group_size = c.experts / c.groups;
      const int slots_per_node = c.replicas / c.nodes;
      std::vector<int> node_of_group(c.groups, -1);
      for (int s = 0; s < c.replicas; ++s) {
        const int g = p.phy2log[l][s] / group_size;
        const int node = s / slots_per_node;
        if (node_of_group[g] < 0) node_of_group[g] = node;
        EXPECT_EQ(node_of_group[g], node) << "group " << g << " spans nodes";
      }
    }
    EXPECT_DOUBLE_EQ(p.balancedness[l],
                     EplbBalancedness(EplbDeviceLoads(load[l], p.phy2log[l], c.devices)));
    EXPECT_GT(p.balancedness[l], 0.0);
    EXPECT_LE(p.balancedness[l], 1.0 + 1e-12);
  }
  EXPECT_EQ(p.max_replicas(), max_cnt);
}

void CheckMatchesReference(const EplbLoad& load, const Config& c, const EplbPlacement& p) {
  SCOPED_TRACE(Describe(c));
  const auto ref = eplb_reference::RebalanceExperts(load, c.replicas, c.groups, c.nodes, c.devices,
                                                    c.policy == EplbPolicy::kGlobal);
  for (size_t l = 0; l < load.size(); ++l) {
    ASSERT_THAT(p.phy2log[l], ElementsAreArray(ref.phy2log[l])) << "layer " << l;
    ASSERT_THAT(p.logcnt[l], ElementsAreArray(ref.logcnt[l])) << "layer " << l;
    ASSERT_EQ(p.log2phy[l].size(), ref.log2phy[l].size());
    for (size_t e = 0; e < ref.log2phy[l].size(); ++e) {
      ASSERT_THAT(p.log2phy[l][e], ElementsAreArray(ref.log2phy[l][e]))
          << "layer " << l << " expert " << e;
    }
  }
}

// Balancedness of today's layout: no replicas, expert e on device e % P
// (ExpertMap::RoundRobin).
double RoundRobinBalancedness(const std::vector<double>& row, int devices) {
  std::vector<double> device(devices, 0.0);
  for (size_t e = 0; e < row.size(); ++e) device[e % devices] += row[e];
  return EplbBalancedness(device);
}

const Config kConfigs[] = {
    {12, 16, 4, 2, 8, EplbPolicy::kAuto},          // the README example's shape
    {16, 16, 4, 2, 4, EplbPolicy::kAuto},          // no redundant experts
    {16, 24, 4, 2, 4, EplbPolicy::kHierarchical},  //
    {32, 48, 8, 4, 8, EplbPolicy::kAuto},          //
    {64, 80, 8, 2, 8, EplbPolicy::kHierarchical},  //
    {20, 24, 5, 1, 4, EplbPolicy::kAuto},          // one node
    {10, 15, 5, 5, 5, EplbPolicy::kAuto},          // one group per node, one device per node
    {12, 16, 3, 2, 8, EplbPolicy::kAuto},          // G % K != 0: global
    {16, 20, 4, 2, 4, EplbPolicy::kGlobal},        // global asked for
    {7, 9, 1, 1, 3, EplbPolicy::kGlobal},          //
    {256, 288, 8, 4, 32, EplbPolicy::kAuto},       // DeepSeek-V3's shape
    {256, 288, 8, 4, 32, EplbPolicy::kGlobal},     //
};

TEST(EplbPlacementTest, InvariantsAndReferenceOnRandomMatrices) {
  std::mt19937 rng(20250611);
  for (const Config& c : kConfigs) {
    const int trials = c.experts > 100 ? 2 : 12;
    for (int t = 0; t < trials; ++t) {
      const EplbLoad load = RandomLoad(rng, 1 + t % 3, c.experts, t);
      Result<EplbPlacement> p = RebalanceExperts(load, OptionsOf(c));
      ASSERT_THAT(p, IsOk()) << Describe(c);
      CheckInvariants(load, c, *p);
      CheckMatchesReference(load, c, *p);
    }
  }
}

TEST(EplbPlacementTest, AutoPicksHierarchicalOnlyWhenGroupsDivideOverNodes) {
  const EplbLoad load = {{5, 1, 4, 2, 8, 3, 7, 6, 0, 9, 2, 1}};
  Result<EplbPlacement> h = RebalanceExperts(load, OptionsOf({12, 16, 4, 2, 8, EplbPolicy::kAuto}));
  ASSERT_THAT(h, IsOk());
  EXPECT_EQ(h->policy, EplbPolicy::kHierarchical);
  Result<EplbPlacement> g = RebalanceExperts(load, OptionsOf({12, 16, 3, 2, 8, EplbPolicy::kAuto}));
  ASSERT_THAT(g, IsOk());
  EXPECT_EQ(g->policy, EplbPolicy::kGlobal);
  // Global ignores groups and nodes entirely.
  Result<EplbPlacement> g1 =
      RebalanceExperts(load, OptionsOf({12, 16, 1, 1, 8, EplbPolicy::kHierarchical}));
  ASSERT_THAT(g1, IsOk());
  EXPECT_EQ(g->phy2log, g1->phy2log);
}

// deepseek-ai/EPLB README: 2 layers, 12 experts, 16 replicas, 4 groups,
// 2 nodes, 8 GPUs; its printed phy2log.
TEST(EplbPlacementTest, ReadmeExample) {
  const std::vector<std::vector<int64_t>> weight = {
      {90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86},
      {20, 107, 104, 64, 19, 197, 187, 157, 172, 86, 16, 27}};
  Result<EplbPlacement> p =
      RebalanceExperts(weight, OptionsOf({12, 16, 4, 2, 8, EplbPolicy::kAuto}));
  ASSERT_THAT(p, IsOk());
  EXPECT_EQ(p->policy, EplbPolicy::kHierarchical);
  EXPECT_THAT(p->phy2log[0], ElementsAre(5, 6, 5, 7, 8, 4, 3, 4, 10, 9, 10, 2, 0, 1, 11, 1));
  EXPECT_THAT(p->phy2log[1], ElementsAre(7, 10, 6, 8, 6, 11, 8, 9, 2, 4, 5, 1, 5, 0, 3, 1));
}

// Worked by hand in docs/EPLB.md: one hot expert, 2 devices, global.
TEST(EplbPlacementTest, HotExpertWorkedExample) {
  const EplbLoad load = {{90, 10, 10, 10}};
  Result<EplbPlacement> p = RebalanceExperts(load, OptionsOf({4, 6, 1, 1, 2, EplbPolicy::kGlobal}));
  ASSERT_THAT(p, IsOk());
  EXPECT_THAT(p->phy2log[0], ElementsAre(0, 0, 3, 0, 1, 2));
  EXPECT_THAT(p->phy_rank[0], ElementsAre(0, 2, 0, 1, 0, 0));
  EXPECT_THAT(p->logcnt[0], ElementsAre(3, 1, 1, 1));
  EXPECT_THAT(p->log2phy[0], ElementsAre(ElementsAre(0, 3, 1), ElementsAre(4, -1, -1),
                                         ElementsAre(5, -1, -1), ElementsAre(2, -1, -1)));
  EXPECT_DOUBLE_EQ(p->balancedness[0], 60.0 / 70.0);          // devices carry 70 and 50
  EXPECT_DOUBLE_EQ(RoundRobinBalancedness(load[0], 2), 0.6);  // 100 and 20
}

TEST(EplbPlacementTest, BalancedPackingTieBreaking) {
  // Sorted: 0 (10), 3 (10), 1 (1), 2 (1); equal packs go to the lower number.
  const EplbPacking k = EplbBalancedPacking({10, 1, 1, 10}, 2);
  EXPECT_THAT(k.pack, ElementsAre(0, 0, 1, 1));
  EXPECT_THAT(k.rank_in_pack, ElementsAre(0, 1, 1, 0));
  // One item per pack: identity, as in the reference.
  const EplbPacking id = EplbBalancedPacking({1, 5, 3}, 3);
  EXPECT_THAT(id.pack, ElementsAre(0, 1, 2));
  EXPECT_THAT(id.rank_in_pack, ElementsAre(0, 0, 0));
}

TEST(EplbPlacementTest, ReplicateExpertsPrefersHighestLoadPerReplica) {
  // Extra slots go to 12 (12 > 8), then 8 (8 > 6), then 12 (6 > 4), then
  // 8/2 = 4 ties 12/3 = 4: the lower index, expert 0.
  const EplbReplication r = EplbReplicateExperts({8, 12, 3}, 7);
  EXPECT_THAT(r.phy2log, ElementsAre(0, 1, 2, 1, 0, 1, 0));
  EXPECT_THAT(r.rank, ElementsAre(0, 0, 0, 1, 1, 2, 2));
  EXPECT_THAT(r.logcnt, ElementsAre(3, 3, 1));
}

TEST(EplbPlacementTest, NeverWorseThanRoundRobinOnSkewedLoads) {
  std::mt19937 rng(7);
  for (const Config& c : kConfigs) {
    if (c.replicas == c.experts) continue;  // nothing to replicate
    // With one device per node the hierarchical policy must keep a whole
    // group on one device, whatever its load: locality over balance (see
    // HierarchicalTradesBalanceForLocality).
    const bool pinned_groups = c.devices == c.nodes && c.policy != EplbPolicy::kGlobal &&
                               c.groups % c.nodes == 0 && c.groups > 1;
    if (pinned_groups) continue;
    for (int t = 0; t < 6; ++t) {
      const EplbLoad load = RandomLoad(rng, 2, c.experts, t % 2 == 0 ? 1 : 3);  // skewed kinds
      Result<EplbPlacement> p = RebalanceExperts(load, OptionsOf(c));
      ASSERT_THAT(p, IsOk());
      for (size_t l = 0; l < load.size(); ++l) {
        EXPECT_GE(p->balancedness[l] + 1e-12, RoundRobinBalancedness(load[l], c.devices))
            << Describe(c) << " trial " << t << " layer " << l;
      }
    }
  }
}

TEST(EplbPlacementTest, StrictlyBetterOnAClearlySkewedLoad) {
  // Expert 5 takes most tokens: round-robin leaves one device with it.
  std::vector<double> row(16, 10.0);
  row[5] = 500.0;
  const double before = RoundRobinBalancedness(row, 4);
  EXPECT_NEAR(before, 162.5 / 530.0, 1e-12);
  Result<EplbPlacement> global =
      RebalanceExperts(EplbLoad{row}, OptionsOf({16, 24, 4, 2, 4, EplbPolicy::kGlobal}));
  Result<EplbPlacement> hier =
      RebalanceExperts(EplbLoad{row}, OptionsOf({16, 24, 4, 2, 4, EplbPolicy::kHierarchical}));
  ASSERT_THAT(global, IsOk());
  ASSERT_THAT(hier, IsOk());
  EXPECT_GE(global->logcnt[0][5], 5);  // the hot expert takes most extra slots
  EXPECT_GE(hier->logcnt[0][5], 4);
  // Hand-computed: 9 replicas of expert 5 carry 500/9 each; the greedy
  // packing leaves device 0 with 3 of them and 3 tens: 162.5 / 196.67.
  EXPECT_DOUBLE_EQ(global->balancedness[0], 162.5 / (3 * 500.0 / 9 + 30));
  // Hierarchical keeps group 1 (experts 4..7) on one node, which bounds it
  // by that node's share: 610 of 650 tokens over 2 of 4 devices.
  EXPECT_GT(hier->balancedness[0], before + 0.15);
  EXPECT_LE(hier->balancedness[0], 162.5 / 305.0 + 1e-12);
}

TEST(EplbPlacementTest, HierarchicalTradesBalanceForLocality) {
  // 5 nodes of one device, one group each: the hot group's device carries
  // the whole group, while the global policy may split it.
  const EplbLoad load = {{1000, 900, 10, 10, 10, 10, 10, 10, 10, 10}};
  Result<EplbPlacement> hier =
      RebalanceExperts(load, OptionsOf({10, 15, 5, 5, 5, EplbPolicy::kAuto}));
  Result<EplbPlacement> global =
      RebalanceExperts(load, OptionsOf({10, 15, 5, 5, 5, EplbPolicy::kGlobal}));
  ASSERT_THAT(hier, IsOk());
  ASSERT_THAT(global, IsOk());
  EXPECT_EQ(hier->policy, EplbPolicy::kHierarchical);
  // Mean 396, hot device 1900.
  EXPECT_DOUBLE_EQ(hier->balancedness[0], 1980.0 / 5 / 1900.0);
  EXPECT_LT(hier->balancedness[0], RoundRobinBalancedness(load[0], 5));  // 396 / 1010
  // Global: expert 0 x4 (250 each), expert 1 x3 (300 each); the greedy
  // packing ends with two devices at 250 + 250 + 10 = 510.
  EXPECT_DOUBLE_EQ(global->balancedness[0], 1980.0 / 5 / 510.0);
  EXPECT_THAT(global->logcnt[0], ElementsAre(4, 3, 1, 1, 1, 1, 1, 1, 1, 1));
}

TEST(EplbPlacementTest, BalancednessDefinition) {
  EXPECT_DOUBLE_EQ(EplbBalancedness({3, 3, 3}), 1.0);
  EXPECT_DOUBLE_EQ(EplbBalancedness({4, 0}), 0.5);
  EXPECT_DOUBLE_EQ(EplbBalancedness({0, 0}), 1.0);  // nothing to balance
  // Expert 0's load splits over its two replicas (slots 0 and 2).
  EXPECT_THAT(EplbDeviceLoads({8, 2}, {0, 1, 0, 1}, 2), ElementsAre(5.0, 5.0));
  EXPECT_THAT(EplbDeviceLoads({8, 2, 6}, {0, 0, 1, 2}, 2), ElementsAre(8.0, 8.0));
}

TEST(EplbPlacementTest, AllZeroLoadIsValid) {
  const EplbLoad load(2, std::vector<double>(8, 0.0));
  Result<EplbPlacement> p = RebalanceExperts(load, OptionsOf({8, 12, 2, 2, 4, EplbPolicy::kAuto}));
  ASSERT_THAT(p, IsOk());
  CheckInvariants(load, {8, 12, 2, 2, 4, EplbPolicy::kAuto}, *p);
  EXPECT_DOUBLE_EQ(p->balancedness[0], 1.0);
}

TEST(EplbPlacementTest, ValidationNamesTheParameter) {
  const EplbLoad load(1, std::vector<double>(8, 1.0));
  const auto run = [&](const Config& c) { return RebalanceExperts(load, OptionsOf(c)); };
  const auto kInvalid = StatusCode::kInvalidArgument;
  EXPECT_THAT(run({8, 6, 1, 1, 2, EplbPolicy::kAuto}),
              StatusIs(kInvalid, HasSubstr("num_replicas (6) is less than")));
  EXPECT_THAT(run({8, 10, 1, 1, 4, EplbPolicy::kAuto}),
              StatusIs(kInvalid, HasSubstr("not a multiple of num_devices (4)")));
  EXPECT_THAT(run({8, 12, 3, 2, 4, EplbPolicy::kHierarchical}),
              StatusIs(kInvalid, HasSubstr("num_groups (3) is not a multiple of num_nodes (2)")));
  EXPECT_THAT(run({8, 12, 3, 3, 3, EplbPolicy::kAuto}),
              StatusIs(kInvalid, HasSubstr("num_groups (3) does not divide")));
  EXPECT_THAT(run({8, 12, 4, 2, 3, EplbPolicy::kAuto}),
              StatusIs(kInvalid, HasSubstr("num_devices (3) is not a multiple of num_nodes (2)")));
  EXPECT_THAT(run({8, 12, 4, 2, 0, EplbPolicy::kAuto}),
              StatusIs(kInvalid, HasSubstr("num_devices must be >= 1")));
  EXPECT_THAT(run({8, 12, 0, 1, 4, EplbPolicy::kAuto}),
              StatusIs(kInvalid, HasSubstr("num_groups must be >= 1")));
  EXPECT_THAT(run({8, 12, 1, 0, 4, EplbPolicy::kAuto}),
              StatusIs(kInvalid, HasSubstr("num_nodes must be >= 1")));
  // Global ignores what only the hierarchical policy needs.
  EXPECT_THAT(run({8, 12, 3, 2, 3, EplbPolicy::kGlobal}), IsOk());

  const EplbOptions ok{.num_replicas = 8,
                       .num_groups = 1,
                       .num_nodes = 1,
                       .num_devices = 2,
                       .policy = EplbPolicy::kAuto};
  EXPECT_THAT(RebalanceExperts(EplbLoad{}, ok), StatusIs(kInvalid, HasSubstr("no layers")));
  EXPECT_THAT(RebalanceExperts(EplbLoad{{}}, ok), StatusIs(kInvalid, HasSubstr("no experts")));
  EXPECT_THAT(RebalanceExperts(EplbLoad{{1, 2, 3, 4}, {1, 2, 3}}, ok),
              StatusIs(kInvalid, HasSubstr("ragged matrix: layer 1 has 3 experts")));
  EXPECT_THAT(RebalanceExperts(EplbLoad{{1, 2, -3, 4}}, ok),
              StatusIs(kInvalid, HasSubstr("load[0][2] = -3 is negative")));
  EXPECT_THAT(RebalanceExperts(EplbLoad{{1, NAN, 3, 4}}, ok),
              StatusIs(kInvalid, HasSubstr("load[0][1] is not finite")));
  EXPECT_THAT(RebalanceExperts(std::vector<std::vector<int64_t>>{{1, -2}}, ok),
              StatusIs(kInvalid, HasSubstr("load[0][1] = -2 is negative")));
}

TEST(EplbPlacementTest, PolicyNames) {
  for (EplbPolicy p : {EplbPolicy::kAuto, EplbPolicy::kHierarchical, EplbPolicy::kGlobal}) {
    Result<EplbPolicy> back = ParseEplbPolicy(EplbPolicyName(p));
    ASSERT_THAT(back, IsOk());
    EXPECT_EQ(*back, p);
  }
  EXPECT_THAT(ParseEplbPolicy("greedy"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("auto, hierarchical, global")));
}

}  // namespace
}  // namespace sy::engine
