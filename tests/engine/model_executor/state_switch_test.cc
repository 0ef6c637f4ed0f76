// The request-state half of a TP <-> EP switch (issue 5; parallel_switch.h,
// engine/parallelism/state_reshard.h): in-flight requests' KV pages and
// recurrent-state slots move to the sharded reading and back with their
// page tables and slot ids unchanged, the figures count them, and a switch
// that fails while moving state rolls everything (weights too) back.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "engine/model_executor/model_runner.h"
#include "tests/engine/model_executor/switch_test_util.h"

namespace sy::engine {
namespace {

using ::testing::HasSubstr;

int UsedPages(ModelRunner& r) {
  int n = 0;
  for (int d = 0; d < r.devices(); ++d) n += r.kv_pool(d).used_pages();
  return n;
}

int UsedSlots(ModelRunner& r) {
  int n = 0;
  for (int d = 0; d < r.devices(); ++d) n += r.state_pool(d).used_slots();
  return n;
}

class StateSwitchTest : public ::testing::TestWithParam<const char*> {};

// In flight: every used page and slot moves, split over the devices; the
// pools read sharded in TP and whole again in EP; logits stay bit-identical
// to a runner that never switched across EP -> TP -> EP mid-decode.
TEST_P(StateSwitchTest, InFlightStateMovesAndLogitsStayTheSame) {
  auto sw = Make(GetParam(), {.devices = kDevices});
  auto ep = Make(GetParam(), {.devices = kDevices});
  ASSERT_TRUE(sw && ep);
  Session ss(sw.get()), es(ep.get());
  ASSERT_TRUE(SameBits(ss.Next(), es.Next()));  // prefill in EP
  const int pages = UsedPages(*sw), slots = UsedSlots(*sw);
  ASSERT_GT(pages, 0);
  auto to_tp = sw->SwitchParallelism(ParallelMode::kTP);
  ASSERT_THAT(to_tp.status(), IsOk());
  EXPECT_EQ(to_tp->kv_pages, pages);
  EXPECT_EQ(to_tp->state_slots, slots);
  EXPECT_EQ(slots > 0, sw->config().linear_layers() > 0);
  // Each page leaves its home in P - 1 of its P blocks.
  const int64_t page_bytes = sw->kv_pool(0).page_bytes();
  const int64_t slot_bytes = sw->state_pool(0).slot_bytes();
  EXPECT_EQ(to_tp->state_bytes,
            (pages * page_bytes + slots * slot_bytes) * (kDevices - 1) / kDevices);
  EXPECT_GT(to_tp->state_ms, 0.0);
  for (int d = 0; d < kDevices; ++d) {
    EXPECT_EQ(sw->kv_pool(d).shards(), kDevices);
    if (slots > 0) {
      EXPECT_EQ(sw->state_pool(d).shards(), kDevices);
    }
  }
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(SameBits(ss.Next(), es.Next())) << "TP decode " << i;
  auto to_ep = sw->SwitchParallelism(ParallelMode::kEP);
  ASSERT_THAT(to_ep.status(), IsOk());
  EXPECT_EQ(to_ep->kv_pages, pages);
  for (int d = 0; d < kDevices; ++d) EXPECT_EQ(sw->kv_pool(d).shards(), 1);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(SameBits(ss.Next(), es.Next())) << "EP decode " << i;
}

// A fault in every phase of the state move, both directions: UNAVAILABLE
// naming the phase, the weights back in the old layout with equal
// checksums, the pools in the old reading, and later logits equal to a
// runner that never switched.
TEST_P(StateSwitchTest, StateFaultsRollBackWeightsAndState) {
  auto faulty = Make(GetParam(), {.devices = kDevices});
  auto clean = Make(GetParam(), {.devices = kDevices});
  ASSERT_TRUE(faulty && clean);
  Session fs(faulty.get()), cs(clean.get());
  ASSERT_TRUE(SameBits(fs.Next(), cs.Next()));
  int faults = 0;
  for (ParallelMode mode : {ParallelMode::kEP, ParallelMode::kTP}) {
    if (faulty->parallel_mode() != mode) {
      ASSERT_THAT(faulty->SwitchParallelism(mode).status(), IsOk());
    }
    const ParallelMode target = mode == ParallelMode::kEP ? ParallelMode::kTP : ParallelMode::kEP;
    const int shards = mode == ParallelMode::kTP ? kDevices : 1;
    for (ReshardPhase phase :
         {ReshardPhase::kPermute, ReshardPhase::kExchange, ReshardPhase::kPlace}) {
      const FaultPlan fault{
          .rank = faults % kDevices, .layer = 0, .phase = phase, .part = SwitchPart::kState};
      const std::vector<uint64_t> before = Checksums(*faulty, mode);
      auto s = faulty->SwitchParallelism(target, &fault);
      const std::string what =
          std::string(ParallelModeName(mode)) + " state " + std::string(ReshardPhaseName(phase));
      EXPECT_EQ(s.status().code(), StatusCode::kUnavailable)
          << what << ": " << s.status().message();
      EXPECT_THAT(s.status().message(), HasSubstr("state")) << what;
      EXPECT_TRUE(faulty->last_switch().rolled_back) << what;
      EXPECT_EQ(faulty->parallel_mode(), mode) << what;
      EXPECT_EQ(Checksums(*faulty, mode), before) << what;
      for (int d = 0; d < kDevices; ++d) EXPECT_EQ(faulty->kv_pool(d).shards(), shards) << what;
      EXPECT_TRUE(SameBits(fs.Next(), cs.Next())) << "logits after a failed " << what;
      ++faults;
    }
  }
  EXPECT_EQ(faults, 6);
  ASSERT_THAT(faulty->SwitchParallelism(ParallelMode::kEP).status(), IsOk());
  EXPECT_TRUE(SameBits(fs.Next(), cs.Next()));
}

INSTANTIATE_TEST_SUITE_P(Presets, StateSwitchTest,
                         ::testing::Values("tiny", "tiny-hybrid", "tiny-gla"));

// Attention that cannot be split P ways is refused before anything moves:
// tiny has 4 KV heads, 8 devices divide its 16 experts but not its heads.
TEST(StateSwitchRefusalTest, HeadsThatDoNotSplitAreRefused) {
  auto r = Make("tiny", {.devices = 8});
  ASSERT_TRUE(r);
  auto s = r->SwitchParallelism(ParallelMode::kTP);
  EXPECT_EQ(s.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.status().message(), HasSubstr("KV heads"));
  EXPECT_EQ(r->parallel_mode(), ParallelMode::kEP);
  EXPECT_EQ(r->kv_pool(0).shards(), 1);
}

}  // namespace
}  // namespace sy::engine
