#include "engine/scheduler/scheduler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <set>

#include "base/status_matchers.h"
#include "tests/engine/scheduler/test_util.h"

namespace sy::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(SchedulerOptionsTest, RejectsRunningAboveBudget) {
  EXPECT_THAT(Opts(8, 16).Validate(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("max_running")));
  EXPECT_THAT(Opts(8, 8).Validate(), IsOk());
}

TEST(SchedulerTest, SubmitRejectsBadRequestsAndQueuesNothing) {
  Pools pools(1, 4, 4);
  Scheduler s(Opts(64), pools.ptrs);
  EXPECT_THAT(s.Submit(Spec(0, 4), 0), StatusIs(StatusCode::kInvalidArgument, HasSubstr("empty")));
  RequestSpec bad = Spec(3, 4);
  bad.prompt[1] = 999;
  EXPECT_THAT(s.Submit(bad, 0), StatusIs(StatusCode::kInvalidArgument, HasSubstr("vocab")));
  EXPECT_THAT(s.Submit(Spec(256, 4), 0),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("max_seq")));
  EXPECT_THAT(s.Submit(Spec(3, 0), 0), StatusIs(StatusCode::kInvalidArgument));
  // 4 pages x 4 tokens: 16 positions at most on a device.
  EXPECT_THAT(s.Submit(Spec(10, 8), 0),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("KV pages")));
  EXPECT_EQ(s.waiting(), 0);
  EXPECT_THAT(s.Submit(Spec(10, 7), 0), IsOk());  // 16 tokens, 15 positions fed
  EXPECT_EQ(s.waiting(), 1);
}

TEST(SchedulerTest, AdmissionIsLimitedByFreePages) {
  Pools pools(1, 10, 4);
  Scheduler s(Opts(512, 8, /*reserve=*/1), pools.ptrs);
  for (int i = 0; i < 4; ++i) ASSERT_THAT(s.Submit(Spec(16, 4), 0), IsOk());
  BatchInput b = s.Plan();
  // 4 pages each: 10 -> 6 -> 2; a third would leave -2 < reserve 1.
  EXPECT_EQ(b.seqs.size(), 2u);
  EXPECT_EQ(s.running(), 2);
  EXPECT_EQ(s.waiting(), 2);
  EXPECT_EQ(pools.ptrs[0]->free_pages(), 2);
}

// Data-parallel attention: each group of devices prefills at most its share
// of the step's budget, so no device takes a whole budget of prompt while
// the others wait on it at every MoE layer.
TEST(SchedulerTest, PrefillGroupsCapEachGroupsShareOfTheBudget) {
  Pools pools(4, 64, 4);
  Scheduler s(Opts(/*budget=*/200, /*max_running=*/8), pools.ptrs);
  EXPECT_EQ(s.prefill_group(), 4);  // one group: the whole budget
  for (int i = 0; i < 6; ++i) ASSERT_THAT(s.Submit(Spec(120, 4), 0), IsOk());
  s.set_prefill_group(1);  // 200 * 1 / 4 = 50 prefill tokens per device
  int64_t now = 0;
  BatchInput b = s.Plan();
  std::map<int, int> per_device;
  for (const SeqInput& q : b.seqs) per_device[q.device] += static_cast<int>(q.tokens.size());
  // Four admitted, one per device, 50 tokens each; the other two wait for a
  // device with room (none left this step).
  EXPECT_EQ(s.running(), 4);
  EXPECT_EQ(s.waiting(), 2);
  EXPECT_THAT(per_device,
              ElementsAre(std::pair{0, 50}, std::pair{1, 50}, std::pair{2, 50}, std::pair{3, 50}));
  ASSERT_THAT(s.Commit(Outputs(b), ++now), IsOk());

  // Pairs of devices: 100 tokens per pair per step; the running prompts
  // continue first (70 left each), so each pair finishes one and starts the other.
  s.set_prefill_group(2);
  b = s.Plan();
  std::map<int, int> per_group;
  for (const SeqInput& q : b.seqs) per_group[q.device / 2] += static_cast<int>(q.tokens.size());
  EXPECT_THAT(per_group, ElementsAre(std::pair{0, 100}, std::pair{1, 100}));
  ASSERT_THAT(s.Commit(Outputs(b), ++now), IsOk());

  // Back to one group: the shared budget again (FCFS, no per-device cap).
  s.set_prefill_group(4);
  b = s.Plan();
  EXPECT_EQ(Tokens(b), 200);
  ASSERT_THAT(s.Commit(Outputs(b), ++now), IsOk());
  EXPECT_EQ(Drain(s, &now).size(), 6u);
}

