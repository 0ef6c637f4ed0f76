// `moe-engine costmodel`, `moe-engine calibrate --backend sim` (the cost
// model's TP/EP crossover through the sim runner) and `moe-engine scenario`'s
// flags, end to end: the real binary, its output and its exit codes
// (engine/server/costmodel_cli.h, calibrate_run.h, scenario_cli.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

struct Outcome {
  int code = -1;
  std::string out, err;
};

std::string Slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs `moe-engine SUB ARGS` (ARGS as shell words) and collects it.
Outcome MoeEngine(const std::string& sub, const std::string& args) {
  // One directory per test process: ctest runs the tests in parallel.
  const fs::path dir = fs::path(testing::TempDir()) /
                       ("costmodel_cli_" + std::to_string(::getpid()) + "_" +
                        testing::UnitTest::GetInstance()->current_test_info()->name());
  fs::create_directories(dir);
  const std::string cmd = std::string(MOE_ENGINE_BIN) + " " + sub + " " + args + " >" +
                          (dir / "out").string() + " 2>" + (dir / "err").string();
  const int status = std::system(cmd.c_str());
  Outcome r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = Slurp(dir / "out");
  r.err = Slurp(dir / "err");
  return r;
}

Outcome Costmodel(const std::string& args) { return MoeEngine("costmodel", args); }

double Kernel(const nlohmann::json& j, const std::string& name, const std::string& field) {
  for (const auto& k : j["kernels"]) {
    if (k["name"] == name) return k[field].get<double>();
  }
  ADD_FAILURE() << "no kernel " << name;
  return 0;
}

TEST(CostmodelCli, LingPrefillJsonHasSeed000Figures) {
  const Outcome r = Costmodel(
      "--hardware tpu-v7x --model ling-2.6-1t --phase prefill --tokens 16384 --ep 32 "
      "--dtype fp8 --shared-rows routed --bts 160 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["devices"], 32);
  EXPECT_EQ(j["topology"], "torus 2x2x4");
  const double flops = Kernel(j, "expert_ffn", "flops") + Kernel(j, "shared_expert", "flops");
  EXPECT_NEAR(flops, 824.6e9, 0.02 * 824.6e9);
  EXPECT_NEAR(Kernel(j, "dispatch", "link_s") * 1e3, 0.34, 0.02 * 0.34);
  EXPECT_NEAR(Kernel(j, "expert_ffn", "weight_hbm_s") * 1e3, 0.44, 0.02 * 0.44);
  EXPECT_GT(j["step_s"].get<double>(), 0);
}

TEST(CostmodelCli, DecodeTable) {
  const Outcome r = Costmodel(
      "--hardware h200 --model qwen3-235b-a22b --phase decode --tokens 256 --ep 8 "
      "--overlap hide-comm");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("qwen3-235b-a22b on 8 x h200 (8 chips, switch)"));
  EXPECT_THAT(r.out, HasSubstr("attention_mha"));
  EXPECT_THAT(r.out, HasSubstr("expert_ffn"));
  EXPECT_THAT(r.out, HasSubstr("MoE layer"));
}

TEST(CostmodelCli, SwitchPhase) {
  Outcome r =
      Costmodel("--hardware h200 --model qwen3-235b-a22b --phase switch --devices 8 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_NEAR(j["expert_bytes_per_device"].get<double>(), 56.77e9, 0.02 * 56.77e9);
  EXPECT_NEAR(j["bytes_moved"].get<double>(), 49.67e9, 0.02 * 49.67e9);
  EXPECT_NEAR(j["time_s"].get<double>() * 1e3, 157.7, 0.02 * 157.7);
  r = Costmodel("--hardware h200 --model qwen3-235b-a22b --phase switch --devices 8");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("bytes moved per device:  49.68 GB"));
}

TEST(CostmodelCli, Errors) {
  Outcome r = Costmodel("--hardware a100 --model ling-2.6-1t --tokens 8");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("unknown hardware 'a100' (known: b200, h100, h200, tpu-v7x"));
  r = Costmodel("--hardware h200 --model gpt5 --tokens 8");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("unknown model 'gpt5' (known: deepseek-v3, ling-2.6-1t, "
                               "ling3-tiny, qwen3-235b-a22b"));
  r = Costmodel("--hardware h200 --model ling3-tiny --tokens abc");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--tokens"));
  r = Costmodel("--hardware h200 --model ling3-tiny --tokens 0");
  EXPECT_EQ(r.code, 2);
  r = Costmodel("--hardware h200 --model ling3-tiny --phase train --tokens 8");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--phase"));
  r = Costmodel("--hardware h200 --model ling3-tiny --phase decode");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("needs --tokens"));
  r = Costmodel("--hardware h200 --model ling3-tiny --phase switch");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("needs --devices"));
  r = Costmodel("--hardware h200 --model ling3-tiny --tokens 8 --ep 4 --devices 8");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("ep must be 1"));
  r = Costmodel("--hardware h200 --model ling3-tiny --tokens 8 --catalog /nonexistent");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("known: (none)"));
  r = Costmodel("--help");
  EXPECT_EQ(r.code, 0);
  EXPECT_THAT(r.out, HasSubstr("--hardware"));
}

