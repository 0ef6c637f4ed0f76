// Redundant experts, live per-layer expert moves and skewed routing in the
// ModelRunner (issue 6). Every comparison of logits is exact: a step carries
// at most 12 tokens, so each expert GEMM has M <= kSmallGemmRows and a row's
// numbers do not depend on how many rows share its GEMM (engine/model/gemm.h)
// -- splitting an expert's rows over replicas, or moving it to another
// device, must not change a single bit.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <numeric>
#include <thread>

#include "base/status_matchers.h"
#include "engine/model_executor/model_runner.h"

namespace sy::engine {
namespace {

using ::testing::HasSubstr;

constexpr int kDevices = 4;

// 16 experts, top-2; layer 0 dense, layers 1 and 2 MoE.
ModelConfig Config() {
  ModelConfig c;
  c.name = "rebalance-test";
  c.hidden = 64;
  c.layers = 3;
  c.heads = 4;
  c.kv_heads = 2;
  c.head_dim = 16;
  c.first_k_dense_replace = 1;
  c.dense_inter = 48;
  c.experts = 16;
  c.top_k = 2;
  c.expert_inter = 32;
  c.shared_inter = 48;
  c.max_seq = 48;
  return c;
}

ModelRunnerOptions Options(std::vector<std::vector<int>> phy2log = {}, int devices = kDevices) {
  ModelRunnerOptions o;
  o.devices = devices;
  o.seed = 3;
  o.kv_pages_per_device = 64;
  o.page_size = 4;
  o.expert_phy2log = std::move(phy2log);
  return o;
}

std::unique_ptr<ModelRunner> Make(const ModelRunnerOptions& o) {
  auto r = ModelRunner::Create(Config(), o);
  EXPECT_THAT(r, IsOk());
  return r.ok() ? std::move(r).value() : nullptr;
}

// 20 slots (16 experts + 4 redundant), 5 per device. Layer 1: round-robin
// plus a replica of the hot expert 11 on every device (the skewed router's
// hottest expert in layer 1 at step 0); layer 2 another permutation with
// four replicas. Layer 0 (dense) is ignored.
std::vector<std::vector<int>> RedundantRows() {
  const std::vector<int> l1 = {0, 4, 8,  12, 11, 1, 5, 9,  13, 11,
                               2, 6, 10, 14, 11, 3, 7, 11, 15, 11};
  const std::vector<int> l2 = {15, 14, 13, 12, 0, 11, 10, 9, 8, 1, 7, 6, 5, 4, 2, 3, 2, 1, 0, 3};
  return {l1, l1, l2};
}

// Six requests, two per device on devices 0..2 (device 3 idle: it still
// serves experts), two-token prompts: 12 tokens in prefill, 6 per decode step.
struct Session {
  explicit Session(ModelRunner* r) : runner(r) {
    for (int i = 0; i < 6; ++i) {
      SeqInput s;
      s.request_id = 10 + i;
      s.device = i % 3;
      s.tokens = {(i * 37 + 11) % 260, (i * 53 + 7) % 260};
      EXPECT_THAT(r->kv_pool(s.device).Allocate(KvPool::PagesFor(r->config().max_seq, 4), &s.pages),
                  IsOk());
      batch.seqs.push_back(s);
    }
  }
  // The logits of the current positions, then greedy tokens appended.
  std::vector<std::vector<float>> Advance() {
    Result<std::vector<std::vector<float>>> logits = runner->Logits(batch);
    EXPECT_THAT(logits, IsOk());
    if (!logits.ok()) return {};
    for (size_t i = 0; i < batch.seqs.size(); ++i) {
      SeqInput& s = batch.seqs[i];
      const auto& l = (*logits)[i];
      s.start_pos += static_cast<int>(s.tokens.size());
      s.tokens = {static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin())};
    }
    batch.step += 1;
    return *logits;
  }
  // Step on the current positions (rewrites the same KV with the same values).
  StepOutput Repeat(TraceLevel level = TraceLevel::kOff) {
    Result<StepOutput> out = runner->Step(batch, level);
    EXPECT_THAT(out, IsOk());
    return out.ok() ? std::move(out).value() : StepOutput{};
  }
  ModelRunner* runner;
  BatchInput batch;
};

int64_t ExpertBytes() {
  const ModelConfig c = Config();
  return 3LL * c.hidden * c.expert_inter * static_cast<int64_t>(sizeof(float));
}

// Rows each device's experts computed in MoE layer `layer` (expert_ffn spans).
std::vector<int64_t> RowsPerDevice(const StepOutput& out, int layer) {
  std::vector<int64_t> rows(kDevices, 0);
  for (const auto& s : out.spans) {
    if (s.name == "expert_ffn" && s.layer == layer) rows[s.device] += s.tokens;
  }
  return rows;
}

TEST(RedundantExpertsTest, CreateValidatesThePlacement) {
  auto bad = [](std::vector<std::vector<int>> rows) {
    return ModelRunner::Create(Config(), Options(std::move(rows))).status();
  };
  EXPECT_THAT(bad({{0, 1}, {0, 1}}),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("2 rows, expected one per model layer (3)")));
  std::vector<std::vector<int>> rows = RedundantRows();
  rows[2][4] = 16;
  EXPECT_THAT(bad(rows), StatusIs(StatusCode::kInvalidArgument, HasSubstr("outside [0, 16)")));
  rows = RedundantRows();
  rows[1].pop_back();
  EXPECT_THAT(bad(rows), StatusIs(StatusCode::kInvalidArgument, HasSubstr("multiple of 4")));
  ModelRunnerOptions o = Options();
  o.router_skew = -1.0;
  EXPECT_THAT(ModelRunner::Create(Config(), o).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("router_skew")));
}

