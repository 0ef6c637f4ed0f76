#include "engine/parallelism/state_reshard.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "base/status_matchers.h"
#include "engine/distributed/inproc_communicator.h"

namespace sy::engine {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// Runs fn(rank) on P threads, as the model runner does.
void OnRanks(int p, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < p; ++r) threads.emplace_back(fn, r);
  for (auto& t : threads) t.join();
}

struct Shape {
  const char* name;
  KvPoolOptions kv;
  StatePoolOptions state;
};

// MHA rows of 4 heads x 3 with a KDA-like state (conv: 3 (K - 1) = 6 groups
// of 4 channels); MLA latent rows with a GLA-like state (no conv); MHA with
// no linear layers at all (an empty state pool).
const Shape kShapes[] = {
    {"mha_conv",
     {.num_pages = 6, .page_size = 4, .layers = 2, .kv_heads = 4, .head_dim = 3},
     {.slots = 5, .layers = 2, .state_floats = 8, .conv_floats = 24, .conv_groups = 6}},
    {"latent_noconv",
     {.num_pages = 5, .page_size = 3, .layers = 3, .latent_dim = 8},
     {.slots = 4, .layers = 3, .state_floats = 16}},
    {"mha_empty_state",
     {.num_pages = 7, .page_size = 2, .layers = 1, .kv_heads = 4, .head_dim = 2},
     {}},
};

bool SameBits(float a, float b) { return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b); }

// One token's row (K, V or latent) under the pool's current reading.
const float* Row(const KvPool& kv, int page, int layer, int entry, int slot) {
  if (kv.entries() == 1) return kv.Latent(page, layer, slot);
  return entry == 0 ? kv.K(page, layer, slot) : kv.V(page, layer, slot);
}

float* MutableRow(KvPool& kv, int page, int layer, int entry, int slot) {
  if (kv.entries() == 1) return kv.Latent(page, layer, slot);
  return entry == 0 ? kv.K(page, layer, slot) : kv.V(page, layer, slot);
}

// The used units of a rank under the pools' current reading, in the
// checksum order (EP: own ids; TP: every home d's ids as units d * N + p).
struct Snapshot {
  std::vector<std::vector<std::vector<float>>> kv, state;  // [rank][unit]
};

