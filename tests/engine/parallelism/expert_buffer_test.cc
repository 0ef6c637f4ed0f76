#include "engine/parallelism/expert_buffer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <thread>

#include "base/status_matchers.h"
#include "engine/distributed/inproc_communicator.h"
#include "engine/moe/ep_moe.h"

namespace sy::engine {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

struct Shape {
  int p, e, i, h, l;
};

// Runs fn(rank) on P threads, as the model runner does.
void OnRanks(int p, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < p; ++r) threads.emplace_back(fn, r);
  for (auto& t : threads) t.join();
}

// The full expert e of MoE layer i, as every rank would build it.
SwigluWeights FullExpert(const Shape& s, int layer, int e) {
  SwigluWeights w;
  w.in = s.h;
  w.inter = s.i;
  w.gate_up.resize(static_cast<size_t>(s.h) * 2 * s.i);
  w.down.resize(static_cast<size_t>(s.i) * s.h);
  const std::string name = "l" + std::to_string(layer) + ".e" + std::to_string(e);
  FillTensor(7, name + ".gate_up", 1.0f, 0.0f, w.gate_up.data(), w.gate_up.size());
  FillTensor(7, name + ".down", 1.0f, 0.0f, w.down.data(), w.down.size());
  return w;
}

// Rank r's MoE layers: the experts it holds in any layer present, the others empty.
std::vector<LayerWeights> RankLayers(const Shape& s, const ExpertMap& map, int r) {
  std::vector<LayerWeights> layers(s.l);
  for (int i = 0; i < s.l; ++i) {
    layers[i].experts.resize(s.e);
    for (int e : map.ExpertsOnDevice(r)) layers[i].experts[e] = FullExpert(s, i, e);
  }
  return layers;
}

ExpertMap RoundRobin(const Shape& s) { return ExpertMap::RoundRobin(s.l, 0, s.e, s.p); }

// P buffers in EP mode over a placement (default round-robin) and one communicator.
struct Cluster {
  explicit Cluster(const Shape& shape) : Cluster(shape, RoundRobin(shape)) {}
  Cluster(const Shape& shape, ExpertMap placement)
      : s(shape), map(std::move(placement)), comm(shape.p) {
    for (int r = 0; r < s.p; ++r) {
      std::vector<LayerWeights> layers = RankLayers(s, map, r);
      auto b = UnifiedExpertBuffer::Create(r, map, s.i, s.h, layers);
      EXPECT_THAT(b, IsOk());
      buf.push_back(std::move(b).value());
    }
  }
  // Every rank reshards together; returns each rank's result.
  std::vector<Result<ReshardStats>> Reshard(ParallelMode target, const FaultPlan* fault = nullptr) {
    std::vector<Result<ReshardStats>> out(s.p, Result<ReshardStats>(Internal("not run")));
    OnRanks(s.p, [&](int r) { out[r] = buf[r]->Reshard(target, &comm, fault); });
    return out;
  }
  void ReshardOk(ParallelMode target) {
    for (const auto& res : Reshard(target)) ASSERT_THAT(res, IsOk());
  }
  std::vector<uint64_t> Checksums(ParallelMode m) const {
    std::vector<uint64_t> c;
    for (const auto& b : buf) c.push_back(b->Checksum(m));
    return c;
  }

  Shape s;
  ExpertMap map;
  InProcCommunicator comm;
  std::vector<std::unique_ptr<UnifiedExpertBuffer>> buf;
};

std::vector<float> Floats(const float* p, size_t n) { return std::vector<float>(p, p + n); }

// Every local expert of every rank equals the full expert, bit for bit.
void ExpectEpHoldsFullExperts(const Cluster& c) {
  const Shape& s = c.s;
  for (int r = 0; r < s.p; ++r) {
    const UnifiedExpertBuffer& b = *c.buf[r];
    ASSERT_EQ(b.mode(), ParallelMode::kEP);
    for (int i = 0; i < s.l; ++i) {
      ASSERT_EQ(b.local_ids(i), c.map.LocalExperts(i, r));
      for (int k = 0; k < b.local_slots(); ++k) {
        const SwigluWeights full = FullExpert(s, i, b.local_ids(i)[k]);
        const EpExpertView v = b.EpExpert(i, k);
        EXPECT_EQ(Floats(v.gate_up, full.gate_up.size()), full.gate_up)
            << r << " " << i << " " << k;
        EXPECT_EQ(Floats(v.down, full.down.size()), full.down) << r << " " << i << " " << k;
      }
    }
  }
}