// R = 4 gives the same numbers as R = 0, bit for bit, while the hot
// expert's rows are split over its replicas (the load per device evens out).
TEST(RedundantExpertsTest, ReplicasServeTheSameLogitsAndSplitTheLoad) {
  ModelRunnerOptions skewed = Options();
  skewed.router_skew = 4.0;
  auto base = Make(skewed);
  ASSERT_TRUE(base);
  // Which expert the skew made hot in layer 1 (a pure function of the layer).
  int hot_expert = 0;
  {
    auto probe = Make(skewed);
    Session p(probe.get());
    const std::vector<int64_t> counts = p.Repeat().expert_counts[1];
    hot_expert = static_cast<int>(std::max_element(counts.begin(), counts.end()) - counts.begin());
  }
  // Device d keeps its round-robin experts d, d+4, d+8, d+12 and gets one
  // replica of the hot expert: 5 slots each, 5 copies of it in all.
  std::vector<int> l1;
  for (int d = 0; d < 4; ++d) {
    for (int k = 0; k < 4; ++k) l1.push_back(d + 4 * k);
    l1.push_back(hot_expert);
  }
  skewed.expert_phy2log = {l1, l1, l1};
  auto red = Make(skewed);
  ASSERT_TRUE(red);
  EXPECT_EQ(red->expert_map().slots(), 20);
  EXPECT_EQ(red->expert_map().device_slots(3), 5);
  EXPECT_EQ(red->expert_map().replicas(1, hot_expert).size(), 5u);
  const int home = hot_expert % 4;
  EXPECT_EQ(base->expert_device()[hot_expert], home);

  Session a(base.get()), b(red.get());
  for (int step = 0; step < 5; ++step) {
    if (step == 0) {
      // Prefill, traced: where did layer 1's rows go?
      const StepOutput oa = a.Repeat(TraceLevel::kFull), ob = b.Repeat(TraceLevel::kFull);
      EXPECT_EQ(oa.expert_counts, ob.expert_counts);  // per logical expert: unchanged
      const int64_t hot = oa.expert_counts[1][hot_expert];
      EXPECT_GE(hot, 10);  // the skew makes it the hot expert of layer 1
      const std::vector<int64_t> ra = RowsPerDevice(oa, 1), rb = RowsPerDevice(ob, 1);
      EXPECT_EQ(std::accumulate(ra.begin(), ra.end(), int64_t{0}), 12 * 2);
      EXPECT_EQ(std::accumulate(rb.begin(), rb.end(), int64_t{0}), 12 * 2);
      // Every other expert sits on the same device in both maps, so the
      // difference per device is the hot expert's rows alone: R = 0 puts
      // them all on its home device; R = 4 spreads each source's rows
      // (j + rank) mod 5 over its five slots, one on every device.
      EXPECT_GE(ra[home], hot);
      EXPECT_LT(rb[home], ra[home]);
      int gained = 0;
      for (int d = 0; d < 4; ++d) gained += d != home && rb[d] > ra[d];
      EXPECT_GE(gained, 2);
    }
    EXPECT_EQ(a.Advance(), b.Advance()) << "step " << step;
  }
  EXPECT_EQ(a.batch.seqs[0].tokens, b.batch.seqs[0].tokens);
}