// P devices' pools with random contents on random used pages and slots.
class Cluster {
 public:
  Cluster(int p, const Shape& shape, uint32_t seed) : p_(p), shape_(shape), comm_(p) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> value(-1.0f, 1.0f);
    std::bernoulli_distribution keep(0.6);
    for (int r = 0; r < p; ++r) {
      kv_.push_back(std::make_unique<KvPool>(shape.kv));
      state_.push_back(std::make_unique<StatePool>(shape.state));
      KvPool& kv = *kv_.back();
      StatePool& st = *state_.back();
      std::vector<int32_t> pages;
      EXPECT_TRUE(kv.Allocate(kv.num_pages(), &pages).ok());
      std::vector<int32_t> drop;
      for (int32_t page : pages) {
        // P = 4: rank 2 homes no page at all.
        if ((p == 4 && r == 2) || (!keep(rng) && page != 0)) drop.push_back(page);
      }
      // Every page gets data (free ones too: garbage that must not matter),
      // except the tail of page 0, a partly written page.
      for (int page = 0; page < kv.num_pages(); ++page) {
        const int filled = page == 0 ? kv.page_size() / 2 : kv.page_size();
        for (int l = 0; l < kv.layers(); ++l)
          for (int e = 0; e < kv.entries(); ++e)
            for (int s = 0; s < filled; ++s) {
              float* row = MutableRow(kv, page, l, e, s);
              for (int64_t c = 0; c < kv.row_floats(); ++c) row[c] = value(rng);
            }
      }
      std::shuffle(drop.begin(), drop.end(), rng);  // a scrambled free list
      kv.Free(drop);
      std::vector<int> slots;
      for (int i = 0; i < st.slots(); ++i) slots.push_back(st.Allocate().value());
      for (int s : slots) {
        for (int l = 0; l < shape.state.layers; ++l) {
          float* x = st.State(s, l);
          for (int64_t i = 0; i < st.state_floats(); ++i) x[i] = value(rng);
          if (st.conv_floats() > 0) {
            float* c = st.Conv(s, l);
            for (int64_t i = 0; i < st.conv_floats(); ++i) c[i] = value(rng);
          }
        }
        // The last rank (P > 1) homes no slot; others keep a random subset.
        if ((p > 1 && r == p - 1) || (!keep(rng) && s != 0)) st.Free(s);
      }
    }
  }

  int p() const { return p_; }
  KvPool& kv(int r) { return *kv_[r]; }
  StatePool& state(int r) { return *state_[r]; }
  InProcCommunicator& comm() { return comm_; }

  int64_t UsedBytes(int r) const {
    return static_cast<int64_t>(kv_[r]->used_pages()) * kv_[r]->page_bytes() +
           static_cast<int64_t>(state_[r]->used_slots()) * state_[r]->slot_bytes();
  }

  // One result per rank. `targets` (if given) overrides `target` per rank.
  std::vector<Result<StateReshardStats>> Reshard(
      ParallelMode target, const FaultPlan* fault = nullptr,
      std::vector<SpanRecorder>* recs = nullptr,
      const std::vector<ParallelMode>* targets = nullptr) {
    std::vector<std::optional<Result<StateReshardStats>>> out(p_);
    OnRanks(p_, [&](int r) {
      out[r].emplace(ReshardState(r, targets ? (*targets)[r] : target, kv_[r].get(),
                                  state_[r].get(), &comm_, fault, recs ? &(*recs)[r] : nullptr));
    });
    std::vector<Result<StateReshardStats>> results;
    for (auto& o : out) results.push_back(std::move(*o));
    return results;
  }

  // Whole storage units via PageData / SlotData of the current reading.
  Snapshot Take() const {
    Snapshot snap;
    snap.kv.resize(p_);
    snap.state.resize(p_);
    for (int r = 0; r < p_; ++r) {
      const KvPool& kv = *kv_[r];
      const StatePool& st = *state_[r];
      const bool sharded = kv.shards() > 1;
      for (int d = 0; d < p_; ++d) {
        if (!sharded && d != r) continue;
        const int home = sharded ? d : r;
        for (int32_t page : kv_[home]->UsedPages()) {
          const float* x = kv.PageData(sharded ? d * kv.num_pages() + page : page);
          snap.kv[r].emplace_back(x, x + kv.page_floats());
        }
        for (int slot : state_[home]->UsedSlots()) {
          const float* x = st.SlotData(sharded ? d * st.slots() + slot : slot);
          snap.state[r].emplace_back(x, x + st.slot_floats());
        }
      }
    }
    return snap;
  }

  // Every float of `want` (taken by Take) equals the pools now, bit for bit.
  void ExpectSame(const Snapshot& want) const {
    const Snapshot now = Take();
    for (int r = 0; r < p_; ++r) {
      ASSERT_EQ(now.kv[r].size(), want.kv[r].size()) << "rank " << r;
      ASSERT_EQ(now.state[r].size(), want.state[r].size()) << "rank " << r;
      for (size_t u = 0; u < want.kv[r].size(); ++u) {
        ASSERT_EQ(now.kv[r][u].size(), want.kv[r][u].size());
        EXPECT_EQ(0, std::memcmp(now.kv[r][u].data(), want.kv[r][u].data(),
                                 want.kv[r][u].size() * sizeof(float)))
            << "rank " << r << " KV unit " << u;
      }
      for (size_t u = 0; u < want.state[r].size(); ++u) {
        ASSERT_EQ(now.state[r][u].size(), want.state[r][u].size());
        EXPECT_EQ(0, std::memcmp(now.state[r][u].data(), want.state[r][u].data(),
                                 want.state[r][u].size() * sizeof(float)))
            << "rank " << r << " state unit " << u;
      }
    }
  }

  // In the sharded reading, rank r's storage page d * N + p is block r of
  // home d's page p in `ep` (a Take in the EP reading), checked through the
  // row / state accessors with the block split written out afresh: KV rows
  // columns [r R/P, (r+1) R/P); state heads [r S/P, ...); each conv group's
  // channels [r g/P, ...).
  void ExpectShardsOf(const Snapshot& ep) const {
    const int p = p_;
    for (int r = 0; r < p; ++r) {
      const KvPool& kv = *kv_[r];
      const StatePool& st = *state_[r];
      ASSERT_EQ(kv.shards(), p);
      ASSERT_EQ(st.shards(), p);
      const int64_t row = kv.row_floats() * p, w = row / p;
      int64_t bad = 0, checked = 0;
      for (int d = 0; d < p; ++d) {
        const std::vector<int32_t> used = kv_[d]->UsedPages();
        for (size_t k = 0; k < used.size(); ++k) {
          const std::vector<float>& full = ep.kv[d][k];
          for (int l = 0; l < kv.layers(); ++l)
            for (int e = 0; e < kv.entries(); ++e)
              for (int s = 0; s < kv.page_size(); ++s) {
                const float* got = Row(kv, d * kv.num_pages() + used[k], l, e, s);
                const int64_t at = ((int64_t{l} * kv.entries() + e) * kv.page_size() + s) * row;
                for (int64_t c = 0; c < w; ++c, ++checked)
                  bad += !SameBits(got[c], full[at + r * w + c]);
              }
        }
        const std::vector<int> slots = state_[d]->UsedSlots();
        const int64_t sf = shape_.state.state_floats, cf = shape_.state.conv_floats;
        const int groups = shape_.state.conv_groups, gw = groups > 0 ? cf / groups : 0;
        for (size_t k = 0; k < slots.size(); ++k) {
          const std::vector<float>& full = ep.state[d][k];
          for (int l = 0; l < shape_.state.layers; ++l) {
            const int64_t at = l * (sf + cf);
            const float* x = st.State(d * st.slots() + slots[k], l);
            for (int64_t i = 0; i < sf / p; ++i, ++checked)
              bad += !SameBits(x[i], full[at + r * (sf / p) + i]);
            if (cf == 0) continue;
            const float* c = st.Conv(d * st.slots() + slots[k], l);
            for (int g = 0; g < groups; ++g)
              for (int64_t j = 0; j < gw / p; ++j, ++checked)
                bad += !SameBits(c[g * (gw / p) + j], full[at + sf + g * gw + r * (gw / p) + j]);
          }
        }
      }
      EXPECT_EQ(bad, 0) << "rank " << r << ": " << bad << " of " << checked << " floats differ";
      EXPECT_GT(checked, 0) << "rank " << r;
    }
  }

 private:
  int p_;
  Shape shape_;
  InProcCommunicator comm_;
  std::vector<std::unique_ptr<KvPool>> kv_;
  std::vector<std::unique_ptr<StatePool>> state_;
};

