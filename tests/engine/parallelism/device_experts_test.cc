// DeviceWorker's use of UnifiedExpertBuffer: which shapes get one, and that
// the engine's logits survive a TP round trip of the buffer bit for bit.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <tuple>

#include "base/status_matchers.h"
#include "engine/model_executor/device_worker.h"
#include "engine/parallelism/expert_buffer.h"

namespace sy::engine {
namespace {

void OnRanks(int p, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < p; ++r) threads.emplace_back(fn, r);
  for (auto& t : threads) t.join();
}

// P device workers built in parallel, as ModelRunner builds them.
struct Devices {
  Devices(const ModelConfig& c, int p)
      : config(c),
        map(ExpertMap::RoundRobin(c.layers, std::min(c.first_k_dense_replace, c.layers), c.experts,
                                  p)),
        comm(p) {
    ModelRunnerOptions o;
    o.devices = p;
    o.seed = 2;
    o.kv_pages_per_device = 16;
    o.page_size = 16;
    o.state_slots_per_device = 2;
    for (int r = 0; r < p; ++r) {
      workers.push_back(
          std::make_unique<DeviceWorker>(c, o, r, &map, &comm, SpanRecorder::Clock::now()));
    }
    OnRanks(p, [&](int r) { workers[r]->Build(); });
    for (auto& w : workers) EXPECT_THAT(w->build_status(), IsOk());
  }
  int p() const { return static_cast<int>(workers.size()); }

  // Logits of one prompt homed on device 0 (every device joins the MoE layers).
  std::vector<float> PrefillLogits(const std::vector<int32_t>& prompt) {
    BatchInput batch;
    SeqInput s;
    s.device = 0;
    s.tokens = prompt;
    EXPECT_THAT(workers[0]->pool().Allocate(1, &s.pages), IsOk());
    if (config.hybrid()) {
      Result<int> slot = workers[0]->state_pool().Allocate();
      EXPECT_THAT(slot, IsOk());
      s.state_slot = slot.ok() ? slot.value() : -1;
    }
    batch.seqs.push_back(s);
    std::vector<std::vector<float>> logits(1);
    std::vector<int32_t> next(1);
    OnRanks(p(), [&](int r) {
      std::vector<int64_t> counts(static_cast<size_t>(config.layers) * config.experts);
      const std::vector<int> local = r == 0 ? std::vector<int>{0} : std::vector<int>{};
      workers[r]->Forward(batch, local, /*want_logits=*/true, StepSink{&next, &logits}, &counts);
    });
    workers[0]->pool().Free(batch.seqs[0].pages);
    if (config.hybrid()) workers[0]->state_pool().Free(batch.seqs[0].state_slot);
    return logits[0];
  }

  void ReshardAll(ParallelMode target) {
    OnRanks(p(), [&](int r) {
      EXPECT_THAT(workers[r]->expert_buffer()->Reshard(target, &comm), IsOk());
    });
  }

  ModelConfig config;
  ExpertMap map;
  InProcCommunicator comm;
  std::vector<std::unique_ptr<DeviceWorker>> workers;
};

ModelConfig Preset(const std::string& name) {
  ModelConfig c = PresetConfig(name).value();
  c.max_seq = 64;
  return c;
}

class DeviceExpertsTest : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

// tiny (E=16, I=256) and tiny-hybrid (E=16, I=128) fit a unified buffer at
// P = 1, 2 and 4: every device keeps its experts there, in EP mode.
TEST_P(DeviceExpertsTest, PresetsKeepTheirExpertsInTheUnifiedBuffer) {
  const ModelConfig c = Preset(std::get<0>(GetParam()));
  const int p = std::get<1>(GetParam());
  Devices d(c, p);
  const int moe_layers = c.layers - c.first_k_dense_replace;
  for (int r = 0; r < p; ++r) {
    UnifiedExpertBuffer* b = d.workers[r]->expert_buffer();
    ASSERT_NE(b, nullptr) << "rank " << r;
    EXPECT_EQ(b->mode(), ParallelMode::kEP);
    EXPECT_EQ(b->layers(), moe_layers);
    EXPECT_EQ(b->slot_bytes(), int64_t{c.experts / p} * 3 * c.expert_inter * c.hidden * 4);
    EXPECT_EQ(b->bytes(), (moe_layers + 1) * b->slot_bytes());
  }
}

INSTANTIATE_TEST_SUITE_P(PresetsAndDevices, DeviceExpertsTest,
                         ::testing::Combine(::testing::Values("tiny", "tiny-hybrid"),
                                            ::testing::Values(1, 2, 4)));

// A shape the buffer cannot hold (P = 3 does not divide E = 16) keeps the
// expert vectors and still serves.
TEST(DeviceExpertsFallbackTest, UnevenSplitKeepsTheVectors) {
  Devices d(Preset("tiny"), 3);
  for (const auto& w : d.workers) EXPECT_EQ(w->expert_buffer(), nullptr);
  const std::vector<float> logits = d.PrefillLogits({1, 2, 3, 4, 5});
  EXPECT_EQ(logits.size(), static_cast<size_t>(d.config.vocab));
}

// The EP path reads the buffer in place: a round trip EP->TP->EP leaves the
// engine's logits bit-identical, and P=4 agrees with P=1 as before.
TEST(DeviceExpertsRoundTripTest, LogitsAreBitIdenticalAfterATpRoundTrip) {
  for (const char* preset : {"tiny", "tiny-hybrid"}) {
    SCOPED_TRACE(preset);
    Devices d(Preset(preset), 4);
    const std::vector<int32_t> prompt = {72, 101, 108, 108, 111, 32, 119, 111, 114};
    const std::vector<float> before = d.PrefillLogits(prompt);
    d.ReshardAll(ParallelMode::kTP);
    d.ReshardAll(ParallelMode::kEP);
    const std::vector<float> after = d.PrefillLogits(prompt);
    ASSERT_EQ(after.size(), before.size());
    EXPECT_EQ(std::memcmp(after.data(), before.data(), before.size() * sizeof(float)), 0);
  }
}

}  // namespace
}  // namespace sy::engine
