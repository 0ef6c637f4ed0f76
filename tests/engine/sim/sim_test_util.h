// File: tests/engine/sim/sim_test_util.h
//
// Fixtures of the sim tests: catalogue specs, a SimRunner on its own
// VirtualClock, and synthetic decode / prefill batches of a given shape.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/costmodel/catalog.h"
#include "engine/costmodel/cost_model.h"
#include "engine/sim/sim_runner.h"

namespace sy::engine {

inline costmodel::HardwareSpec Hw(const std::string& name) {
  Result<costmodel::HardwareSpec> h = costmodel::LoadHardware(costmodel::DefaultCatalogDir(), name);
  EXPECT_TRUE(h.ok()) << h.status().ToString();
  return h.ok() ? *h : costmodel::HardwareSpec{};
}

inline costmodel::ModelSpec Model(const std::string& name) {
  Result<costmodel::ModelSpec> m = costmodel::LoadModel(costmodel::DefaultCatalogDir(), name);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? *m : costmodel::ModelSpec{};
}

// A small MHA MoE spec (2 layers) for parity tests with the CPU runner.
inline costmodel::ModelSpec TinySpec(int experts, int expert_inter, int heads, int kv_heads) {
  costmodel::ModelSpec m;
  m.name = "tiny";
  m.layers = 2;
  m.hidden = 32;
  m.vocab = 300;
  m.heads = heads;
  m.kv_heads = kv_heads;
  m.head_dim = 8;
  m.experts = experts;
  m.top_k = 2;
  m.expert_inter = expert_inter;
  return m;
}

// A runner and the clock it advances.
struct SimRig {
  std::unique_ptr<VirtualClock> clock = std::make_unique<VirtualClock>(0);
  std::unique_ptr<ModelRunner> runner;
  SimOptions sim;
  int64_t now() const { return clock->NowUs(); }
};

// `devices` devices of `hw` serving `model`; `tweak` edits the SimOptions
// before the runner is built (routing skew, efficiency, overhead...).
template <typename Tweak>
SimRig MakeRig(const std::string& hw, const std::string& model, int devices, Tweak tweak,
               int max_seq = 8192, int page_size = 16, int pages = 1 << 20,
               std::vector<std::vector<int>> phy2log = {}) {
  SimRig rig;
  rig.sim.hardware = Hw(hw);
  rig.sim.model = Model(model);
  rig.sim.clock = rig.clock.get();
  tweak(rig.sim);
  Result<ModelConfig> config = SimModelConfig(rig.sim.model, max_seq);
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  Result<std::unique_ptr<ModelRunner>> r = CreateSimRunner(*config,
                                                           {.devices = devices,
                                                            .kv_pages_per_device = pages,
                                                            .page_size = page_size,
                                                            .state_slots_per_device = 4096,
                                                            .expert_phy2log = std::move(phy2log)},
                                                           rig.sim);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (r.ok()) rig.runner = std::move(r).value();
  return rig;
}
inline SimRig MakeRig(const std::string& hw, const std::string& model, int devices) {
  return MakeRig(hw, model, devices, [](SimOptions&) {});
}

// `seqs` seqs, seq i on device i % devices, each `new_tokens` new tokens at
// start_pos `context` (decode: new_tokens 1), with valid page tables and
// (hybrid models) distinct state slots.
inline BatchInput Batch(int seqs, int devices, int new_tokens, int context, int page_size = 16) {
  BatchInput b;
  const int pages = (context + new_tokens + page_size - 1) / page_size;
  std::vector<int32_t> table(pages);
  for (int p = 0; p < pages; ++p) table[p] = p;
  for (int i = 0; i < seqs; ++i) {
    SeqInput s;
    s.request_id = i + 1;
    s.device = i % devices;
    s.tokens.assign(new_tokens, 7);
    s.start_pos = context;
    s.pages = table;
    s.state_slot = i / devices;
    b.seqs.push_back(std::move(s));
  }
  return b;
}

// Simulated µs of one Step of `batch`.
inline int64_t StepUs(SimRig& rig, const BatchInput& batch, TraceLevel level = TraceLevel::kOff) {
  const int64_t t0 = rig.now();
  Result<StepOutput> out = rig.runner->Step(batch, level);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return rig.now() - t0;
}

// Mean simulated ms of `steps` steps of `batch`.
inline double MeanStepMs(SimRig& rig, const BatchInput& batch, int steps = 5) {
  int64_t us = 0;
  for (int i = 0; i < steps; ++i) us += StepUs(rig, batch);
  return us / 1e3 / steps;
}

// Switches the rig's runner to TP (it starts in EP).
inline void ToTp(SimRig& rig) {
  Result<SwitchStats> s = rig.runner->SwitchParallelism(ParallelMode::kTP, nullptr);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
}

// EstimateStep's milliseconds for the same shape as a sim step, with the
// sim's dtypes, efficiencies, measured kernels and overlap rule (not its
// collective latencies: EstimateStep has none).
inline double EstimateMs(const SimOptions& sim, costmodel::Phase phase, int tokens, int context,
                         int ep, int tp, int devices) {
  costmodel::StepOptions o;
  o.phase = phase;
  o.tokens = tokens;
  o.context = context;
  o.ep = ep;
  o.tp = tp;
  o.devices = devices;
  o.compute_dtype = sim.compute_dtype;
  o.weight_dtype = sim.weight_dtype;
  o.efficiency = sim.efficiency;
  o.kernels = sim.kernels;
  o.overlap = sim.overlap;
  Result<costmodel::StepCost> c = costmodel::EstimateStep(sim.hardware, sim.model, o);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? c->step_s * 1e3 : 0;
}

}  // namespace sy::engine
