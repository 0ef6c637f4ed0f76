// ModelRunner::SwitchParallelism (issue 5): the routed experts switch
// between the EP and the TP layout in place, between steps, and nothing a
// request sees changes. Logits are compared bit for bit: TpMoeLayer's
// per-(token, k) all-reduce and EpMoeLayer's sliced expert FFN compute the
// same numbers in the same order (engine/moe/tp_moe.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "engine/model/config.h"
#include "engine/model_executor/model_runner.h"
#include "engine/model_executor/parallel_switch.h"
#include "engine/scheduler/rehome.h"
#include "engine/scheduler/scheduler.h"
#include "engine/workload/workload.h"
#include "tests/engine/model_executor/switch_test_util.h"

namespace sy::engine {
namespace {

using ::testing::HasSubstr;

class PresetTest : public ::testing::TestWithParam<const char*> {};

TEST_P(PresetTest, EpAndTpLogitsAreBitIdenticalForPrefillAndDecode) {
  auto ep = Make(GetParam(), {.devices = kDevices});
  auto tp = Make(GetParam(), {.devices = kDevices});
  ASSERT_TRUE(ep && tp);
  EXPECT_EQ(tp->parallel_mode(), ParallelMode::kEP);
  auto s = tp->SwitchParallelism(ParallelMode::kTP);
  ASSERT_THAT(s.status(), IsOk());
  EXPECT_EQ(tp->parallel_mode(), ParallelMode::kTP);
  Session a(ep.get()), b(tp.get());
  for (int step = 0; step < 4; ++step) {
    const auto la = a.Next(), lb = b.Next();
    ASSERT_FALSE(la.empty());
    EXPECT_TRUE(SameBits(la, lb)) << GetParam() << ": EP and TP logits differ at step " << step;
  }
}

TEST_P(PresetTest, ExpertCountsAreTheSameInBothLayouts) {
  auto r = Make(GetParam(), {.devices = kDevices});
  ASSERT_TRUE(r);
  Session ses(r.get());
  ses.Next();  // prefill
  // A decode-shaped step through Step, in each layout.
  std::vector<std::vector<int64_t>> counts[2];
  for (int i = 0; i < 2; ++i) {
    BatchInput batch;
    SeqInput s;
    s.request_id = 1;
    s.device = 1;
    s.tokens = {7, 8, 9, 10, 11};
    s.pages = {60, 61};
    s.state_slot = r->config().linear_layers() > 0 ? 7 : -1;
    batch.seqs = {s};
    auto out = r->Step(batch, TraceLevel::kOff);
    ASSERT_THAT(out.status(), IsOk());
    counts[i] = out->expert_counts;
    ASSERT_THAT(r->SwitchParallelism(ParallelMode::kTP).status(), IsOk());
  }
  EXPECT_EQ(counts[0], counts[1]);
  int64_t total = 0;
  for (const auto& l : counts[1]) {
    for (int64_t n : l) total += n;
  }
  EXPECT_EQ(total,
            5LL * r->config().top_k * (r->config().layers - r->config().first_k_dense_replace));
}

// Serving end to end (Scheduler + ModelRunner, prefix cache on): the
// greedy tokens of every request are the same in static EP, static TP and a
// run that switches every 3 steps in both directions.
// kRehome also re-homes requests before each TP -> EP (Algorithm 4), as the
// engine does.
enum class Plan { kEp, kTp, kSwitchEvery3, kRehome };

struct Served {
  std::map<int64_t, std::vector<int32_t>> tokens;
  int switches = 0;
  int rehomed = 0;  // requests moved by Algorithm 4
};

Served Serve(const std::string& preset, Plan plan, const std::vector<Arrival>& arr) {
  Served out;
  auto runner = Make(preset, {.devices = kDevices});
  if (!runner) return out;
  SchedulerOptions so;
  so.max_seq = runner->config().max_seq;
  so.vocab = runner->config().vocab;
  so.eos_token = runner->config().eos_token;
  so.max_batch_tokens = 96;
  so.max_running = 8;
  so.prefix_cache = true;
  std::vector<KvPool*> kv;
  std::vector<StatePool*> st;
  for (int d = 0; d < kDevices; ++d) {
    kv.push_back(&runner->kv_pool(d));
    st.push_back(&runner->state_pool(d));
  }
  Scheduler sched(so, kv, st);
  if (plan == Plan::kTp) {
    EXPECT_THAT(runner->SwitchParallelism(ParallelMode::kTP).status(), IsOk());
  }
  size_t next = 0;
  for (int step = 0; step < 5000 && (next < arr.size() || !sched.idle()); ++step) {
    while (next < arr.size() && arr[next].time_us <= step * 10'000LL) {
      EXPECT_THAT(sched.Submit(arr[next].spec, step).status(), IsOk());
      ++next;
    }
    if ((plan == Plan::kSwitchEvery3 || plan == Plan::kRehome) && step % 3 == 2) {
      const ParallelMode to =
          runner->parallel_mode() == ParallelMode::kEP ? ParallelMode::kTP : ParallelMode::kEP;
      if (plan == Plan::kRehome && to == ParallelMode::kEP) {
        const RehomePlan rp = LongestFirstAssignment(sched.RehomeItems(), sched.RehomeCapacities());
        if (rp.fits) {
          auto moves = sched.Rehome(rp.home);
          EXPECT_THAT(moves.status(), IsOk());
          if (moves.ok()) {
            EXPECT_THAT(runner->MoveRequestState(*moves), IsOk());
            out.rehomed += static_cast<int>(moves->size());
          }
        }
      }
      EXPECT_THAT(runner->SwitchParallelism(to).status(), IsOk());
      ++out.switches;
    }
    BatchInput b = sched.Plan();
    if (b.seqs.empty()) continue;
    auto step_out = runner->Step(b, TraceLevel::kOff);
    EXPECT_THAT(step_out.status(), IsOk());
    if (!step_out.ok()) break;
    auto done = sched.Commit(*step_out, step);
    EXPECT_THAT(done.status(), IsOk());
    for (const Request& r : *done) out.tokens[r.id] = r.generated;
  }
  EXPECT_TRUE(sched.idle());
  // Every page and slot comes back, whatever moved (re-homing included).
  sched.FlushCache();
  for (int d = 0; d < kDevices; ++d) {
    EXPECT_EQ(kv[d]->used_pages(), 0) << "device " << d;
    EXPECT_EQ(st[d]->used_slots(), 0) << "device " << d;
  }
  return out;
}

std::vector<Arrival> Arrivals(WorkloadKind kind) {
  WorkloadOptions w = WorkloadOptions::ForKind(kind);
  w.seed = 13;
  w.output_len = {LengthDist::Kind::kUniform, 4, 10};
  w.prompt_len = {LengthDist::Kind::kUniform, 8, 40};
  w.max_prompt_tokens = 300;
  if (kind == WorkloadKind::kRollout) {
    w.rollout_size = 8;
    w.output_len = {LengthDist::Kind::kLogNormal, 2, 16, 6, 0.8};
  } else {
    w.quiet_s = 0.05;
    w.burst_s = 0.05;
    w.max_requests = 10;
  }
  EXPECT_THAT(w.Validate(), IsOk());
  return WorkloadGenerator(w).Schedule();
}

TEST_P(PresetTest, GreedyTokensAreTheSameInEpTpAndSwitchingRuns) {
  int rehomed = 0;
  for (WorkloadKind kind : {WorkloadKind::kBursty, WorkloadKind::kRollout}) {
    const std::vector<Arrival> arr = Arrivals(kind);
    ASSERT_FALSE(arr.empty());
    const Served ep = Serve(GetParam(), Plan::kEp, arr);
    const Served tp = Serve(GetParam(), Plan::kTp, arr);
    const Served sw = Serve(GetParam(), Plan::kSwitchEvery3, arr);
    const Served rh = Serve(GetParam(), Plan::kRehome, arr);
    rehomed += rh.rehomed;
    EXPECT_EQ(rh.tokens, ep.tokens)
        << GetParam() << " " << WorkloadKindName(kind) << ": switching with re-homing";
    ASSERT_EQ(ep.tokens.size(), arr.size()) << WorkloadKindName(kind);
    EXPECT_EQ(tp.tokens, ep.tokens) << GetParam() << " " << WorkloadKindName(kind) << ": TP";
    EXPECT_EQ(sw.tokens, ep.tokens)
        << GetParam() << " " << WorkloadKindName(kind) << ": switching every 3 steps";
    EXPECT_GE(sw.switches, 4) << WorkloadKindName(kind);
  }
  // Algorithm 4 moved someone: the re-homed run exercised the state moves.
  EXPECT_GT(rehomed, 0) << GetParam();
}

INSTANTIATE_TEST_SUITE_P(Presets, PresetTest, ::testing::Values("tiny", "tiny-hybrid"));

// Every phase x first / middle / last MoE layer x both directions: the
// switch fails with UNAVAILABLE, rolls back (checksums equal), keeps the
// mode, and later logits equal those of a runner that never switched.
TEST(ParallelSwitchFaultTest, EveryPhaseAndLayerRollsBackAndServingContinues) {
  auto faulty = Make("tiny", {.devices = kDevices});
  auto clean = Make("tiny", {.devices = kDevices});
  ASSERT_TRUE(faulty && clean);
  Session fs(faulty.get()), cs(clean.get());
  ASSERT_TRUE(SameBits(fs.Next(), cs.Next()));
  const int layers = faulty->expert_buffer(0)->layers();
  ASSERT_GE(layers, 3);
  int faults = 0;
  for (ParallelMode mode : {ParallelMode::kEP, ParallelMode::kTP}) {
    if (faulty->parallel_mode() != mode) {
      ASSERT_THAT(faulty->SwitchParallelism(mode).status(), IsOk());
    }
    const ParallelMode target = mode == ParallelMode::kEP ? ParallelMode::kTP : ParallelMode::kEP;
    for (ReshardPhase phase :
         {ReshardPhase::kPermute, ReshardPhase::kExchange, ReshardPhase::kPlace}) {
      for (int layer : {0, layers / 2, layers - 1}) {
        const FaultPlan fault{.rank = (layer + faults) % kDevices, .layer = layer, .phase = phase};
        const std::vector<uint64_t> before = Checksums(*faulty, mode);
        auto s = faulty->SwitchParallelism(target, &fault);
        const std::string what = std::string(ParallelModeName(mode)) + "->" +
                                 std::string(ReshardPhaseName(phase)) + " layer " +
                                 std::to_string(layer);
        EXPECT_EQ(s.status().code(), StatusCode::kUnavailable) << what;
        EXPECT_THAT(s.status().message(), HasSubstr(std::string(ReshardPhaseName(phase)))) << what;
        EXPECT_TRUE(faulty->last_switch().rolled_back) << what;
        EXPECT_EQ(faulty->parallel_mode(), mode) << what;
        EXPECT_EQ(Checksums(*faulty, mode), before) << what;
        EXPECT_TRUE(SameBits(fs.Next(), cs.Next())) << "logits after a failed " << what;
        ++faults;
      }
    }
  }
  EXPECT_EQ(faults, 18);
  // The runner keeps switching and serving.
  ASSERT_THAT(faulty->SwitchParallelism(ParallelMode::kEP).status(), IsOk());
  EXPECT_TRUE(SameBits(fs.Next(), cs.Next()));
}

int64_t ResidentBytes() {
  std::ifstream f("/proc/self/statm");
  int64_t size = 0, resident = 0;
  f >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

TEST(ParallelSwitchMemoryTest, HundredSwitchesLeakNothingAndTheBufferIsOneSlotMore) {
  auto r = Make("tiny", {.devices = kDevices});
  ASSERT_TRUE(r);
  const ModelConfig& c = r->config();
  const UnifiedExpertBuffer& buf = *r->expert_buffer(0);
  const int layers = buf.layers();
  // The extra memory of the unified buffer: one slot, stated in bytes.
  const int64_t weight_bytes =
      static_cast<int64_t>(layers) * (c.experts / kDevices) * 3 * c.expert_inter * c.hidden * 4;
  std::printf(
      "[ unified buffer ] tiny on %d devices: %lld bytes per device = %lld weight bytes "
      "(%d MoE layers) + %lld spare (one slot, 1/%d); transport scratch %lld bytes\n",
      kDevices, static_cast<long long>(buf.bytes()), static_cast<long long>(weight_bytes), layers,
      static_cast<long long>(buf.bytes() - weight_bytes), layers,
      static_cast<long long>(buf.scratch_bytes()));
  EXPECT_EQ(buf.bytes() - weight_bytes, buf.slot_bytes());
  EXPECT_EQ(buf.slot_bytes(),
            static_cast<int64_t>(c.experts / kDevices) * 3 * c.expert_inter * c.hidden * 4);

  Session ses(r.get());
  const auto first = ses.Next();
  const std::vector<uint64_t> ep_sums = Checksums(*r, ParallelMode::kEP);
  const int64_t bytes = buf.bytes();
  const float* data = buf.data();
  // Warm-up: the first switch to TP makes the TP layer and its views.
  ASSERT_THAT(r->SwitchParallelism(ParallelMode::kTP).status(), IsOk());
  ASSERT_THAT(r->SwitchParallelism(ParallelMode::kEP).status(), IsOk());
  const int64_t rss0 = ResidentBytes();
  for (int i = 0; i < 100; ++i) {
    const ParallelMode target = i % 2 == 0 ? ParallelMode::kTP : ParallelMode::kEP;
    auto s = r->SwitchParallelism(target);
    ASSERT_THAT(s.status(), IsOk()) << i;
    EXPECT_EQ(s->layers, layers);
    // Each device sends (P-1)/P of its slot per layer.
    EXPECT_EQ(s->bytes_moved, static_cast<int64_t>(layers) * (kDevices - 1) * buf.slot_bytes());
  }
  const int64_t rss1 = ResidentBytes();
  EXPECT_EQ(r->parallel_mode(), ParallelMode::kEP);
  EXPECT_EQ(buf.bytes(), bytes);
  EXPECT_EQ(buf.data(), data);  // the allocation never moved
  EXPECT_EQ(Checksums(*r, ParallelMode::kEP), ep_sums);
  std::printf("[ 100 switches ] resident memory %+.1f MiB\n", (rss1 - rss0) / 1048576.0);
  // Generous: a leaked slot per switch would be ~100 x 3 MiB.
  EXPECT_LT(rss1 - rss0, 32LL << 20);
  EXPECT_FALSE(first.empty());
}

TEST(ParallelSwitchRefusalTest, ReplicasUnevenDevicesAndAStagedLayerAreRefused) {
  // Replicas: 20 slots for 16 experts on 4 devices.
  std::vector<int> row;
  for (int s = 0; s < 20; ++s) row.push_back(s % 16);
  auto rep = Make("tiny", {.devices = kDevices, .expert_phy2log = {row, row, row, row}});
  ASSERT_TRUE(rep);
  auto s = rep->SwitchParallelism(ParallelMode::kTP);
  EXPECT_EQ(s.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.status().message(), HasSubstr("redundant experts"));
  EXPECT_EQ(rep->parallel_mode(), ParallelMode::kEP);

  // 3 devices over 16 experts.
  auto three = Make("tiny", {.devices = 3});
  ASSERT_TRUE(three);
  s = three->SwitchParallelism(ParallelMode::kTP);
  EXPECT_EQ(s.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.status().message(), HasSubstr("experts"));
  EXPECT_EQ(three->parallel_mode(), ParallelMode::kEP);

  // A staged expert layer (a rebalance in progress).
  auto r = Make("tiny", {.devices = kDevices});
  ASSERT_TRUE(r);
  std::vector<int> moved = r->expert_map().phy2log_row(1);
  std::swap(moved[0], moved[4]);
  ASSERT_THAT(r->StageExpertLayer(1, moved).status(), IsOk());
  const std::vector<uint64_t> before = Checksums(*r, ParallelMode::kEP);
  s = r->SwitchParallelism(ParallelMode::kTP);
  EXPECT_EQ(s.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.status().message(), HasSubstr("a rebalance is in progress"));
  EXPECT_EQ(r->parallel_mode(), ParallelMode::kEP);
  EXPECT_EQ(Checksums(*r, ParallelMode::kEP), before);
  // The staging survives the refusal; after the commit the switch goes.
  ASSERT_THAT(r->CommitExpertLayer(1).status(), IsOk());
  ASSERT_THAT(r->SwitchParallelism(ParallelMode::kTP).status(), IsOk());
  // In TP, live expert moves are refused.
  auto staged = r->StageExpertLayer(1, r->expert_map().phy2log_row(1));
  EXPECT_EQ(staged.status().code(), StatusCode::kFailedPrecondition);
  // Already in the target: OK, nothing moves.
  auto again = r->SwitchParallelism(ParallelMode::kTP);
  ASSERT_THAT(again.status(), IsOk());
  EXPECT_EQ(again->layers, 0);
}

// The reshard's figures on the default and a larger preset (printed; bytes checked).
TEST(ParallelSwitchFiguresTest, ReshardBytesAndBandwidthOnTinyAndSmall) {
  for (const char* preset : {"tiny", "small"}) {
    auto r = Make(preset, {.devices = kDevices});
    ASSERT_TRUE(r);
    const UnifiedExpertBuffer& buf = *r->expert_buffer(0);
    for (ParallelMode target : {ParallelMode::kTP, ParallelMode::kEP}) {
      auto s = r->SwitchParallelism(target);
      ASSERT_THAT(s.status(), IsOk());
      EXPECT_EQ(s->bytes_moved,
                static_cast<int64_t>(buf.layers()) * (kDevices - 1) * buf.slot_bytes());
      EXPECT_GT(s->gbps, 0.0);
      EXPECT_GE(s->total_ms, s->weights_ms);
      std::printf(
          "[ reshard ] %-6s %s->%s: %d layers, %.1f MiB moved, weights %.2f ms "
          "(permute %.2f, exchange %.2f, place %.2f), other %.2f ms, total %.2f ms, "
          "%.2f GB/s\n",
          preset, std::string(ParallelModeName(s->from)).c_str(),
          std::string(ParallelModeName(s->to)).c_str(), s->layers, s->bytes_moved / 1048576.0,
          s->weights_ms, s->permute_ms, s->exchange_ms, s->place_ms, s->other_ms, s->total_ms,
          s->gbps);
    }
  }
}

// FoldSwitch: the figures and the outcome from the devices' parts. A
// rollback whose checksum differs is INTERNAL (no fault plan can produce one
// through the runner: the buffer's rollback is exact).
TEST(FoldSwitchTest, FiguresRollbackAndChecksumMismatch) {
  std::vector<DeviceSwitch> parts(2);
  parts[0].stats = {.layers = 3,
                    .permute_ms = 1,
                    .exchange_ms = 4,
                    .place_ms = 2,
                    .total_ms = 8,
                    .bytes_sent = 1000};
  parts[1].stats = {.layers = 3,
                    .permute_ms = 2,
                    .exchange_ms = 3,
                    .place_ms = 1,
                    .total_ms = 10,
                    .bytes_sent = 3000};
  parts[0].checksum_ms = 0.5;
  parts[1].checksum_ms = 1.5;
  SwitchStats st;
  ASSERT_THAT(FoldSwitch(ParallelMode::kEP, ParallelMode::kTP, parts, 12.0, &st), IsOk());
  EXPECT_EQ(st.layers, 3);
  EXPECT_EQ(st.permute_ms, 2);
  EXPECT_EQ(st.exchange_ms, 4);
  EXPECT_EQ(st.weights_ms, 10);
  EXPECT_EQ(st.other_ms, 2);
  EXPECT_EQ(st.bytes_moved, 4000);
  EXPECT_DOUBLE_EQ(st.gbps, 4000 / (10 * 1e6));
  EXPECT_FALSE(st.rolled_back);

  parts[1].status = Unavailable("reshard EP->TP failed at MoE layer 1, phase place (rank 1)");
  parts[1].stats.rollback_ms = 3;
  for (DeviceSwitch& d : parts) d.checksum_before = d.checksum_after = 42;
  Status s = FoldSwitch(ParallelMode::kEP, ParallelMode::kTP, parts, 12.0, &st);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("phase place"));
  EXPECT_TRUE(st.rolled_back);
  EXPECT_EQ(st.layers, 0);
  EXPECT_EQ(st.rollback_ms, 3);

  parts[0].checksum_after = 43;
  s = FoldSwitch(ParallelMode::kEP, ParallelMode::kTP, parts, 12.0, &st);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_THAT(s.message(), HasSubstr("device 0's expert weights differ"));
  EXPECT_FALSE(st.rolled_back);
}

}  // namespace
}  // namespace sy::engine