// What the switch policy reads before a step: prompt tokens still to
// prefill, waiting and chunked alike, at most one step's budget.
TEST(SchedulerTest, PendingPrefillTokensCountQueuedAndChunkedPromptsUpToTheBudget) {
  Pools pools(2, 64, 4);
  Scheduler s(Opts(/*budget=*/100, /*max_running=*/8), pools.ptrs);
  EXPECT_EQ(s.pending_prefill_tokens(), 0);
  ASSERT_THAT(s.Submit(Spec(30, 4), 0), IsOk());
  ASSERT_THAT(s.Submit(Spec(40, 4), 0), IsOk());
  EXPECT_EQ(s.pending_prefill_tokens(), 70);
  ASSERT_THAT(s.Submit(Spec(50, 4), 0), IsOk());
  EXPECT_EQ(s.pending_prefill_tokens(), 100);  // 120 waiting, capped at the budget
  int64_t now = 0;
  BatchInput b = s.Plan();  // 30 + 40 + the first 30 of the 50
  EXPECT_EQ(Tokens(b), 100);
  ASSERT_THAT(s.Commit(Outputs(b), ++now), IsOk());
  // The two finished prompts now decode (no prefill left); 20 of the third remain.
  EXPECT_EQ(s.waiting(), 0);
  EXPECT_EQ(s.pending_prefill_tokens(), 20);
  ASSERT_THAT(s.Submit(Spec(10, 4), now), IsOk());
  EXPECT_EQ(s.pending_prefill_tokens(), 30);
  b = s.Plan();
  ASSERT_THAT(s.Commit(Outputs(b), ++now), IsOk());
  EXPECT_EQ(s.pending_prefill_tokens(), 0);  // all decoding
  EXPECT_EQ(Drain(s, &now).size(), 4u);
}

// A queued request whose prompt a device's cache holds counts only what it
// would prefill: the tokens past its cached prefix.
TEST(SchedulerTest, PendingPrefillTokensLeaveOutWhatTheCacheHolds) {
  Pools pools(2, 64, 4);
  Scheduler s(Opts(/*budget=*/256, /*max_running=*/8, /*reserve=*/0, /*cache=*/true), pools.ptrs);
  ASSERT_THAT(s.Submit(Spec(40, 2), 0), IsOk());
  int64_t now = 0;
  EXPECT_EQ(Drain(s, &now).size(), 1u);  // its prompt's 40 tokens are now cached
  // 48 tokens, the first 40 as before: 40 cached (10 pages of 4), 8 to prefill.
  ASSERT_THAT(s.Submit(Spec(48, 2), now), IsOk());
  EXPECT_EQ(s.pending_prefill_tokens(), 8);
  // A prompt the cache has never seen counts whole.
  RequestSpec fresh = Spec(20, 2);
  for (int32_t& t : fresh.prompt) t = 7;
  ASSERT_THAT(s.Submit(fresh, now), IsOk());
  EXPECT_EQ(s.pending_prefill_tokens(), 28);
  // Admission reuses what pending_prefill_tokens left out.
  const BatchInput b = s.Plan();
  EXPECT_EQ(Tokens(b), 28);
}