// Stage on a background thread while the main thread keeps stepping; commit
// between steps; the outputs never differ from a runner that never moved.
void MoveAndCompare(const std::vector<std::vector<int>>& start,
                    const std::vector<std::pair<int, std::vector<int>>>& moves,
                    const std::function<void(int, const ExpertMoveStats&)>& check) {
  auto still = Make(Options(start));
  auto moved = Make(Options(start));
  ASSERT_TRUE(still && moved);
  Session a(still.get()), b(moved.get());
  EXPECT_EQ(a.Advance(), b.Advance());
  for (size_t m = 0; m < moves.size(); ++m) {
    const auto& [layer, row] = moves[m];
    Result<ExpertMoveStats> staged = Internal("not run");
    std::atomic<bool> done{false};
    std::thread stager([&, layer = layer, row = row] {
      staged = moved->StageExpertLayer(layer, row);
      done.store(true);
    });
    int repeats = 0;
    const StepOutput want = a.Repeat();
    while (!done.load() || repeats == 0) {
      const StepOutput got = b.Repeat();
      ASSERT_EQ(got.outputs.size(), want.outputs.size());
      for (size_t i = 0; i < got.outputs.size(); ++i) {
        EXPECT_EQ(got.outputs[i].next_token, want.outputs[i].next_token);
      }
      ++repeats;
    }
    stager.join();
    ASSERT_THAT(staged, IsOk());
    EXPECT_NE(moved->expert_map().phy2log_row(layer), row);  // not live before the commit
    EXPECT_EQ(a.Advance(), b.Advance()) << "staged, not committed: move " << m;
    Result<ExpertMoveStats> committed = moved->CommitExpertLayer(layer);
    ASSERT_THAT(committed, IsOk());
    EXPECT_EQ(moved->expert_map().phy2log_row(layer), row);
    EXPECT_EQ(committed->bytes_copied, staged->bytes_copied);
    EXPECT_GE(committed->commit_ms, 0.0);
    check(static_cast<int>(m), *committed);
    EXPECT_EQ(a.Advance(), b.Advance()) << "after move " << m;
  }
  for (int step = 0; step < 3; ++step) EXPECT_EQ(a.Advance(), b.Advance());
}

// R = 0: layer 1 reversed (experts change devices), layer 2 permuted within
// each device (no byte leaves a device), then layer 1 back.
TEST(LiveExpertMoveTest, PermutedRowsKeepOutputsBitIdentical) {
  std::vector<int> reversed(16), within;
  std::iota(reversed.rbegin(), reversed.rend(), 0);
  for (int d = 0; d < kDevices; ++d) {
    for (int k : {1, 0, 3, 2}) within.push_back(d + 4 * k);  // round-robin slots, swapped
  }
  const std::vector<int> rr = {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15};
  const int64_t eb = ExpertBytes();
  MoveAndCompare({}, {{1, reversed}, {2, within}, {1, rr}}, [&](int m, const ExpertMoveStats& s) {
    if (m == 0) {
      EXPECT_EQ(s.layer, 1);
      EXPECT_EQ(s.experts_moved, 12);  // slots 3, 6, 9, 12 keep their expert
      EXPECT_EQ(s.bytes_copied, 12 * eb);
      EXPECT_EQ(s.peer_bytes, 12 * eb);
    } else if (m == 1) {
      EXPECT_EQ(s.experts_moved, 16);
      EXPECT_EQ(s.bytes_copied, 16 * eb);
      EXPECT_EQ(s.peer_bytes, 0);
    }
  });
}

// R = 4: new replica sets in both layers, and back.
TEST(LiveExpertMoveTest, RowsWithReplicasKeepOutputsBitIdentical) {
  const std::vector<std::vector<int>> start = RedundantRows();
  const std::vector<int> l1 = {1, 0, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 5, 5, 5, 5};
  const std::vector<int> l2 = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 0, 0, 0};
  MoveAndCompare(start, {{1, l1}, {2, l2}, {1, start[1]}}, [&](int, const ExpertMoveStats& s) {
    EXPECT_GT(s.experts_moved, 0);
    EXPECT_EQ(s.bytes_copied, s.experts_moved * ExpertBytes());
    EXPECT_GT(s.peer_bytes, 0);
  });
}