class ExpertBufferTest : public ::testing::TestWithParam<int> {
 protected:
  Shape MakeShape() const { return {.p = GetParam(), .e = 8, .i = 8, .h = 4, .l = 3}; }
};

TEST_P(ExpertBufferTest, CreateMovesLocalExpertsIntoTheEpAliasAndFreesTheVectors) {
  const Shape s = MakeShape();
  const ExpertMap map = RoundRobin(s);
  std::vector<LayerWeights> layers = RankLayers(s, map, 1);
  auto b = UnifiedExpertBuffer::Create(1, map, s.i, s.h, layers);
  ASSERT_THAT(b, IsOk());
  EXPECT_EQ((*b)->local_ids(0), map.LocalExperts(0, 1));
  for (const LayerWeights& lw : layers) {
    for (const SwigluWeights& x : lw.experts) {
      EXPECT_FALSE(x.present());
      EXPECT_EQ(x.gate_up.capacity(), 0u);
      EXPECT_EQ(x.down.capacity(), 0u);
    }
  }
  Cluster c(s);
  ExpectEpHoldsFullExperts(c);
}

// Algorithm 1: the TP alias holds, for every expert, exactly the rank's
// intermediate shard sliced directly from the full expert.
TEST_P(ExpertBufferTest, EpToTpEqualsShardsSlicedFromTheFullExperts) {
  const Shape s = MakeShape();
  Cluster c(s);
  const std::vector<Result<ReshardStats>> res = c.Reshard(ParallelMode::kTP);
  const int sh = s.i / s.p;
  for (int r = 0; r < s.p; ++r) {
    ASSERT_THAT(res[r], IsOk());
    EXPECT_EQ(res[r]->from, ParallelMode::kEP);
    EXPECT_EQ(res[r]->to, ParallelMode::kTP);
    EXPECT_EQ(res[r]->layers, s.l);
    // Seed eq. 9: (P-1)/P of the rank's expert weights leave the device.
    EXPECT_EQ(res[r]->bytes_sent, s.l * c.buf[r]->slot_bytes() * (s.p - 1) / s.p);
    const UnifiedExpertBuffer& b = *c.buf[r];
    ASSERT_EQ(b.mode(), ParallelMode::kTP);
    for (int i = 0; i < s.l; ++i) {
      for (int e = 0; e < s.e; ++e) {
        const SwigluWeights full = FullExpert(s, i, e);
        std::vector<float> gu, dn;
        for (int row = 0; row < s.h; ++row) {
          const float* g = &full.gate_up[static_cast<size_t>(row) * 2 * s.i];
          gu.insert(gu.end(), g + r * sh, g + (r + 1) * sh);              // gate shard
          gu.insert(gu.end(), g + s.i + r * sh, g + s.i + (r + 1) * sh);  // up shard
        }
        dn.assign(full.down.begin() + static_cast<size_t>(r) * sh * s.h,
                  full.down.begin() + static_cast<size_t>(r + 1) * sh * s.h);
        const TpExpertView v = b.TpExpert(i, e);
        EXPECT_EQ(v.inter_shard, sh);
        EXPECT_EQ(Floats(v.gate_up, gu.size()), gu) << "rank " << r << " layer " << i << " e " << e;
        EXPECT_EQ(Floats(v.down, dn.size()), dn) << "rank " << r << " layer " << i << " e " << e;
      }
    }
  }
}

TEST_P(ExpertBufferTest, RoundTripsAreBitIdentical) {
  Cluster c(MakeShape());
  const std::vector<uint64_t> ep = c.Checksums(ParallelMode::kEP);
  c.ReshardOk(ParallelMode::kTP);
  const std::vector<uint64_t> tp = c.Checksums(ParallelMode::kTP);
  c.ReshardOk(ParallelMode::kEP);
  EXPECT_EQ(c.Checksums(ParallelMode::kEP), ep);
  ExpectEpHoldsFullExperts(c);
  c.ReshardOk(ParallelMode::kTP);
  EXPECT_EQ(c.Checksums(ParallelMode::kTP), tp);
  c.ReshardOk(ParallelMode::kEP);
  EXPECT_EQ(c.Checksums(ParallelMode::kEP), ep);
  // Already in EP: a no-op that moves nothing.
  for (const auto& res : c.Reshard(ParallelMode::kEP)) {
    ASSERT_THAT(res, IsOk());
    EXPECT_EQ(res->layers, 0);
    EXPECT_EQ(res->bytes_sent, 0);
  }
}