TEST(SchedulerTest, PrefersTheDeviceWithMostFreePages) {
  Pools pools(3, 16, 4);
  Scheduler s(Opts(512), pools.ptrs);
  ASSERT_THAT(s.Submit(Spec(20, 4), 0), IsOk());  // 5 pages
  ASSERT_THAT(s.Submit(Spec(8, 4), 0), IsOk());   // 2 pages
  ASSERT_THAT(s.Submit(Spec(8, 4), 0), IsOk());
  ASSERT_THAT(s.Submit(Spec(8, 4), 0), IsOk());
  BatchInput b = s.Plan();
  ASSERT_EQ(b.seqs.size(), 4u);
  std::vector<int> devs;
  for (const SeqInput& q : b.seqs) devs.push_back(q.device);
  // Free after each: [11,16,16] -> d1 [11,14,16] -> d2 [11,14,14] -> d1 (tie: lower id)
  EXPECT_THAT(devs, ElementsAre(0, 1, 2, 1));
  EXPECT_EQ(s.running_on(0), 1);
  EXPECT_EQ(s.running_on(1), 2);
}

TEST(SchedulerTest, ChunkedPrefillSamplesOnlyOnTheFinalChunk) {
  Pools pools(1, 32, 4);
  Scheduler s(Opts(8), pools.ptrs);
  ASSERT_THAT(s.Submit(Spec(20, 3), 0), IsOk());
  std::vector<std::pair<int, bool>> chunks;  // (start_pos, sample)
  int64_t now = 0;
  for (int i = 0; i < 3; ++i) {
    BatchInput b = s.Plan();
    ASSERT_EQ(b.seqs.size(), 1u);
    chunks.emplace_back(b.seqs[0].start_pos, b.seqs[0].sample);
    EXPECT_EQ(b.seqs[0].tokens.size(), i < 2 ? 8u : 4u);
    EXPECT_EQ(b.seqs[0].pages.size(), 5u);  // whole prompt reserved at admission
    ASSERT_THAT(s.Commit(Outputs(b), now += 10).status(), IsOk());
  }
  EXPECT_THAT(chunks, ElementsAre(std::pair{0, false}, std::pair{8, false}, std::pair{16, true}));
  EXPECT_EQ(s.generated_total(), 1);
  // Now decoding: one token at position 20, which needs a sixth page.
  BatchInput b = s.Plan();
  ASSERT_EQ(b.seqs.size(), 1u);
  EXPECT_EQ(b.seqs[0].start_pos, 20);
  EXPECT_THAT(b.seqs[0].tokens, ElementsAre('x'));
  EXPECT_TRUE(b.seqs[0].sample);
  EXPECT_EQ(b.seqs[0].pages.size(), 6u);
}

TEST(SchedulerTest, DecodesFirstThenSpendsTheRestOnPrefill) {
  Pools pools(1, 32, 4);
  Scheduler s(Opts(8), pools.ptrs);
  ASSERT_THAT(s.Submit(Spec(4, 10), 0), IsOk());
  int64_t now = 0;
  BatchInput b = s.Plan();
  ASSERT_THAT(s.Commit(Outputs(b), now += 10).status(), IsOk());
  ASSERT_THAT(s.Submit(Spec(20, 4), now), IsOk());
  b = s.Plan();
  ASSERT_EQ(b.seqs.size(), 2u);
  EXPECT_EQ(b.seqs[0].request_id, 1);
  EXPECT_EQ(b.seqs[0].tokens.size(), 1u);
  EXPECT_EQ(b.seqs[1].request_id, 2);
  EXPECT_EQ(b.seqs[1].tokens.size(), 7u);
  EXPECT_FALSE(b.seqs[1].sample);
  EXPECT_EQ(s.last_plan().decode_tokens, 1);
  EXPECT_EQ(s.last_plan().prefill_tokens, 7);
}