class StateReshardTest : public ::testing::TestWithParam<std::tuple<int, int>> {
 protected:
  int P() const { return std::get<0>(GetParam()); }
  const Shape& shape() const { return kShapes[std::get<1>(GetParam())]; }
};

TEST_P(StateReshardTest, EpToTpPlacesBlockROfEveryHomesPages) {
  Cluster c(P(), shape(), 11);
  const Snapshot ep = c.Take();
  auto res = c.Reshard(ParallelMode::kTP);
  for (int r = 0; r < P(); ++r) {
    ASSERT_THAT(res[r], IsOk()) << "rank " << r;
    EXPECT_EQ(res[r]->to, ParallelMode::kTP);
    EXPECT_EQ(c.kv(r).shards(), P());
    EXPECT_EQ(c.state(r).shards(), P());
    // P = 1: the sharded reading is the EP reading; nothing moves.
    EXPECT_EQ(res[r]->kv_pages, P() > 1 ? c.kv(r).used_pages() : 0);
    EXPECT_EQ(res[r]->state_slots, P() > 1 ? c.state(r).used_slots() : 0);
  }
  c.ExpectShardsOf(ep);
}

TEST_P(StateReshardTest, RoundTripIsBitIdentical) {
  Cluster c(P(), shape(), 23);
  const Snapshot ep = c.Take();
  auto there = c.Reshard(ParallelMode::kTP);
  auto back = c.Reshard(ParallelMode::kEP);
  for (int r = 0; r < P(); ++r) {
    ASSERT_THAT(there[r], IsOk());
    ASSERT_THAT(back[r], IsOk());
    EXPECT_EQ(c.kv(r).shards(), 1);
    EXPECT_EQ(c.state(r).shards(), 1);
    if (P() == 1) {
      EXPECT_EQ(there[r]->bytes_sent + back[r]->bytes_sent, 0);
      continue;
    }
    EXPECT_EQ(there[r]->from, ParallelMode::kEP);
    EXPECT_EQ(back[r]->from, ParallelMode::kTP);
    EXPECT_EQ(back[r]->to, ParallelMode::kEP);
    EXPECT_EQ(back[r]->checksum_target, there[r]->checksum_source);
    EXPECT_EQ(back[r]->checksum_source, there[r]->checksum_target);
    EXPECT_NE(there[r]->checksum_source, there[r]->checksum_target);
    EXPECT_EQ(back[r]->kv_pages, c.kv(r).used_pages());
    EXPECT_EQ(back[r]->state_slots, c.state(r).used_slots());
    // EP -> TP: (P-1)/P of this home's used bytes leave; TP -> EP: this
    // rank's block of every other home's used units.
    EXPECT_EQ(there[r]->bytes_sent, c.UsedBytes(r) / P() * (P() - 1));
    int64_t others = 0;
    for (int d = 0; d < P(); ++d) others += d == r ? 0 : c.UsedBytes(d) / P();
    EXPECT_EQ(back[r]->bytes_sent, others);
  }
  c.ExpectSame(ep);
}