TEST_P(ExpertBufferTest, AnInjectedFaultAtEveryLayerAndPhaseRollsBack) {
  const Shape s = MakeShape();
  Cluster c(s);
  for (ParallelMode from : {ParallelMode::kEP, ParallelMode::kTP}) {
    if (from == ParallelMode::kTP) c.ReshardOk(ParallelMode::kTP);
    const ParallelMode to = from == ParallelMode::kEP ? ParallelMode::kTP : ParallelMode::kEP;
    const std::vector<uint64_t> before = c.Checksums(from);
    for (int layer = 0; layer < s.l; ++layer) {
      for (ReshardPhase phase :
           {ReshardPhase::kPermute, ReshardPhase::kExchange, ReshardPhase::kPlace}) {
        const FaultPlan fault{
            .rank = (layer + static_cast<int>(phase)) % s.p, .layer = layer, .phase = phase};
        const std::string at = "failed at MoE layer " + std::to_string(layer) + ", phase " +
                               std::string(ReshardPhaseName(phase)) + " (rank " +
                               std::to_string(fault.rank) + ")";
        const std::vector<Result<ReshardStats>> res = c.Reshard(to, &fault);
        for (int r = 0; r < s.p; ++r) {
          EXPECT_THAT(res[r], StatusIs(StatusCode::kUnavailable, HasSubstr(at))) << "rank " << r;
          EXPECT_EQ(c.buf[r]->mode(), from);
          EXPECT_EQ(c.buf[r]->last_stats().layers, 0);
        }
        EXPECT_EQ(c.Checksums(from), before) << at;
      }
    }
  }
  // The rolled-back buffers still switch and hold the right numbers.
  c.ReshardOk(ParallelMode::kEP);
  ExpectEpHoldsFullExperts(c);
}

TEST_P(ExpertBufferTest, HundredRoundTripsKeepAddressesAndCapacity) {
  Cluster c(MakeShape());
  const std::vector<uint64_t> ep = c.Checksums(ParallelMode::kEP);
  std::vector<int64_t> bytes, scratch;
  std::vector<const float*> data, first_expert;
  for (const auto& b : c.buf) {
    bytes.push_back(b->bytes());
    scratch.push_back(b->scratch_bytes());
    data.push_back(b->data());
    first_expert.push_back(b->EpExpert(0, 0).gate_up);
  }
  for (int n = 0; n < 100; ++n) {
    c.ReshardOk(ParallelMode::kTP);
    c.ReshardOk(ParallelMode::kEP);
  }
  for (int r = 0; r < c.s.p; ++r) {
    EXPECT_EQ(c.buf[r]->bytes(), bytes[r]);
    EXPECT_EQ(c.buf[r]->scratch_bytes(), scratch[r]);
    EXPECT_EQ(c.buf[r]->data(), data[r]);
    EXPECT_EQ(c.buf[r]->EpExpert(0, 0).gate_up, first_expert[r]);
  }
  EXPECT_EQ(c.Checksums(ParallelMode::kEP), ep);
}

TEST_P(ExpertBufferTest, RanksThatDisagreeOnTheTargetMoveNothing) {
  Cluster c(MakeShape());
  const std::vector<uint64_t> ep = c.Checksums(ParallelMode::kEP);
  std::vector<Status> st(c.s.p);
  OnRanks(c.s.p, [&](int r) {
    st[r] = c.buf[r]->Reshard(r == 0 ? ParallelMode::kTP : ParallelMode::kEP, &c.comm).status();
  });
  for (int r = 0; r < c.s.p; ++r) {
    EXPECT_THAT(st[r], StatusIs(StatusCode::kFailedPrecondition, HasSubstr("disagree")));
    EXPECT_EQ(c.buf[r]->mode(), ParallelMode::kEP);
  }
  EXPECT_EQ(c.Checksums(ParallelMode::kEP), ep);
}