TEST(SchedulerTest, FinishesOnEosOrLengthAndReturnsEveryPage) {
  Pools pools(2, 16, 4);
  Scheduler s(Opts(64), pools.ptrs);
  const int initial = pools.free_total();
  ASSERT_THAT(s.Submit(Spec(6, 50, /*ignore_eos=*/false), 0), IsOk());  // id 1: EOS at 3rd token
  ASSERT_THAT(s.Submit(Spec(6, 5, /*ignore_eos=*/false), 0), IsOk());   // id 2: length
  ASSERT_THAT(s.Submit(Spec(6, 4, /*ignore_eos=*/true), 0), IsOk());    // id 3: ignores EOS
  std::map<int64_t, int> emitted;
  std::vector<Request> done;
  int64_t now = 0;
  for (int i = 0; i < 100 && !s.idle(); ++i) {
    BatchInput b = s.Plan();
    auto r = s.Commit(Outputs(b,
                              [&](const SeqInput& q) {
                                return ++emitted[q.request_id] == 3 ? kEos : int32_t{'y'};
                              }),
                      now += 10);
    ASSERT_THAT(r.status(), IsOk());
    for (Request& q : *r) done.push_back(std::move(q));
  }
  ASSERT_EQ(done.size(), 3u);
  std::map<int64_t, const Request*> by_id;
  for (const Request& r : done) by_id[r.id] = &r;
  EXPECT_EQ(by_id[1]->finish, FinishReason::kEos);
  EXPECT_EQ(by_id[1]->generated.size(), 3u);
  EXPECT_EQ(by_id[1]->generated.back(), kEos);
  EXPECT_EQ(by_id[2]->finish, FinishReason::kEos);  // EOS came before its 5 tokens
  EXPECT_EQ(by_id[3]->finish, FinishReason::kLength);
  EXPECT_EQ(by_id[3]->generated.size(), 4u);
  for (const Request& r : done) {
    EXPECT_EQ(r.state, RequestState::kFinished);
    EXPECT_TRUE(r.pages.empty());
  }
  EXPECT_EQ(pools.free_total(), initial);
  EXPECT_EQ(s.finished_total(), 3);
  EXPECT_EQ(s.generated_total(), 10);
}

TEST(SchedulerTest, StopsAtMaxSeq) {
  Pools pools(1, 64, 4);
  SchedulerOptions o = Opts(64);
  o.max_seq = 12;
  Scheduler s(o, pools.ptrs);
  ASSERT_THAT(s.Submit(Spec(8, 100), 0), IsOk());
  int64_t now = 0;
  std::vector<Request> done = Drain(s, &now);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].total_len(), 12);
  EXPECT_EQ(done[0].finish, FinishReason::kLength);
}

TEST(SchedulerTest, PreemptionUnderPageExhaustionLosesNoRequest) {
  // 2 devices x 12 pages x 4 tokens; 10 requests that each grow to 8+24 tokens
  // (8 pages): they cannot all stay resident, so decode growth must preempt.
  Pools pools(2, 12, 4);
  Scheduler s(Opts(64, 8, /*reserve=*/0), pools.ptrs);
  const int initial = pools.free_total();
  std::set<int64_t> ids;
  for (int i = 0; i < 10; ++i) ids.insert(s.Submit(Spec(8, 24), 0).value());
  int64_t now = 0;
  std::vector<Request> done = Drain(s, &now);
  EXPECT_GT(s.preempted_total(), 0);
  std::set<int64_t> finished;
  for (const Request& r : done) {
    EXPECT_TRUE(finished.insert(r.id).second) << "request " << r.id << " finished twice";
    EXPECT_EQ(r.generated.size(), 24u) << "request " << r.id;
    EXPECT_EQ(r.finish, FinishReason::kLength);
  }
  EXPECT_EQ(finished, ids);
  EXPECT_TRUE(s.idle());
  EXPECT_EQ(pools.free_total(), initial);
}

