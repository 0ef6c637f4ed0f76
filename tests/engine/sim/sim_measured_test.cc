// The sim with measured kernels and collective latencies (SimOptions::kernels,
// allreduce_latency_us, all_to_all_latency_us; docs/SIMULATION.md "Measured
// kernels"): the same prices as EstimateStep, and each collective's fixed
// cost added exactly once per collective.
#include <gtest/gtest.h>

#include <cstdio>

#include "engine/costmodel/cost_model.h"
#include "engine/sim/sim_runner.h"
#include "tests/engine/sim/sim_test_util.h"

namespace sy::engine {
namespace {

using costmodel::Phase;

SimRig Qwen(bool measured, double allreduce_us = 0, double all_to_all_us = 0) {
  return MakeRig("h200", "qwen3-235b-a22b", 8, [&](SimOptions& s) {
    s.routing.skew = 0;
    s.routing.drift_period_s = 0;  // routing must not depend on the (longer) clock
    s.step_overhead_us = 0;
    if (measured) s.kernels = s.hardware.measured;
    s.allreduce_latency_us = allreduce_us;
    s.all_to_all_latency_us = all_to_all_us;
  });
}

TEST(SimMeasuredTest, TheH200FileCarriesAMeasuredProfile) {
  const costmodel::HardwareSpec h200 = Hw("h200");
  ASSERT_FALSE(h200.measured.empty());
  EXPECT_GT(h200.measured.expert.floor_us, 0);
  EXPECT_TRUE(Hw("tpu-v7x").measured.empty());
}

// With the profile, a uniform sim step still equals EstimateStep's (to the
// routing noise), so the two keep one set of formulas; and the measured
// step is several times the flat factors' at decode sizes (the floors). At
// 16 requests the busiest EP device's sampled experts exceed the mean that
// EstimateStep prices, so only the ratio to the flat step is checked there.
TEST(SimMeasuredTest, UniformStepMatchesEstimateStepWithTheProfile) {
  for (bool tp : {false, true}) {
    for (int seqs : {16, 256, 1024}) {
      SimRig measured = Qwen(true), flat = Qwen(false);
      if (tp) {
        ToTp(measured);
        ToTp(flat);
      }
      const BatchInput b = Batch(seqs, 8, 1, 1024);
      const double sim = MeanStepMs(measured, b, 4), sim_flat = MeanStepMs(flat, b, 4);
      const double est =
          EstimateMs(measured.sim, Phase::kDecode, seqs, 1024, tp ? 1 : 8, tp ? 8 : 1, 8);
      std::printf("%s decode %4d: measured sim %.3f ms, EstimateStep %.3f ms, flat %.3f ms\n",
                  tp ? "TP" : "EP", seqs, sim, est, sim_flat);
      if (seqs == 16) {
        EXPECT_GT(sim, 2 * sim_flat);
        continue;
      }
      EXPECT_GE(sim, est * 0.995);
      EXPECT_LE(sim, est * 1.03);
    }
  }
}

// Serial overlap: EP pays the all-to-all latency twice per MoE layer
// (dispatch, combine), TP the all-reduce latency twice per layer (attention
// and combine); neither pays the other's. One step each from t = 0, so both
// rigs sample the same routing (the sample depends on the clock).
TEST(SimMeasuredTest, CollectiveLatencyIsPaidOncePerCollective) {
  const BatchInput b = Batch(64, 8, 1, 512);
  const int layers = Model("qwen3-235b-a22b").layers;  // every layer is MoE
  SimRig ep0 = Qwen(true), ep = Qwen(true, 11, 70);
  EXPECT_NEAR(MeanStepMs(ep, b, 1) - MeanStepMs(ep0, b, 1), 2 * layers * 70e-3, 2e-3);
  SimRig tp0 = Qwen(true), tp = Qwen(true, 11, 70);
  ToTp(tp0);
  ToTp(tp);
  EXPECT_NEAR(MeanStepMs(tp, b, 1) - MeanStepMs(tp0, b, 1), 2 * layers * 11e-3, 2e-3);
}

TEST(SimMeasuredTest, NegativeLatencyIsRefused) {
  SimOptions sim;
  VirtualClock clock(0);
  sim.hardware = Hw("h200");
  sim.model = Model("qwen3-235b-a22b");
  sim.clock = &clock;
  sim.all_to_all_latency_us = -1;
  Result<ModelConfig> config = SimModelConfig(sim.model, 4096);
  ASSERT_TRUE(config.ok());
  Result<std::unique_ptr<ModelRunner>> r =
      CreateSimRunner(*config, {.devices = 8, .kv_pages_per_device = 1024, .page_size = 16}, sim);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("collective latencies must be >= 0"), std::string::npos)
      << r.status().ToString();
}

}  // namespace
}  // namespace sy::engine