INSTANTIATE_TEST_SUITE_P(Devices, ExpertBufferTest, ::testing::Values(2, 4));

// E = 8, I = 8, H = 4, L = 3, P = 2: a slot holds E/P = 4 experts x 3*I*H =
// 96 floats = 384 floats = 1536 bytes; the weights fill 3 slots (4608 bytes)
// and the buffer is 4 slots (6144 bytes): exactly one slot (1536 bytes, 1/4)
// more. The transport scratch is one layer each way (2 x 1536 bytes) plus
// one vote flag per rank (8 bytes), counted apart.
TEST(ExpertBufferMemoryTest, ExtraMemoryIsExactlyOneSlot) {
  const Shape s{.p = 2, .e = 8, .i = 8, .h = 4, .l = 3};
  Cluster c(s);
  const UnifiedExpertBuffer& b = *c.buf[0];
  EXPECT_EQ(b.slot_floats(), 384);
  EXPECT_EQ(b.slot_bytes(), 1536);
  EXPECT_EQ(b.bytes(), 6144);
  const int64_t weights = int64_t{s.l} * b.local_slots() * 3 * s.i * s.h * 4;
  EXPECT_EQ(weights, 4608);
  EXPECT_EQ(b.bytes() - weights, 1536);
  EXPECT_EQ(b.scratch_bytes(), 2 * 1536 + 8);
}

TEST(ExpertBufferShapeTest, BadShapesAreRefusedNamingTheCondition) {
  EXPECT_THAT(UnifiedExpertBuffer::CheckShape(6, 8, 4, 4),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("must divide experts"), HasSubstr("E=6"))));
  EXPECT_THAT(UnifiedExpertBuffer::CheckShape(8, 10, 4, 4),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("must divide expert_inter"), HasSubstr("I=10"))));
  EXPECT_THAT(UnifiedExpertBuffer::CheckShape(8, 8, 0, 4),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("hidden")));
  EXPECT_THAT(UnifiedExpertBuffer::CheckShape(8, 8, 4, 4), IsOk());
  EXPECT_THAT(UnifiedExpertBuffer::CheckMap(ExpertMap::RoundRobin(1, 0, 8, 4), 8, 4), IsOk());
  EXPECT_THAT(UnifiedExpertBuffer::CheckMap(ExpertMap::RoundRobin(1, 0, 8, 3), 8, 4),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("device 2 holds 2 expert slots")));

  const Shape s{.p = 2, .e = 8, .i = 8, .h = 4, .l = 2};
  const ExpertMap rr = RoundRobin(s);
  // A map over P = 3 (unequal slot counts): refused, the vectors left as they were.
  std::vector<LayerWeights> layers = RankLayers(s, rr, 0);
  EXPECT_THAT(
      UnifiedExpertBuffer::Create(0, ExpertMap::RoundRobin(s.l, 0, s.e, 3), s.i, s.h, layers),
      StatusIs(StatusCode::kInvalidArgument, HasSubstr("same number")));
  EXPECT_TRUE(layers[0].experts[0].present());
  // A map with another number of MoE layers.
  EXPECT_THAT(
      UnifiedExpertBuffer::Create(0, ExpertMap::RoundRobin(3, 0, s.e, s.p), s.i, s.h, layers),
      StatusIs(StatusCode::kInvalidArgument, HasSubstr("2 MoE layers given")));
  // A local expert missing in layer 1.
  layers[1].experts[2] = SwigluWeights{};
  EXPECT_THAT(UnifiedExpertBuffer::Create(0, rr, s.i, s.h, layers),
              StatusIs(StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("MoE layer 1"), HasSubstr("local expert 2"))));
  EXPECT_EQ(layers[0].experts[0].gate_up.size(), static_cast<size_t>(s.h * 2 * s.i));
}