TEST(SchedulerTest, PreemptedRequestIsRecomputedWithItsGeneratedTokens) {
  Pools pools(1, 4, 4);  // 16 positions on the only device
  Scheduler s(Opts(64, 8, 0), pools.ptrs);
  ASSERT_THAT(s.Submit(Spec(4, 12), 0), IsOk());  // grows to 15 positions: 4 pages
  ASSERT_THAT(s.Submit(Spec(4, 12), 0), IsOk());
  int64_t now = 0;
  bool saw_recompute = false;
  for (int i = 0; i < 200 && !s.idle(); ++i) {
    BatchInput b = s.Plan();
    for (const SeqInput& q : b.seqs) {
      // A recompute prefill re-feeds prompt + generated from position 0.
      if (q.start_pos == 0 && q.tokens.size() > 4u) {
        saw_recompute = true;
        EXPECT_EQ(q.tokens[4], 'x');
      }
    }
    ASSERT_THAT(s.Commit(Outputs(b), now += 10).status(), IsOk());
  }
  EXPECT_TRUE(s.idle());
  EXPECT_TRUE(saw_recompute);
  EXPECT_EQ(s.finished_total(), 2);
  EXPECT_EQ(pools.ptrs[0]->free_pages(), 4);
}

TEST(SchedulerTest, LatencyMetricsComeFromInjectedTimes) {
  Pools pools(1, 16, 4);
  Scheduler s(Opts(64), pools.ptrs);
  ASSERT_THAT(s.Submit(Spec(5, 4), /*arrival_us=*/1000), IsOk());
  const int64_t times[] = {1500, 1700, 2000, 2400};
  std::vector<Request> done;
  for (int64_t t : times) {
    BatchInput b = s.Plan();
    auto r = s.Commit(Outputs(b), t);
    ASSERT_THAT(r.status(), IsOk());
    for (Request& q : *r) done.push_back(std::move(q));
  }
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].ttft_us(), 500);
  EXPECT_EQ(done[0].e2e_us(), 1400);
  EXPECT_EQ(done[0].tpot_us(), 300);  // (2400 - 1500) / 3
}

TEST(SchedulerTest, CommitRejectsAMismatchedStepAndAppliesNothing) {
  Pools pools(1, 16, 4);
  Scheduler s(Opts(64), pools.ptrs);
  ASSERT_THAT(s.Submit(Spec(5, 4), 0), IsOk());
  BatchInput b = s.Plan();
  StepOutput wrong;
  EXPECT_THAT(s.Commit(wrong, 10).status(), StatusIs(StatusCode::kInternal));
  StepOutput bad_token = Outputs(b, [](const SeqInput&) { return 100000; });
  EXPECT_THAT(s.Commit(bad_token, 10).status(),
              StatusIs(StatusCode::kInternal, HasSubstr("vocab")));
  EXPECT_EQ(s.generated_total(), 0);
  // Replanning yields the same work.
  BatchInput again = s.Plan();
  ASSERT_EQ(again.seqs.size(), 1u);
  EXPECT_EQ(again.seqs[0].tokens, b.seqs[0].tokens);
  EXPECT_EQ(again.seqs[0].pages, b.seqs[0].pages);
  EXPECT_THAT(s.Commit(Outputs(again), 10).status(), IsOk());
  EXPECT_EQ(s.generated_total(), 1);
}

TEST(SchedulerTest, SampleSeedDependsOnRequestSeedAndPosition) {
  Pools pools(1, 16, 4);
  Scheduler s(Opts(64), pools.ptrs);
  RequestSpec a = Spec(5, 4), b = Spec(5, 4);
  a.seed = 1;
  b.seed = 2;
  ASSERT_THAT(s.Submit(a, 0), IsOk());
  ASSERT_THAT(s.Submit(b, 0), IsOk());
  BatchInput p = s.Plan();
  ASSERT_EQ(p.seqs.size(), 2u);
  EXPECT_NE(p.seqs[0].sample_seed, p.seqs[1].sample_seed);
  ASSERT_THAT(s.Commit(Outputs(p), 1).status(), IsOk());
  BatchInput q = s.Plan();
  EXPECT_NE(q.seqs[0].sample_seed, p.seqs[0].sample_seed);
}

// ---- Hybrid models: KV pages and recurrent-state slots ----

