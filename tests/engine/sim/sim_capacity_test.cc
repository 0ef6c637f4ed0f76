// KV capacity per layout under the sim (engine/sim/sim_runner.h "KV
// capacity"): TP replicates KV heads when they are fewer than the devices,
// so a device holds fewer pages per home; the scheduler's admission obeys
// it, and a switch whose target cannot hold the resident KV is refused
// (seed 003 §7.1's capacity check).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "base/status_matchers.h"
#include "engine/costmodel/cost_model.h"
#include "engine/scheduler/scheduler.h"
#include "engine/sim/sim_runner.h"
#include "tests/engine/sim/sim_test_util.h"

namespace sy::engine {
namespace {

using ::testing::HasSubstr;

TEST(SimCapacityTest, KvPoolCapacityBoundsAllocation) {
  KvPool pool({.num_pages = 10,
               .page_size = 4,
               .layers = 1,
               .kv_heads = 1,
               .head_dim = 2,
               .allocate_storage = false});
  EXPECT_EQ(pool.capacity(), 10);
  std::vector<int32_t> a;
  ASSERT_THAT(pool.Allocate(4, &a), IsOk());
  EXPECT_THAT(pool.SetCapacity(3).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(pool.capacity(), 10);
  EXPECT_THAT(pool.SetCapacity(0).code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(pool.SetCapacity(11).code(), StatusCode::kInvalidArgument);
  ASSERT_THAT(pool.SetCapacity(5), IsOk());
  EXPECT_EQ(pool.free_pages(), 1);
  EXPECT_EQ(pool.used_pages(), 4);
  std::vector<int32_t> b;
  EXPECT_THAT(pool.Allocate(2, &b).code(), StatusCode::kResourceExhausted);
  ASSERT_THAT(pool.Allocate(1, &b), IsOk());
  EXPECT_EQ(pool.free_pages(), 0);
  pool.Free(a);
  EXPECT_EQ(pool.free_pages(), 4);
  ASSERT_THAT(pool.SetCapacity(10), IsOk());
  EXPECT_EQ(pool.free_pages(), 9);
}

// Qwen3-235B has 4 KV heads: on 8 devices TP holds each head on 2 of them,
// so a device's KV bytes hold half the EP layout's pages.
TEST(SimCapacityTest, TpHalvesTheKvCapacityWithFourKvHeadsOnEightDevices) {
  SimRig rig = MakeRig(
      "h200", "qwen3-235b-a22b", 8, [](SimOptions&) {}, 8192, 16, /*pages=*/1000);
  ModelRunner& r = *rig.runner;
  EXPECT_EQ(r.kv_pool(0).free_pages(), 1000);
  ASSERT_THAT(r.SwitchParallelism(ParallelMode::kTP, nullptr).status(), IsOk());
  for (int d = 0; d < 8; ++d) {
    EXPECT_EQ(r.kv_pool(d).capacity(), 500) << d;
    EXPECT_EQ(r.kv_pool(d).free_pages(), 500) << d;
    EXPECT_EQ(r.kv_pool(d).num_pages(), 1000) << d;
  }
  ASSERT_THAT(r.SwitchParallelism(ParallelMode::kEP, nullptr).status(), IsOk());
  EXPECT_EQ(r.kv_pool(0).free_pages(), 1000);

  // Four devices: each holds one of the 4 heads, nothing replicated.
  SimRig four = MakeRig(
      "h200", "qwen3-235b-a22b", 4, [](SimOptions&) {}, 8192, 16, 1000);
  ASSERT_THAT(four.runner->SwitchParallelism(ParallelMode::kTP, nullptr).status(), IsOk());
  EXPECT_EQ(four.runner->kv_pool(0).free_pages(), 1000);

  // An MLA latent is read whole by every TP device (as the step is priced):
  // 1/P of the pages.
  SimRig mla = MakeRig(
      "h100", "deepseek-v3", 8, [](SimOptions&) {}, 8192, 16, 1000);
  ASSERT_THAT(mla.runner->SwitchParallelism(ParallelMode::kTP, nullptr).status(), IsOk());
  EXPECT_EQ(mla.runner->kv_pool(3).free_pages(), 125);
}

// The devices sharing a request's attention, which the engine hands the
// scheduler as its prefill group: all P under TP, attention_tp under EP
// (data-parallel attention), so EP's per-device prefill is capped at 1/P
// (or T/P) of the step budget and TP's is not.
TEST(SimCapacityTest, PrefillGroupIsTheDevicesSharingARequestsAttention) {
  SimRig rig = MakeRig(
      "h200", "qwen3-235b-a22b", 8, [](SimOptions&) {}, 8192, 16, 1000);
  EXPECT_EQ(rig.runner->prefill_group(), 1);
  ASSERT_THAT(rig.runner->SwitchParallelism(ParallelMode::kTP, nullptr).status(), IsOk());
  EXPECT_EQ(rig.runner->prefill_group(), 8);
  SimRig groups = MakeRig(
      "h200", "qwen3-235b-a22b", 8, [](SimOptions& s) { s.attention_tp = 4; }, 8192, 16, 1000);
  EXPECT_EQ(groups.runner->prefill_group(), 4);
}

TEST(SimCapacityTest, SwitchIsRefusedWhenTheTargetCannotHoldTheResidentKv) {
  SimRig rig = MakeRig(
      "h200", "qwen3-235b-a22b", 8, [](SimOptions&) {}, 8192, 16, 1000);
  ModelRunner& r = *rig.runner;
  std::vector<int32_t> held;
  ASSERT_THAT(r.kv_pool(3).Allocate(501, &held), IsOk());
  const Status check = r.CheckLayoutCapacity(ParallelMode::kTP);
  EXPECT_EQ(check.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(check.message(), HasSubstr("device 3 uses 501 KV pages and TP holds 500 per device"));
  EXPECT_THAT(check.message(), HasSubstr("attention over 8 devices splits the KV cache over 4"));
  EXPECT_THAT(r.CheckLayoutCapacity(ParallelMode::kEP), IsOk());
  const int64_t t0 = rig.now();
  const Status s = r.SwitchParallelism(ParallelMode::kTP, nullptr).status();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("cannot switch parallelism: the TP layout cannot hold"));
  EXPECT_EQ(r.parallel_mode(), ParallelMode::kEP);
  EXPECT_EQ(rig.now(), t0);
  EXPECT_EQ(r.kv_pool(3).capacity(), 1000);

  // One page fewer fits; back to EP always fits.
  r.kv_pool(3).Free({held.back()});
  held.pop_back();
  EXPECT_THAT(r.CheckLayoutCapacity(ParallelMode::kTP), IsOk());
  ASSERT_THAT(r.SwitchParallelism(ParallelMode::kTP, nullptr).status(), IsOk());
  EXPECT_EQ(r.kv_pool(3).free_pages(), 0);
  EXPECT_THAT(r.CheckLayoutCapacity(ParallelMode::kEP), IsOk());
  ASSERT_THAT(r.SwitchParallelism(ParallelMode::kEP, nullptr).status(), IsOk());
  EXPECT_EQ(r.kv_pool(3).free_pages(), 500);
}

// The scheduler admits by free pages, so TP admits half as many prompts as
// EP before requests queue.
TEST(SimCapacityTest, AdmissionQueuesWhenTheTpPoolIsFull) {
  auto admitted = [](ParallelMode mode, int* waiting) {
    SimRig rig = MakeRig(
        "h200", "qwen3-235b-a22b", 8, [](SimOptions&) {}, 8192, 16, /*pages=*/64);
    EXPECT_THAT(rig.runner->SwitchParallelism(mode, nullptr).status(), IsOk());
    std::vector<KvPool*> pools;
    for (int d = 0; d < 8; ++d) pools.push_back(&rig.runner->kv_pool(d));
    const ModelConfig& c = rig.runner->config();
    Scheduler sched({.max_batch_tokens = 16384,
                     .max_running = 128,
                     .admission_reserve_pages = 4,
                     .max_seq = c.max_seq,
                     .vocab = c.vocab,
                     .eos_token = c.eos_token,
                     .prefix_cache = false},
                    pools, {});
    for (int i = 0; i < 80; ++i) {
      RequestSpec spec;
      spec.prompt.assign(120, (i * 7) % 1000);  // 8 pages of 16 tokens
      spec.max_new_tokens = 8;
      EXPECT_THAT(sched.Submit(std::move(spec), 0).status(), IsOk());
    }
    const BatchInput batch = sched.Plan();
    *waiting = sched.waiting();
    return static_cast<int>(batch.seqs.size());
  };
  // EP: 64 pages per device take 7 prompts of 8 pages with a 4-page reserve;
  // TP: 32 pages take 3.
  int ep_waiting = 0, tp_waiting = 0;
  EXPECT_EQ(admitted(ParallelMode::kEP, &ep_waiting), 56);
  EXPECT_EQ(ep_waiting, 24);
  EXPECT_EQ(admitted(ParallelMode::kTP, &tp_waiting), 24);
  EXPECT_EQ(tp_waiting, 56);
}

// Seed 003 §9.1's 0.85 memory fraction on an H200: the pages are what the
// HBM holds after the weights, whole KV rows (4 heads x 128 x K and V, bf16,
// 94 layers); TP holds half as many requests' worth.
TEST(SimCapacityTest, Qwen3OnH200AtTheSeedsMemoryFraction) {
  SimOptions sim;
  sim.hardware = Hw("h200");
  sim.model = Model("qwen3-235b-a22b");
  const Result<int> pages = SimKvPagesPerDevice(sim, 8, 16, 0.15);
  ASSERT_THAT(pages.status(), IsOk());
  costmodel::StepOptions o;
  o.tokens = 1;
  o.devices = 8;
  const Result<costmodel::StepCost> c = costmodel::EstimateStep(sim.hardware, sim.model, o);
  ASSERT_THAT(c.status(), IsOk());
  const double page_bytes = 16.0 * 94 * 2 * 4 * 128 * 2;
  EXPECT_EQ(*pages, static_cast<int>((0.85 * 141e9 - c->weight_bytes_per_device) / page_bytes));
  std::printf(
      "Qwen3-235B on 8 x H200 at 0.85: weights %.2f GB, %d KV pages of 16 tokens per "
      "device (%.0f k tokens); TP: %d\n",
      c->weight_bytes_per_device / 1e9, *pages, *pages * 16 / 1e3, *pages / 2);
}

}  // namespace
}  // namespace sy::engine