// EpMoeLayer reading the buffer's EP alias computes exactly what it computes
// from the expert vectors, also after a round trip through TP.
TEST(ExpertBufferMoeTest, EpMoeLayerOnTheEpAliasIsBitIdenticalToTheVectors) {
  ModelConfig cfg;
  cfg.hidden = 32;
  cfg.layers = 2;
  cfg.heads = 2;
  cfg.kv_heads = 2;
  cfg.head_dim = 16;
  cfg.experts = 8;
  cfg.top_k = 2;
  cfg.expert_inter = 16;
  cfg.shared_inter = 24;
  const int p = 2, tokens = 20;  // > kSmallGemmRows per expert on some: both GEMM paths
  const ExpertMap map = ExpertMap::RoundRobin(cfg.layers, 0, cfg.experts, p);
  InProcCommunicator comm(p);
  std::vector<std::vector<float>> ref(p), got(p), again(p);
  OnRanks(p, [&](int r) {
    const ModelWeights vec = BuildWeights(cfg, 5, map.ExpertsOnDevice(r));
    ModelWeights moved = vec;
    auto buf = UnifiedExpertBuffer::Create(r, map, cfg.expert_inter, cfg.hidden, moved.layers);
    ASSERT_THAT(buf, IsOk());
    UnifiedExpertBuffer& b = **buf;
    std::vector<float> x(static_cast<size_t>(tokens) * cfg.hidden);
    FillTensor(40 + r, "x", 1.0f, 0.0f, x.data(), x.size());
    EpMoeLayer moe(cfg, r, &map, &comm);
    auto run = [&](int layer, const SwigluView* views) {
      std::vector<float> out(x.size());
      if (views == nullptr) {
        moe.Forward(layer, vec.layers[layer], x.data(), tokens, out.data(), nullptr, nullptr);
      } else {
        moe.Forward(layer, moved.layers[layer], views, x.data(), tokens, out.data(), nullptr,
                    nullptr);
      }
      return out;
    };
    auto views = [&](int layer) {
      std::vector<SwigluView> v(b.local_slots());
      for (int k = 0; k < b.local_slots(); ++k) {
        const EpExpertView e = b.EpExpert(layer, k);
        v[k] = {.gate_up = e.gate_up, .down = e.down, .inter = cfg.expert_inter};
      }
      return v;
    };
    for (int layer = 0; layer < cfg.layers; ++layer) {
      const std::vector<float> a = run(layer, nullptr);
      ref[r].insert(ref[r].end(), a.begin(), a.end());
      const std::vector<float> g = run(layer, views(layer).data());
      got[r].insert(got[r].end(), g.begin(), g.end());
    }
    ASSERT_THAT(b.Reshard(ParallelMode::kTP, &comm), IsOk());
    ASSERT_THAT(b.Reshard(ParallelMode::kEP, &comm), IsOk());
    for (int layer = 0; layer < cfg.layers; ++layer) {
      const std::vector<float> g = run(layer, views(layer).data());
      again[r].insert(again[r].end(), g.begin(), g.end());
    }
  });
  for (int r = 0; r < p; ++r) {
    ASSERT_EQ(got[r].size(), ref[r].size());
    EXPECT_EQ(std::memcmp(got[r].data(), ref[r].data(), ref[r].size() * sizeof(float)), 0);
    EXPECT_EQ(std::memcmp(again[r].data(), ref[r].data(), ref[r].size() * sizeof(float)), 0);
  }
}

// A permuted placement (R = 0, each layer its own row, not round-robin): the
// EP alias holds each layer's experts in the map's order, the TP alias is
// still every expert's shard in id order, and a round trip is bit-identical.
TEST(ExpertBufferMapTest, PermutedMapRoundTripsBitIdentical) {
  const Shape s{.p = 4, .e = 8, .i = 8, .h = 4, .l = 3};
  const std::vector<std::vector<int>> rows = {
      {7, 6, 5, 4, 3, 2, 1, 0}, {0, 4, 1, 5, 2, 6, 3, 7}, {2, 0, 7, 1, 6, 3, 5, 4}};
  Result<ExpertMap> map = ExpertMap::DeviceMajor(s.l, 0, s.e, s.p, rows);
  ASSERT_THAT(map, IsOk());
  Cluster c(s, *map);
  ExpectEpHoldsFullExperts(c);
  EXPECT_EQ(c.buf[3]->local_ids(2), (std::vector<int>{5, 4}));
  const std::vector<uint64_t> ep = c.Checksums(ParallelMode::kEP);
  c.ReshardOk(ParallelMode::kTP);
  const int sh = s.i / s.p;
  for (int r = 0; r < s.p; ++r) {
    for (int i = 0; i < s.l; ++i) {
      for (int e = 0; e < s.e; ++e) {
        const SwigluWeights full = FullExpert(s, i, e);
        const TpExpertView v = c.buf[r]->TpExpert(i, e);
        std::vector<float> dn(full.down.begin() + static_cast<size_t>(r) * sh * s.h,
                              full.down.begin() + static_cast<size_t>(r + 1) * sh * s.h);
        EXPECT_EQ(Floats(v.down, dn.size()), dn) << r << " " << i << " " << e;
      }
    }
  }
  c.ReshardOk(ParallelMode::kEP);
  EXPECT_EQ(c.Checksums(ParallelMode::kEP), ep);
  ExpectEpHoldsFullExperts(c);
}

