// The measured kernel profiles of data/hardware/{h100,h200}.json against the
// timings they were fitted to (data/measurements/, scripts/measure-kernels.py):
// EstimateStep with the profile must reproduce each timed layer (one
// device's attention + router + routed experts of Qwen3-235B-A22B decode,
// TP and EP on 8 devices), and the flat efficiency factors must not (they
// miss the per-kernel floors), or the profile would be decoration.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/costmodel/catalog.h"
#include "engine/costmodel/cost_model.h"
#include "engine/costmodel/kernels.h"

namespace sy::engine::costmodel {
namespace {

// Per-layer µs of the kernels the script times, from EstimateStep.
double LayerUs(const HardwareSpec& hw, const ModelSpec& m, const nlohmann::json& point,
               bool measured) {
  StepOptions o;
  o.phase = Phase::kDecode;
  o.tokens = point["batch"].get<int>();
  o.context = point["context"].get<int>();
  const bool tp = point["layout"] == "tp";
  o.ep = tp ? 1 : 8;
  o.tp = tp ? 8 : 1;
  o.devices = 8;
  if (measured) {
    o.kernels = hw.measured;
  } else {
    o.efficiency = {.compute = 0.6, .hbm = 0.8, .link = 0.7};  // SimOptions' flat defaults
  }
  Result<StepCost> c = EstimateStep(hw, m, o);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  if (!c.ok()) return 0;
  double s = 0;
  for (const char* k : {"attention_mha", "router", "expert_ffn"}) s += c->Find(k)->time_s;
  return s * 1e6;
}

void CheckChip(const std::string& chip) {
  const std::string dir = DefaultCatalogDir();
  Result<HardwareSpec> hw = LoadHardware(dir, chip);
  Result<ModelSpec> m = LoadModel(dir, "qwen3-235b-a22b");
  ASSERT_TRUE(hw.ok() && m.ok());
  ASSERT_FALSE(hw->measured.empty()) << chip;
  std::ifstream in(dir + "/measurements/" + chip + "-qwen3-235b-a22b-decode.json");
  ASSERT_TRUE(in.good()) << chip;
  const nlohmann::json file = nlohmann::json::parse(in);
  double sq = 0, sq_flat = 0;
  int n = 0;
  for (const nlohmann::json& p : file["layers"]) {
    const double timed = p["layer_us"].get<double>();
    const double fit = LayerUs(*hw, *m, p, true), flat = LayerUs(*hw, *m, p, false);
    std::printf("%s %s B=%4d C=%4d: timed %7.1f us, profile %7.1f (%+4.0f%%), flat %7.1f\n",
                chip.c_str(), p["layout"].get<std::string>().c_str(), p["batch"].get<int>(),
                p["context"].get<int>(), timed, fit, 100 * (fit / timed - 1), flat);
    EXPECT_NEAR(fit, timed, 0.25 * timed) << p.dump();
    sq += std::pow(fit / timed - 1, 2);
    sq_flat += std::pow(flat / timed - 1, 2);
    ++n;
  }
  ASSERT_GE(n, 20);
  const double rms = std::sqrt(sq / n), rms_flat = std::sqrt(sq_flat / n);
  std::printf("%s: rms relative error %.1f%% with the profile, %.1f%% with the flat factors\n",
              chip.c_str(), 100 * rms, 100 * rms_flat);
  EXPECT_LT(rms, 0.08);
  EXPECT_GT(rms_flat, 0.4);
}

TEST(MeasuredKernelsTest, H200ProfileReproducesTheTimedLayers) { CheckChip("h200"); }
TEST(MeasuredKernelsTest, H100ProfileReproducesTheTimedLayers) { CheckChip("h100"); }

// Without a profile EstimateStep is what it was: the seeds' figures
// (cost_model_test.cc) are priced with empty kernels.
TEST(MeasuredKernelsTest, AnEmptyProfileChangesNothing) {
  Result<HardwareSpec> hw = LoadHardware(DefaultCatalogDir(), "h200");
  Result<ModelSpec> m = LoadModel(DefaultCatalogDir(), "qwen3-235b-a22b");
  ASSERT_TRUE(hw.ok() && m.ok());
  StepOptions o;
  o.phase = Phase::kDecode;
  o.tokens = 256;
  o.context = 2048;
  o.ep = 8;
  Result<StepCost> a = EstimateStep(*hw, *m, o);
  const ProfiledRates r = ProfileRates(*hw, o.compute_dtype, KernelProfile{},
                                       EffectiveRates(*hw, o.compute_dtype, o.efficiency, 1e9));
  EXPECT_EQ(r.expert.floor_s, 0);
  EXPECT_EQ(r.per_expert_s, 0);
  o.kernels = hw->measured;
  Result<StepCost> b = EstimateStep(*hw, *m, o);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_GT(b->Find("expert_ffn")->time_s, a->Find("expert_ffn")->time_s);
  EXPECT_EQ(b->Find("dispatch")->time_s, a->Find("dispatch")->time_s);  // collectives: flat
}

}  // namespace
}  // namespace sy::engine::costmodel