// Checks every batch the hybrid invariants: each seq carries a slot, no two
// seqs of a step share (device, slot), and a request keeps its slot from
// admission until it restarts at position 0 (recompute after preemption).
// Together with used_slots == running_on(d) after every Plan (a slot handed
// to two running requests would leave one fewer in use than running), this
// means no slot id is ever shared by two running requests.
class SlotChecker {
 public:
  void Check(const BatchInput& b) {
    std::set<std::pair<int, int>> used;
    for (const SeqInput& q : b.seqs) {
      ASSERT_GE(q.state_slot, 0) << "request " << q.request_id << " has no slot";
      EXPECT_TRUE(used.insert({q.device, q.state_slot}).second)
          << "slot " << q.state_slot << " on device " << q.device << " fed twice in step "
          << b.step;
      auto it = held_.find(q.request_id);
      if (q.start_pos == 0) {
        held_[q.request_id] = {q.device, q.state_slot};
      } else {
        ASSERT_NE(it, held_.end()) << "request " << q.request_id << " continued without a start";
        EXPECT_EQ(it->second, std::make_pair(q.device, q.state_slot))
            << "request " << q.request_id << " changed slot mid-sequence";
      }
    }
  }
  void Forget(int64_t id) { held_.erase(id); }

 private:
  std::map<int64_t, std::pair<int, int>> held_;
};

TEST(SchedulerHybridTest, AdmissionBlockedBySlotsNotPages) {
  HybridPools pools({100}, {2}, 4);
  Scheduler s(Opts(512, 8, /*reserve=*/1), pools.kv.ptrs, pools.state_ptrs);
  EXPECT_TRUE(s.needs_slot(0));
  for (int i = 0; i < 4; ++i) ASSERT_THAT(s.Submit(Spec(8, 2), 0), IsOk());
  BatchInput b = s.Plan();
  // Plenty of pages (100 - 2*2), but only two slots.
  ASSERT_EQ(b.seqs.size(), 2u);
  EXPECT_EQ(s.running(), 2);
  EXPECT_EQ(s.waiting(), 2);
  EXPECT_EQ(pools.state[0]->free_slots(), 0);
  EXPECT_EQ(pools.kv.ptrs[0]->free_pages(), 96);
  std::set<int> slots{b.seqs[0].state_slot, b.seqs[1].state_slot};
  EXPECT_EQ(slots, (std::set<int>{0, 1}));
  int64_t now = 0;
  ASSERT_THAT(s.Commit(Outputs(b), now += 10).status(), IsOk());
  // Decode to the end of the two running requests: the queue only moves once
  // a slot comes back.
  b = s.Plan();
  EXPECT_EQ(b.seqs.size(), 2u);
  EXPECT_EQ(s.waiting(), 2);
  auto done = s.Commit(Outputs(b), now += 10);
  ASSERT_THAT(done.status(), IsOk());
  ASSERT_EQ(done->size(), 2u);  // 2 tokens each: finished
  EXPECT_EQ(done->at(0).state_slot, -1);
  EXPECT_EQ(pools.state[0]->free_slots(), 2);
  b = s.Plan();
  EXPECT_EQ(b.seqs.size(), 2u);
  EXPECT_EQ(s.waiting(), 0);
  for (const SeqInput& q : b.seqs) EXPECT_GE(q.state_slot, 0);
}

TEST(SchedulerHybridTest, AdmissionBlockedByPagesNotSlots) {
  HybridPools pools({10}, {8}, 4);
  Scheduler s(Opts(512, 8, /*reserve=*/1), pools.kv.ptrs, pools.state_ptrs);
  for (int i = 0; i < 4; ++i) ASSERT_THAT(s.Submit(Spec(16, 4), 0), IsOk());
  BatchInput b = s.Plan();
  // 4 pages each: 10 -> 6 -> 2; a third would leave -2 < reserve 1, though
  // six slots are free.
  EXPECT_EQ(b.seqs.size(), 2u);
  EXPECT_EQ(s.waiting(), 2);
  EXPECT_EQ(pools.kv.ptrs[0]->free_pages(), 2);
  EXPECT_EQ(pools.state[0]->free_slots(), 6);
}