// Redundant experts (N = 10 > E = 8 over P = 2: 5 slots each): the EP alias
// holds the replicas, and the TP reshard is refused on every rank without a
// collective, nothing moved.
TEST(ExpertBufferMapTest, RedundantExpertsServeEpOnly) {
  const Shape s{.p = 2, .e = 8, .i = 8, .h = 4, .l = 2};
  const std::vector<int> row = {0, 1, 2, 3, 0, 4, 5, 6, 7, 0};
  Result<ExpertMap> map = ExpertMap::DeviceMajor(s.l, 0, s.e, s.p, {row, row});
  ASSERT_THAT(map, IsOk());
  Cluster c(s, *map);
  ExpectEpHoldsFullExperts(c);
  EXPECT_EQ(c.buf[0]->local_slots(), 5);
  EXPECT_EQ(c.buf[0]->slot_bytes(), 5 * 3 * s.i * s.h * 4);
  const std::vector<uint64_t> ep = c.Checksums(ParallelMode::kEP);
  for (const auto& res : c.Reshard(ParallelMode::kTP)) {
    EXPECT_THAT(res, StatusIs(StatusCode::kFailedPrecondition, HasSubstr("redundant experts")));
  }
  for (const auto& b : c.buf) EXPECT_EQ(b->mode(), ParallelMode::kEP);
  EXPECT_EQ(c.Checksums(ParallelMode::kEP), ep);
}

// Staging and commit: the staged experts replace the live ones in place
// (same addresses), the rest of the layer is untouched, and the TP reshard
// afterwards follows the committed placement.
TEST(ExpertBufferMapTest, CommitStagedReplacesLiveSlotsInPlace) {
  const Shape s{.p = 2, .e = 8, .i = 8, .h = 4, .l = 2};
  Cluster c(s);  // round-robin: device 0 holds {0, 2, 4, 6}, device 1 {1, 3, 5, 7}
  ExpertMap next = c.map;
  // Layer 1: swap experts 2 (device 0, local 1) and 3 (device 1, local 1).
  ASSERT_THAT(next.SetLayer(1, {0, 3, 4, 6, 1, 2, 5, 7}), IsOk());
  const float* live0 = c.buf[0]->EpExpert(1, 1).gate_up;
  const int64_t n = c.buf[0]->expert_floats();
  for (int r = 0; r < s.p; ++r) {
    const float* peer = c.buf[1 - r]->EpExpert(1, 1).gate_up;  // the other device's expert
    std::memcpy(c.buf[r]->StagingExpert(1), peer, n * sizeof(float));
  }
  const std::vector<uint64_t> untouched = c.Checksums(ParallelMode::kEP);  // the spare is not in it
  for (int r = 0; r < s.p; ++r) c.buf[r]->CommitStaged(1, std::vector<int>{1}, next);
  EXPECT_EQ(c.buf[0]->EpExpert(1, 1).gate_up, live0);
  c.map = next;
  ExpectEpHoldsFullExperts(c);
  EXPECT_NE(c.Checksums(ParallelMode::kEP), untouched);
  const uint64_t reshards = c.buf[0]->reshards();
  c.ReshardOk(ParallelMode::kTP);
  c.ReshardOk(ParallelMode::kEP);
  EXPECT_EQ(c.buf[0]->reshards(), reshards + 2);
  ExpectEpHoldsFullExperts(c);
}

}  // namespace
}  // namespace sy::engine
