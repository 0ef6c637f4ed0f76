// SimOptions::attention_tp: under EP, attention tensor parallel within
// groups of T devices and data parallel across them (seed 000's Ling-2.6-1T
// deployment on TPU v7x-16: tp = ep = 32, dp = 8), priced as EstimateStep
// prices {ep = P, tp = T}; the weights per device and the KV capacity
// follow.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>

#include "base/status_matchers.h"
#include "engine/costmodel/cost_model.h"
#include "engine/sim/sim_runner.h"
#include "tests/engine/sim/sim_test_util.h"

namespace sy::engine {
namespace {

void Ling(SimOptions& s) {
  s.attention_tp = 4;
  s.compute_dtype = costmodel::Dtype::kFp8;
  s.weight_dtype = costmodel::Dtype::kFp8;
  s.routing.skew = 0;
  s.step_overhead_us = 0;
}

// Seqs spread evenly over the 32 homes (so over the 8 groups), uniform
// routing: the sim prices what EstimateStep prices for the balanced shape,
// never faster, the busiest device's sampling noise at most 6% slower.
TEST(SimAttentionGroupsTest, BalancedStepMatchesEstimateStepWithTp4) {
  for (const int seqs : {128, 512}) {
    SimRig rig = MakeRig("tpu-v7x", "ling-2.6-1t", 32, Ling);
    ASSERT_NE(rig.runner, nullptr);
    const int64_t t0 = rig.now();
    ASSERT_THAT(rig.runner->Step(Batch(seqs, 32, 1, 4096), TraceLevel::kOff).status(), IsOk());
    const double sim = (rig.now() - t0) / 1e3;
    const double est = EstimateMs(rig.sim, costmodel::Phase::kDecode, seqs, 4096, 32, 4, 32);
    std::printf("Ling decode %d, ep 32 tp 4: sim %.3f ms, EstimateStep %.3f ms (%+.2f%%)\n", seqs,
                sim, est, 100 * (sim / est - 1));
    EXPECT_GE(sim, est * 0.995);
    EXPECT_LE(sim, est * 1.06);
  }
  // Plain data-parallel attention reads every attention weight on every
  // device: slower at this batch.
  SimRig dp = MakeRig("tpu-v7x", "ling-2.6-1t", 32, [](SimOptions& s) {
    Ling(s);
    s.attention_tp = 1;
  });
  SimRig tp4 = MakeRig("tpu-v7x", "ling-2.6-1t", 32, Ling);
  EXPECT_GT(StepUs(dp, Batch(128, 32, 1, 4096)), StepUs(tp4, Batch(128, 32, 1, 4096)));
}

// Ling-2.6-1T's weights do not fit a v7x device with replicated attention,
// and do with attention sharded 4 ways; its MLA latent is then held whole by
// the 4 devices of a group, so a home's pool holds a quarter of the pages.
TEST(SimAttentionGroupsTest, WeightsFitAndTheLatentIsReplicatedInTheGroup) {
  SimOptions sim;
  sim.hardware = Hw("tpu-v7x");
  sim.model = Model("ling-2.6-1t");
  Ling(sim);
  sim.attention_tp = 1;
  const Result<int> dp = SimKvPagesPerDevice(sim, 32, 16, 0.12, 16);
  EXPECT_EQ(dp.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(dp.status().message(), ::testing::HasSubstr("GB of weights"));
  sim.attention_tp = 4;
  const Result<int> pages = SimKvPagesPerDevice(sim, 32, 16, 0.12, 16);
  ASSERT_THAT(pages.status(), IsOk());
  // More state slots leave fewer pages.
  const Result<int> fewer = SimKvPagesPerDevice(sim, 32, 16, 0.12, 32);
  ASSERT_THAT(fewer.status(), IsOk());
  EXPECT_LT(*fewer, *pages);
  sim.attention_tp = 3;
  EXPECT_EQ(SimKvPagesPerDevice(sim, 32, 16, 0.12, 16).status().code(),
            StatusCode::kInvalidArgument);

  SimRig rig = MakeRig("tpu-v7x", "ling-2.6-1t", 32, Ling, 8192, 16, /*pages=*/1000);
  ASSERT_NE(rig.runner, nullptr);
  EXPECT_EQ(rig.runner->kv_pool(5).num_pages(), 1000);
  EXPECT_EQ(rig.runner->kv_pool(5).free_pages(), 250);
}

}  // namespace
}  // namespace sy::engine