TEST(SchedulerHybridTest, PicksTheDeviceWithMostFreePagesAmongThoseWithAFreeSlot) {
  // Device 0 has the most pages but one slot; device 1 fewer pages, two slots.
  HybridPools pools({32, 16}, {1, 2}, 4);
  Scheduler s(Opts(512), pools.kv.ptrs, pools.state_ptrs);
  for (int i = 0; i < 4; ++i) ASSERT_THAT(s.Submit(Spec(8, 4), 0), IsOk());
  BatchInput b = s.Plan();
  std::vector<int> devs;
  for (const SeqInput& q : b.seqs) devs.push_back(q.device);
  // d0 (32 free) takes the first; then d0 has no slot: d1 twice; then none.
  EXPECT_THAT(devs, ElementsAre(0, 1, 1));
  EXPECT_EQ(s.waiting(), 1);
  EXPECT_EQ(pools.state[0]->free_slots(), 0);
  EXPECT_EQ(pools.state[1]->free_slots(), 0);
  EXPECT_GT(pools.kv.ptrs[0]->free_pages(), pools.kv.ptrs[1]->free_pages());
}

TEST(SchedulerHybridTest, ChunkedPrefillAndDecodeStayInTheSameSlot) {
  HybridPools pools({32}, {4}, 4);
  Scheduler s(Opts(8), pools.kv.ptrs, pools.state_ptrs);
  ASSERT_THAT(s.Submit(Spec(3, 2), 0), IsOk());   // takes slot 0, finishes early
  ASSERT_THAT(s.Submit(Spec(20, 4), 0), IsOk());  // chunked over several steps
  std::set<int> seen;
  int64_t now = 0;
  for (int i = 0; i < 20 && !s.idle(); ++i) {
    BatchInput b = s.Plan();
    for (const SeqInput& q : b.seqs)
      if (q.request_id == 2) seen.insert(q.state_slot);
    ASSERT_THAT(s.Commit(Outputs(b), now += 10).status(), IsOk());
  }
  EXPECT_TRUE(s.idle());
  EXPECT_EQ(seen, (std::set<int>{1}));
  EXPECT_EQ(pools.state[0]->free_slots(), 4);
}

TEST(SchedulerHybridTest, PreemptionFreesTheSlotAndTheRecomputeGetsOneAgain) {
  HybridPools pools({4}, {2}, 4);  // 16 positions, two slots on the only device
  Scheduler s(Opts(64, 8, 0), pools.kv.ptrs, pools.state_ptrs);
  ASSERT_THAT(s.Submit(Spec(4, 12), 0), IsOk());  // each grows to 4 pages
  ASSERT_THAT(s.Submit(Spec(4, 12), 0), IsOk());
  SlotChecker checker;
  int64_t now = 0;
  bool saw_preempt = false, saw_recompute = false;
  for (int i = 0; i < 200 && !s.idle(); ++i) {
    const int64_t before = s.preempted_total();
    BatchInput b = s.Plan();
    checker.Check(b);
    if (s.preempted_total() > before) {
      saw_preempt = true;
      // The victim went back to the queue holding neither pages nor a slot.
      EXPECT_EQ(pools.state[0]->used_slots(), s.running());
    }
    for (const SeqInput& q : b.seqs) {
      if (q.start_pos == 0 && q.tokens.size() > 4u) {
        saw_recompute = true;
        EXPECT_GE(q.state_slot, 0);
        EXPECT_LT(q.state_slot, 2);
      }
    }
    auto r = s.Commit(Outputs(b), now += 10);
    ASSERT_THAT(r.status(), IsOk());
    for (const Request& q : *r) checker.Forget(q.id);
  }
  EXPECT_TRUE(s.idle());
  EXPECT_TRUE(saw_preempt);
  EXPECT_TRUE(saw_recompute);
  EXPECT_EQ(s.finished_total(), 2);
  EXPECT_EQ(pools.state[0]->free_slots(), 2);
  EXPECT_EQ(pools.kv.ptrs[0]->free_pages(), 4);
}