TEST_P(StateReshardTest, FailureInAnyPhaseRollsBackAndARetryWorks) {
  if (P() == 1) GTEST_SKIP() << "P = 1 never moves anything";
  Cluster c(P(), shape(), 37);
  const Snapshot ep = c.Take();
  const std::pair<ReshardPhase, const char*> phases[] = {{ReshardPhase::kPermute, "pack"},
                                                         {ReshardPhase::kExchange, "exchange"},
                                                         {ReshardPhase::kPlace, "place"}};
  for (const auto& [phase, name] : phases) {
    for (int bad : {0, P() - 1}) {
      SCOPED_TRACE(std::string(name) + " on rank " + std::to_string(bad));
      const FaultPlan fault{.rank = bad, .layer = 3, .phase = phase, .part = SwitchPart::kState};
      const std::string where =
          std::string(" failed in ") + name + " (rank " + std::to_string(bad) + ")";
      // EP -> TP fails, pools as before; then it works.
      auto res = c.Reshard(ParallelMode::kTP, &fault);
      for (int r = 0; r < P(); ++r) {
        EXPECT_THAT(res[r], StatusIs(StatusCode::kUnavailable,
                                     AllOf(HasSubstr("state reshard EP->TP" + where),
                                           HasSubstr("stay in the EP reading"))));
        EXPECT_EQ(c.kv(r).shards(), 1);
        EXPECT_EQ(c.state(r).shards(), 1);
      }
      c.ExpectSame(ep);
      res = c.Reshard(ParallelMode::kTP);
      for (int r = 0; r < P(); ++r) ASSERT_THAT(res[r], IsOk());
      c.ExpectShardsOf(ep);
      // TP -> EP fails, the sharded reading as before; then it works.
      const Snapshot tp = c.Take();
      res = c.Reshard(ParallelMode::kEP, &fault);
      for (int r = 0; r < P(); ++r) {
        EXPECT_THAT(res[r],
                    StatusIs(StatusCode::kUnavailable, HasSubstr("state reshard TP->EP" + where)));
        EXPECT_EQ(c.kv(r).shards(), P());
        EXPECT_EQ(c.state(r).shards(), P());
      }
      c.ExpectSame(tp);
      res = c.Reshard(ParallelMode::kEP);
      for (int r = 0; r < P(); ++r) ASSERT_THAT(res[r], IsOk());
      c.ExpectSame(ep);
    }
  }
}

TEST_P(StateReshardTest, AWeightsFaultPlanIsIgnored) {
  Cluster c(P(), shape(), 41);
  const Snapshot ep = c.Take();
  const FaultPlan fault{.rank = 0, .phase = ReshardPhase::kPlace, .part = SwitchPart::kWeights};
  auto res = c.Reshard(ParallelMode::kTP, &fault);
  for (int r = 0; r < P(); ++r) ASSERT_THAT(res[r], IsOk());
  c.ExpectShardsOf(ep);
}