// The crossover of the simulated cluster, as an operator asks for it before
// setting the policy: TP faster at 128 requests of 2048 tokens, EP at 256
// (docs/SIMULATION.md's table), and the thresholds on the JSON line.
TEST(CalibrateCli, SimBackendPricesBothLayouts) {
  Outcome r = MoeEngine("calibrate",
                        "--backend sim --hardware h200 --model qwen3-235b-a22b --devices 8 "
                        "--batches 64,128,256,512 --prompt-len 2048 --steps 2");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("qwen3-235b-a22b on 8 x h200 (simulated decode step ms, prompt "
                               "2048)"));
  EXPECT_THAT(r.out, HasSubstr("EP faster above batch"));
  const nlohmann::json j = nlohmann::json::parse(r.out.substr(r.out.rfind("\n{") + 1));
  EXPECT_EQ(j["lower_batch"], 128);
  EXPECT_EQ(j["upper_batch"], 256);
  EXPECT_GT(j["t_high"].get<int>(), 128);

  // An MLA model: under TP every rank holds the whole latent of every
  // request, so the measurement needs 32x the pages TP would share out.
  r = MoeEngine("calibrate",
                "--backend sim --hardware tpu-v7x --model ling-2.6-1t --devices 32 "
                "--sim-attention-tp 4 --sim-dtype fp8 --sim-weight-dtype fp8 "
                "--batches 16,256,1024 --prompt-len 1024 --steps 2");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("ling-2.6-1t on 32 x tpu-v7x"));

  r = MoeEngine("calibrate", "--backend sim --hardware h200 --model gpt5 --devices 8");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("unknown model 'gpt5'"));
  r = MoeEngine("calibrate",
                "--backend sim --hardware h200 --model qwen3-235b-a22b --devices 8 "
                "--prompt-len 40000");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("prompt_len + decode steps must fit in max_seq 32768"));
}

// `scenario --t-high` gives the auto variant another threshold than the
// file's: a twentieth of moebius-bursty whose bursts never reach it (a
// step's batch is at most 2,048 running plus 16,384 waiting prompt tokens).
TEST(ScenarioCli, THighOverridesTheScenariosThreshold) {
  Outcome r =
      MoeEngine("scenario", "moebius-bursty --variants auto --time-scale 0.05 --t-high 20000");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("auto policy: T_h 20000, T_l 16000.0"));
  EXPECT_THAT(r.out, Not(HasSubstr("auto switched")));
  r = MoeEngine("scenario", "moebius-bursty --t-high 0");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--t-high"));
  r = MoeEngine("scenario", "moebius-bursty --time-scale -1");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, StartsWith("--time-scale: Value -1 must be > 0\n"));
}

// --json carries the phases pooled by metric beside the phases, and auto's
// distance from the better static layout for both.
TEST(ScenarioCli, JsonCarriesThePooledPhases) {
  const fs::path out =
      fs::path(testing::TempDir()) / ("scenario_pooled_" + std::to_string(::getpid()) + ".json");
  Outcome r = MoeEngine("scenario", "moebius-bursty --time-scale 0.02 --json " + out.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("pooled: every ttft phase (burst-80+burst-120)"));
  const nlohmann::json j = nlohmann::json::parse(Slurp(out));
  EXPECT_EQ(j["auto_vs_best_static"].size(), 5u);
  EXPECT_EQ(j["auto_vs_best_static_pooled"].size(), 2u);
  for (const nlohmann::json& v : j["variants"]) {
    ASSERT_EQ(v["pooled"].size(), 2u) << v["variant"];
    EXPECT_EQ(v["pooled"][0]["name"], "quiet");
    EXPECT_EQ(v["pooled"][0]["metric"], "tpot");
    EXPECT_EQ(v["pooled"][1]["name"], "burst-80+burst-120");
    const nlohmann::json& ph = v["phases"];
    EXPECT_EQ(v["pooled"][1]["requests"].get<int>(),
              ph[1]["requests"].get<int>() + ph[3]["requests"].get<int>());
    // The burst's requests decoded together (also after its window, which
    // running_max does not cover), and some ran in it.
    EXPECT_GT(ph[1]["decode_batch"].get<double>(), 1);
    EXPECT_LE(ph[1]["decode_batch"].get<double>(), v["requests"].get<double>());
    EXPECT_GT(ph[1]["running_max"].get<int>(), 0);
    EXPECT_GE(ph[1]["waiting_max"].get<int>(), 0);
  }
  fs::remove(out);
}

// The results name the kernels and collective latencies the runs used: the
// hardware file's by default, the flags' when given.
TEST(ScenarioCli, KernelAndLatencyFlagsOverrideTheHardwareFile) {
  Outcome r = MoeEngine("scenario", "moebius-bursty --variants tp --time-scale 0.02");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("sim: kernels measured, collective latency: all-reduce 0 us, "
                               "all-to-all 60 us"));
  r = MoeEngine("scenario",
                "moebius-bursty --variants tp --time-scale 0.02 --sim-kernels flat "
                "--allreduce-latency-us 8 --all-to-all-latency-us 0");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out,
              HasSubstr("sim: kernels flat, collective latency: all-reduce 8 us, all-to-all 0 us"));
  r = MoeEngine("scenario", "moebius-bursty --sim-kernels guessed");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--sim-kernels"));
}

}  // namespace