TEST(SchedulerHybridTest, DrainReturnsEveryPageAndSlotOnEveryDevice) {
  // Tight on both resources: 3 devices x (12 pages, 3 slots); 24 requests of
  // mixed lengths, some growing to 8 pages, so both slot-blocked admission
  // and page-exhaustion preemption happen.
  HybridPools pools({12, 12, 10}, {3, 2, 3}, 4);
  Scheduler s(Opts(16, 8, /*reserve=*/1), pools.kv.ptrs, pools.state_ptrs);
  const auto initial = pools.Free();
  std::set<int64_t> ids;
  for (int i = 0; i < 24; ++i) ids.insert(s.Submit(Spec(4 + i % 9, 6 + (i * 7) % 20), 0).value());
  SlotChecker checker;
  std::set<int64_t> finished;
  int64_t now = 0;
  int max_running = 0;
  for (int i = 0; i < 5000 && !s.idle(); ++i) {
    BatchInput b = s.Plan();
    checker.Check(b);
    max_running = std::max(max_running, s.running());
    for (int d = 0; d < 3; ++d) {
      EXPECT_EQ(pools.state[d]->used_slots(), s.running_on(d)) << "device " << d;
    }
    auto r = s.Commit(Outputs(b), now += 10);
    ASSERT_THAT(r.status(), IsOk());
    for (const Request& q : *r) {
      EXPECT_TRUE(finished.insert(q.id).second);
      EXPECT_EQ(q.state_slot, -1);
      EXPECT_TRUE(q.pages.empty());
      checker.Forget(q.id);
    }
  }
  EXPECT_TRUE(s.idle());
  EXPECT_EQ(finished, ids);
  EXPECT_EQ(max_running, 8);  // 3 + 2 + 3 slots cap concurrency
  EXPECT_GT(s.preempted_total(), 0);
  EXPECT_EQ(pools.Free(), initial);
}

TEST(SchedulerHybridTest, DestructorReleasesPagesAndSlots) {
  HybridPools pools({16, 16}, {2, 2}, 4);
  const auto initial = pools.Free();
  {
    Scheduler s(Opts(64), pools.kv.ptrs, pools.state_ptrs);
    for (int i = 0; i < 3; ++i) ASSERT_THAT(s.Submit(Spec(6, 4), 0), IsOk());
    BatchInput b = s.Plan();
    ASSERT_EQ(b.seqs.size(), 3u);
    EXPECT_NE(pools.Free(), initial);
  }
  EXPECT_EQ(pools.Free(), initial);
}

TEST(SchedulerHybridTest, SubmitRefusesWhatNoDeviceCouldEverHold) {
  HybridPools none({16}, {0}, 4);
  Scheduler s(Opts(64), none.kv.ptrs, none.state_ptrs);
  EXPECT_THAT(s.Submit(Spec(4, 4), 0),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("0 slots")));
  // Device 0 has the pages but no slot, device 1 a slot but few pages.
  HybridPools split({16, 2}, {0, 1}, 4);
  Scheduler t(Opts(64), split.kv.ptrs, split.state_ptrs);
  EXPECT_THAT(t.Submit(Spec(10, 4), 0),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("KV pages")));
  EXPECT_THAT(t.Submit(Spec(4, 4), 0), IsOk());  // 7 positions: 2 pages on device 1
  EXPECT_EQ(t.waiting(), 1);
}

TEST(SchedulerHybridTest, StatePoolsWithoutLayersNeedNoSlot) {
  HybridPools pools({16}, {0}, 4, /*layers=*/0);
  Scheduler s(Opts(64), pools.kv.ptrs, pools.state_ptrs);
  EXPECT_FALSE(s.needs_slot(0));
  ASSERT_THAT(s.Submit(Spec(4, 2), 0), IsOk());
  BatchInput b = s.Plan();
  ASSERT_EQ(b.seqs.size(), 1u);
  EXPECT_EQ(b.seqs[0].state_slot, -1);
  int64_t now = 0;
  ASSERT_THAT(s.Commit(Outputs(b), now += 10).status(), IsOk());
  EXPECT_EQ(Drain(s, &now).size(), 1u);
}

}  // namespace
}  // namespace sy::engine