TEST_P(StateReshardTest, AlreadyInTargetMovesNothing) {
  Cluster c(P(), shape(), 53);
  const Snapshot ep = c.Take();
  auto res = c.Reshard(ParallelMode::kEP);
  for (int r = 0; r < P(); ++r) {
    ASSERT_THAT(res[r], IsOk());
    EXPECT_EQ(res[r]->from, ParallelMode::kEP);
    EXPECT_EQ(res[r]->kv_pages, 0);
    EXPECT_EQ(res[r]->state_slots, 0);
    EXPECT_EQ(res[r]->bytes_sent, 0);
    EXPECT_EQ(c.kv(r).shards(), 1);
  }
  c.ExpectSame(ep);
  res = c.Reshard(ParallelMode::kTP);
  for (int r = 0; r < P(); ++r) ASSERT_THAT(res[r], IsOk());
  const Snapshot tp = c.Take();
  res = c.Reshard(ParallelMode::kTP);
  for (int r = 0; r < P(); ++r) {
    ASSERT_THAT(res[r], IsOk());
    EXPECT_EQ(res[r]->from, ParallelMode::kTP);
    EXPECT_EQ(res[r]->kv_pages, 0);
    EXPECT_EQ(res[r]->bytes_sent, 0);
    EXPECT_EQ(c.kv(r).shards(), P());
  }
  c.ExpectSame(tp);
}

std::string ParamName(const ::testing::TestParamInfo<std::tuple<int, int>>& info) {
  return "P" + std::to_string(std::get<0>(info.param)) + "_" +
         kShapes[std::get<1>(info.param)].name;
}

INSTANTIATE_TEST_SUITE_P(Shapes, StateReshardTest,
                         ::testing::Combine(::testing::Values(1, 2, 4), ::testing::Values(0, 1, 2)),
                         ParamName);

// Pools that cannot be read P ways: refused on every rank before anything
// moves.
TEST(StateReshardRefusalTest, UnshardablePoolIsRefusedOnEveryRank) {
  const Shape bad[] = {
      {"kv_row_3",
       {.num_pages = 4, .page_size = 2, .layers = 1, .kv_heads = 3, .head_dim = 1},
       {.slots = 2, .layers = 1, .state_floats = 4}},
      {"state_5",
       {.num_pages = 4, .page_size = 2, .layers = 1, .latent_dim = 4},
       {.slots = 2, .layers = 1, .state_floats = 5}},
      {"conv_group_3",
       {.num_pages = 4, .page_size = 2, .layers = 1, .latent_dim = 4},
       {.slots = 2, .layers = 1, .state_floats = 4, .conv_floats = 6, .conv_groups = 2}},
  };
  for (const Shape& shape : bad) {
    for (int p : {2, 4}) {
      SCOPED_TRACE(std::string(shape.name) + " P=" + std::to_string(p));
      Cluster c(p, shape, 7);
      const Snapshot ep = c.Take();
      auto res = c.Reshard(ParallelMode::kTP);
      for (int r = 0; r < p; ++r) {
        EXPECT_THAT(res[r],
                    StatusIs(StatusCode::kFailedPrecondition,
                             AllOf(HasSubstr("state reshard EP->TP"), HasSubstr("nothing moved"))));
        EXPECT_EQ(c.kv(r).shards(), 1);
        EXPECT_EQ(c.state(r).shards(), 1);
      }
      c.ExpectSame(ep);
    }
  }
}

TEST(StateReshardRefusalTest, RanksDisagreeingOnTheTargetAreRefused) {
  Cluster c(2, kShapes[0], 5);
  const Snapshot ep = c.Take();
  const std::vector<ParallelMode> targets = {ParallelMode::kTP, ParallelMode::kEP};
  auto res = c.Reshard(ParallelMode::kTP, nullptr, nullptr, &targets);
  for (int r = 0; r < 2; ++r) {
    EXPECT_THAT(res[r], StatusIs(StatusCode::kFailedPrecondition, HasSubstr("disagree")));
    EXPECT_EQ(c.kv(r).shards(), 1);
  }
  c.ExpectSame(ep);
}

TEST(StateReshardSpanTest, RecordsPackPlaceAndCommSpans) {
  Cluster c(2, kShapes[0], 3);
  std::vector<SpanRecorder> recs;
  for (int r = 0; r < 2; ++r) {
    recs.emplace_back(r, SpanRecorder::Clock::now());
    recs.back().Reset(TraceLevel::kFull);
  }
  auto res = c.Reshard(ParallelMode::kTP, nullptr, &recs);
  for (int r = 0; r < 2; ++r) {
    ASSERT_THAT(res[r], IsOk());
    std::vector<std::string> names;
    for (const auto& s : recs[r].spans()) names.push_back(s.name);
    for (const char* want : {"state_meta", "state_pack", "state_a2a", "state_place"}) {
      EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
    }
  }
}

}  // namespace
}  // namespace sy::engine
