// The prefix cache end to end on the real model: every built-in workload,
// served by the Scheduler and the ModelRunner with the cache on and off, on
// 1 and 4 devices, must produce the same greedy tokens for every request --
// including requests whose hit ends on a linear-attention checkpoint that was
// taken mid-way through another request's prefill chunk.
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "base/status_matchers.h"
#include "engine/model/config.h"
#include "engine/model_executor/model_runner.h"
#include "engine/scheduler/scheduler.h"
#include "engine/workload/workload.h"

namespace sy::engine {
namespace {

struct Served {
  std::map<int64_t, std::vector<int32_t>> tokens;  // request id -> generated
  int64_t hit_tokens = 0;
  int64_t mid_chunk_hits = 0;  // hits at a boundary inside the writer's chunk
};

// Arrivals are submitted at the step their time maps to (10 ms per step), so
// later turns and later sharers find what earlier ones published.
Served Serve(const ModelConfig& config, int devices, bool cache, const std::vector<Arrival>& arr) {
  Served out;
  ModelRunnerOptions ro{.devices = devices, .seed = 3};
  ro.kv_pages_per_device = 256;
  ro.state_slots_per_device = 12;
  auto runner = ModelRunner::Create(config, ro);
  EXPECT_THAT(runner.status(), IsOk());
  if (!runner.ok()) return out;
  SchedulerOptions so;
  so.max_seq = config.max_seq;
  so.vocab = config.vocab;
  so.eos_token = config.eos_token;
  so.max_batch_tokens = 96;  // small chunks: long prompts span several steps
  so.max_running = 16;
  so.prefix_cache = cache;
  std::vector<KvPool*> kv;
  std::vector<StatePool*> st;
  for (int d = 0; d < devices; ++d) {
    kv.push_back(&(*runner)->kv_pool(d));
    st.push_back(&(*runner)->state_pool(d));
  }
  Scheduler sched(so, kv, st);
  std::map<std::pair<int, int>, int> ckpt_written_mid;  // (device, slot) -> len, mid-chunk
  size_t next = 0;
  for (int step = 0; step < 5000 && (next < arr.size() || !sched.idle()); ++step) {
    while (next < arr.size() && arr[next].time_us <= step * 10'000LL) {
      EXPECT_THAT(sched.Submit(arr[next].spec, step).status(), IsOk());
      ++next;
    }
    BatchInput b = sched.Plan();
    for (const SeqInput& q : b.seqs) {
      const int end = q.start_pos + static_cast<int>(q.tokens.size());
      if (q.checkpoint_slot >= 0 && q.checkpoint_len < end) {
        ckpt_written_mid[{q.device, q.checkpoint_slot}] = q.checkpoint_len;
      }
      if (q.state_copy_from >= 0 && ckpt_written_mid.count({q.device, q.state_copy_from})) {
        ++out.mid_chunk_hits;
      }
    }
    if (b.seqs.empty()) continue;  // waiting for the next arrival
    auto step_out = (*runner)->Step(b, TraceLevel::kOff);
    EXPECT_THAT(step_out.status(), IsOk());
    if (!step_out.ok()) break;
    auto done = sched.Commit(*step_out, step);
    EXPECT_THAT(done.status(), IsOk());
    for (const Request& r : *done) out.tokens[r.id] = r.generated;
  }
  EXPECT_TRUE(sched.idle());
  out.hit_tokens = sched.cache_hit_tokens_total();
  return out;
}

std::vector<Arrival> Arrivals(WorkloadKind kind) {
  WorkloadOptions w = WorkloadOptions::ForKind(kind);
  w.seed = 11;
  w.output_len = {LengthDist::Kind::kUniform, 4, 10};
  w.prompt_len = {LengthDist::Kind::kUniform, 8, 40};
  w.max_prompt_tokens = 300;
  switch (kind) {
    case WorkloadKind::kAgentic:
      w.rate = 20;
      w.turns_min = 3;
      w.turns_max = 4;
      w.first_turn_len = {LengthDist::Kind::kUniform, 60, 120};
      w.append_tokens = 21;  // not a page multiple: turns end mid-page
      w.think_s = 0.15;
      w.max_requests = 10;
      break;
    case WorkloadKind::kSharedPrefix:
      w.rate = 40;
      w.system_prompts = 2;
      w.system_prompt_len = 45;  // its last boundary (32) lies inside a prefill chunk
      w.max_requests = 10;
      break;
    case WorkloadKind::kRollout:
      w.rollout_size = 8;
      w.output_len = {LengthDist::Kind::kLogNormal, 2, 16, 6, 0.8};
      break;
    case WorkloadKind::kBursty:
      w.quiet_s = 0.05;
      w.burst_s = 0.05;
      w.max_requests = 10;
      break;
    default:
      w.rate = 50;
      w.max_requests = 10;
  }
  EXPECT_THAT(w.Validate(), IsOk()) << WorkloadKindName(kind);
  WorkloadGenerator gen(w);
  return gen.Schedule();
}

class ServingEqualityTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ServingEqualityTest, GreedyTokensAreTheSameWithTheCacheOnAndOff) {
  const ModelConfig config = *PresetConfig(GetParam());
  int64_t hits = 0, mid = 0;
  for (WorkloadKind kind : {WorkloadKind::kPoisson, WorkloadKind::kBursty, WorkloadKind::kRollout,
                            WorkloadKind::kAgentic, WorkloadKind::kSharedPrefix}) {
    const std::vector<Arrival> arr = Arrivals(kind);
    ASSERT_FALSE(arr.empty());
    for (int devices : {1, 4}) {
      const Served off = Serve(config, devices, false, arr);
      const Served on = Serve(config, devices, true, arr);
      ASSERT_EQ(off.tokens.size(), arr.size());
      EXPECT_EQ(on.tokens, off.tokens)
          << WorkloadKindName(kind) << " on " << devices << " devices differs with the cache";
      EXPECT_EQ(off.hit_tokens, 0);
      if (kind == WorkloadKind::kAgentic || kind == WorkloadKind::kSharedPrefix) {
        EXPECT_GT(on.hit_tokens, 0) << WorkloadKindName(kind);
      }
      hits += on.hit_tokens;
      mid += on.mid_chunk_hits;
    }
  }
  EXPECT_GT(hits, 0);
  if (config.hybrid()) {
    EXPECT_GT(mid, 0) << "no hit on a checkpoint taken mid-chunk";
  }
}

INSTANTIATE_TEST_SUITE_P(Models, ServingEqualityTest, ::testing::Values("tiny", "tiny-hybrid"));

}  // namespace
}  // namespace sy::engine