TEST(LiveExpertMoveTest, InjectedFailureChangesNothing) {
  auto still = Make(Options());
  auto moved = Make(Options());
  ASSERT_TRUE(still && moved);
  Session a(still.get()), b(moved.get());
  EXPECT_EQ(a.Advance(), b.Advance());
  const ExpertMap before = moved->expert_map();
  std::vector<int> reversed(16);
  std::iota(reversed.rbegin(), reversed.rend(), 0);
  for (int64_t after : {int64_t{0}, ExpertBytes() + 100, 5 * ExpertBytes()}) {
    EXPECT_THAT(moved->StageExpertLayer(1, reversed, after),
                StatusIs(StatusCode::kUnavailable, HasSubstr("injected")));
    EXPECT_TRUE(moved->expert_map() == before);
    EXPECT_THAT(moved->CommitExpertLayer(1),
                StatusIs(StatusCode::kFailedPrecondition, HasSubstr("no expert layer is staged")));
    EXPECT_EQ(a.Advance(), b.Advance());
  }
  // A budget larger than the layer's bytes does not fail.
  ASSERT_THAT(moved->StageExpertLayer(1, reversed, 12 * ExpertBytes()), IsOk());
  ASSERT_THAT(moved->CommitExpertLayer(1), IsOk());
  EXPECT_EQ(a.Advance(), b.Advance());
}

TEST(LiveExpertMoveTest, RefusalsNameTheState) {
  auto runner = Make(Options());
  ASSERT_TRUE(runner);
  std::vector<int> reversed(16);
  std::iota(reversed.rbegin(), reversed.rend(), 0);
  const ExpertMap before = runner->expert_map();
  EXPECT_THAT(runner->CommitExpertLayer(1),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("no expert layer is staged")));
  EXPECT_THAT(runner->StageExpertLayer(0, reversed),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("dense layer")));
  EXPECT_THAT(runner->StageExpertLayer(1, {0, 1, 2}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("expected 16")));
  EXPECT_THAT(runner->StageExpertLayer(3, reversed), StatusIs(StatusCode::kInvalidArgument));
  ASSERT_THAT(runner->StageExpertLayer(1, reversed), IsOk());
  EXPECT_THAT(runner->StageExpertLayer(2, reversed),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("layer 1 is staged")));
  EXPECT_THAT(runner->CommitExpertLayer(2),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("layer 1 is the one staged")));
  runner->AbortStagedExpertLayer();
  EXPECT_THAT(runner->CommitExpertLayer(1),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("no expert layer is staged")));
  runner->AbortStagedExpertLayer();  // none staged: fine
  EXPECT_TRUE(runner->expert_map() == before);
  ASSERT_THAT(runner->StageExpertLayer(2, reversed), IsOk());
  ASSERT_THAT(runner->CommitExpertLayer(2), IsOk());
  EXPECT_EQ(runner->expert_map().phy2log_row(2), reversed);

  // Three devices over 16 experts: unequal slot counts, no unified buffer.
  auto uneven = Make(Options({}, 3));
  ASSERT_TRUE(uneven);
  EXPECT_FALSE(uneven->expert_map().uniform());
  EXPECT_THAT(uneven->StageExpertLayer(1, uneven->expert_map().phy2log_row(1)),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("unequal expert slot counts")));
}

// skew > 0 concentrates the routed tokens on a hot expert per layer, which
// moves every drift_steps steps; skew 0 changes no bit.
TEST(SkewedRoutingTest, SkewConcentratesLoadAndDrifts) {
  ModelRunnerOptions o = Options();
  o.router_skew = 3.0;
  o.skew_drift_steps = 2;
  auto skewed = Make(o);
  ASSERT_TRUE(skewed);
  Session s(skewed.get());
  // The hot expert of each layer takes a large share, and the hot set moves
  // with the drift epoch (t / 2): epochs 0 and 1 must not agree on every layer.
  std::vector<std::vector<int>> hot(4);  // [step][layer - 1]
  for (int step = 0; step < 4; ++step) {
    const StepOutput out = s.Repeat();
    for (int layer = 1; layer <= 2; ++layer) {
      const std::vector<int64_t>& counts = out.expert_counts[layer];
      const auto top = std::max_element(counts.begin(), counts.end());
      const double share =
          static_cast<double>(*top) / std::accumulate(counts.begin(), counts.end(), 0.0);
      EXPECT_GT(share, 0.3) << "step " << step << " layer " << layer << ": uniform is 1/16";
      hot[step].push_back(static_cast<int>(top - counts.begin()));
    }
    s.Advance();
  }
  EXPECT_EQ(hot[0], hot[1]) << "same drift epoch, same hot experts";
  EXPECT_EQ(hot[2], hot[3]);
  EXPECT_NE(hot[0], hot[2]) << "the hot experts move with the drift epoch";

  auto plain = Make(Options());
  o.router_skew = 0.0;
  o.skew_drift_steps = 3;
  auto zero = Make(o);
  ASSERT_TRUE(plain && zero);
  Session p(plain.get()), z(zero.get());
  for (int step = 0; step < 3; ++step) EXPECT_EQ(p.Advance(), z.Advance());
}

}  // namespace
}  // namespace sy::engine
