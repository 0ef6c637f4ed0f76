#include "engine/distributed/inproc_communicator.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "engine/trace/span_recorder.h"

namespace sy::engine {
namespace {

// Runs fn(rank) on `p` threads at once (one per rank), as the model runner does.
void OnRanks(int p, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < p; ++r) threads.emplace_back(fn, r);
  for (auto& t : threads) t.join();
}

// Rank s sends rank d a message of (s + 2 d) % 3 floats (so some pairs send
// nothing), each float encoding (s, d, i).
std::vector<float> Message(int s, int d) {
  std::vector<float> m((s + 2 * d) % 3);
  for (size_t i = 0; i < m.size(); ++i) m[i] = 100.0f * s + 10.0f * d + static_cast<float>(i);
  return m;
}

class CommTest : public ::testing::TestWithParam<int> {};

TEST_P(CommTest, AllToAllDeliversEveryPairIncludingEmptyOnes) {
  const int p = GetParam();
  InProcCommunicator comm(p);
  EXPECT_EQ(comm.size(), p);
  std::vector<std::vector<std::vector<float>>> got(p);
  OnRanks(p, [&](int r) {
    std::vector<std::vector<float>> send(p);
    for (int d = 0; d < p; ++d) send[d] = Message(r, d);
    // Twice, reusing buffers, to check nothing stale survives a round.
    comm.AllToAll(r, send, &got[r], nullptr, "dispatch", 0);
    comm.AllToAll(r, send, &got[r], nullptr, "dispatch", 1);
  });
  for (int r = 0; r < p; ++r) {
    ASSERT_EQ(static_cast<int>(got[r].size()), p);
    for (int s = 0; s < p; ++s) EXPECT_EQ(got[r][s], Message(s, r)) << s << "->" << r;
  }
}

TEST_P(CommTest, AllReduceSumIsBitIdenticalOnEveryRank) {
  const int p = GetParam();
  InProcCommunicator comm(p);
  std::vector<std::vector<float>> data(p);
  OnRanks(p, [&](int r) {
    data[r] = {0.1f * (r + 1), 1e8f * (r % 2 ? 1 : -1), static_cast<float>(r)};
    comm.AllReduceSum(r, &data[r], nullptr, "allreduce", -1);
  });
  std::vector<float> want = {0.0f, 0.0f, 0.0f};
  for (int s = 0; s < p; ++s) {  // rank order, as documented
    want[0] += 0.1f * (s + 1);
    want[1] += 1e8f * (s % 2 ? 1 : -1);
    want[2] += static_cast<float>(s);
  }
  for (int r = 0; r < p; ++r) EXPECT_EQ(data[r], want) << r;
}

TEST_P(CommTest, AllGatherConcatenatesInRankOrderWithEmptyContributions) {
  const int p = GetParam();
  InProcCommunicator comm(p);
  std::vector<std::vector<float>> out(p);
  OnRanks(p, [&](int r) {
    std::vector<float> in(r % 2 == 0 ? r + 1 : 0, static_cast<float>(r));
    comm.AllGather(r, in, &out[r], nullptr, "allgather", -1);
    comm.Barrier(r);
  });
  std::vector<float> want;
  for (int s = 0; s < p; ++s)
    want.insert(want.end(), s % 2 == 0 ? s + 1 : 0, static_cast<float>(s));
  for (int r = 0; r < p; ++r) EXPECT_EQ(out[r], want);
}

TEST_P(CommTest, CommSpansRecordBytesSentToOtherRanks) {
  const int p = GetParam();
  InProcCommunicator comm(p);
  const auto epoch = SpanRecorder::Clock::now();
  std::vector<SpanRecorder> recs;
  for (int r = 0; r < p; ++r) recs.emplace_back(r, epoch);
  for (auto& rec : recs) rec.Reset(TraceLevel::kFull);
  OnRanks(p, [&](int r) {
    std::vector<std::vector<float>> send(p), recv;
    for (int d = 0; d < p; ++d) send[d] = Message(r, d);
    comm.AllToAll(r, send, &recv, &recs[r], "dispatch", 3);
    std::vector<float> v(5, 1.0f);
    comm.AllReduceSum(r, &v, &recs[r], "allreduce", -1);
  });
  for (int r = 0; r < p; ++r) {
    int64_t a2a = 0;
    for (int d = 0; d < p; ++d) {
      if (d != r) a2a += static_cast<int64_t>(Message(r, d).size() * sizeof(float));
    }
    const auto& spans = recs[r].spans();
    ASSERT_EQ(spans.size(), 2u);
    EXPECT_EQ(spans[0].name, "dispatch");
    EXPECT_EQ(spans[0].kind, "comm");
    EXPECT_EQ(spans[0].layer, 3);
    EXPECT_EQ(spans[0].device, r);
    EXPECT_EQ(spans[0].bytes, a2a);
    EXPECT_EQ(spans[1].name, "allreduce");
    EXPECT_EQ(spans[1].bytes, 5 * 4 * (p - 1));
    EXPECT_EQ(comm.bytes_sent(r), a2a + 5 * 4 * (p - 1));
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, CommTest, ::testing::Values(1, 3, 4));

TEST(CommTest, OffRecorderRecordsNothingButBytesStillCount) {
  InProcCommunicator comm(2);
  SpanRecorder rec0(0, SpanRecorder::Clock::now()), rec1(1, SpanRecorder::Clock::now());
  rec0.Reset(TraceLevel::kOff);
  rec1.Reset(TraceLevel::kOff);
  OnRanks(2, [&](int r) {
    std::vector<std::vector<float>> send(2, std::vector<float>(3)), recv;
    comm.AllToAll(r, send, &recv, r == 0 ? &rec0 : &rec1, "combine", 0);
  });
  EXPECT_TRUE(rec0.spans().empty());
  EXPECT_EQ(comm.bytes_sent(0), 12);
}

TEST(SpinBarrierTest, NoRankPassesBeforeAllArrive) {
  const int p = 4, rounds = 200;
  SpinBarrier barrier(p);
  std::atomic<int> arrived{0};
  std::atomic<bool> early{false};
  OnRanks(p, [&](int r) {
    for (int i = 0; i < rounds; ++i) {
      arrived.fetch_add(1);
      barrier.ArriveAndWait();
      if (arrived.load() < (i + 1) * p) early = true;
      barrier.ArriveAndWait();  // keeps round i+1's arrivals after every round-i check
    }
  });
  EXPECT_FALSE(early.load());
  EXPECT_EQ(arrived.load(), p * rounds);
}

}  // namespace
}  // namespace sy::engine
