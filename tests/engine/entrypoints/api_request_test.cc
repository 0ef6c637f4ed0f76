#include "engine/entrypoints/api_request.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "base/status_matchers.h"

namespace sy::engine {
namespace {

using std::chrono::milliseconds;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

ApiSubmission Sub(int32_t first_token) {
  ApiSubmission s;
  s.spec.prompt = {first_token};
  s.stream = std::make_shared<TokenStream>();
  return s;
}

TEST(TokenStreamTest, DeliversStartTokensAndFinishInOrder) {
  TokenStream s;
  s.Started(7);
  StreamUpdate u = s.Wait(milliseconds(0));
  EXPECT_TRUE(u.started);
  EXPECT_EQ(u.id, 7);
  EXPECT_FALSE(u.finished);
  EXPECT_TRUE(u.tokens.empty());

  s.PushToken(1);
  s.PushToken(2);
  u = s.Wait(milliseconds(0));
  EXPECT_THAT(u.tokens, ElementsAre(1, 2));
  EXPECT_TRUE(u.started);  // stays reported
  s.PushToken(3);
  s.Finish("length", 4, 3);
  u = s.Wait(milliseconds(0));
  EXPECT_THAT(u.tokens, ElementsAre(3));
  EXPECT_TRUE(u.finished);
  EXPECT_TRUE(u.error.ok());
  EXPECT_EQ(u.finish_reason, "length");
  EXPECT_EQ(u.prompt_tokens, 4);
  EXPECT_EQ(u.completion_tokens, 3);

  // Finished keeps returning finished at once, with no tokens left over;
  // late pushes and a second Finish change nothing.
  s.PushToken(9);
  s.Finish("eos", 1, 1);
  const auto t0 = std::chrono::steady_clock::now();
  u = s.Wait(milliseconds(5000));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, milliseconds(1000));
  EXPECT_TRUE(u.finished);
  EXPECT_TRUE(u.tokens.empty());
  EXPECT_EQ(u.finish_reason, "length");
}

TEST(TokenStreamTest, WaitTimesOutWithNothingNew) {
  TokenStream s;
  s.Started(1);
  (void)s.Wait(milliseconds(0));  // the start is reported once
  const auto t0 = std::chrono::steady_clock::now();
  StreamUpdate u = s.Wait(milliseconds(50));
  const auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(waited, milliseconds(45));
  EXPECT_LT(waited, milliseconds(2000));
  EXPECT_TRUE(u.tokens.empty());
  EXPECT_FALSE(u.finished);
  EXPECT_TRUE(u.started);
}

TEST(TokenStreamTest, FailFinishesWithTheError) {
  TokenStream s;
  s.Fail(InvalidArgument("prompt of 9000 tokens exceeds max_seq"));
  StreamUpdate u = s.Wait(milliseconds(1000));
  EXPECT_TRUE(u.finished);
  EXPECT_FALSE(u.started);
  EXPECT_THAT(u.error, StatusIs(StatusCode::kInvalidArgument, HasSubstr("max_seq")));
  s.Finish("eos", 1, 1);  // ignored: the first end wins
  EXPECT_THAT(s.Wait(milliseconds(0)).error, StatusIs(StatusCode::kInvalidArgument));
}

TEST(TokenStreamTest, CancelIsSeenByTheEngineSide) {
  TokenStream s;
  EXPECT_FALSE(s.cancelled());
  s.Cancel();
  EXPECT_TRUE(s.cancelled());
}

TEST(TokenStreamTest, ProducerAndConsumerThreadsLoseNothing) {
  auto s = std::make_shared<TokenStream>();
  constexpr int kTokens = 5000;
  std::thread engine([s] {
    s->Started(42);
    for (int i = 0; i < kTokens; ++i) {
      s->PushToken(i);
      if (i % 500 == 0) std::this_thread::yield();
    }
    s->Finish("length", 3, kTokens);
  });
  std::vector<int32_t> got;
  StreamUpdate u;
  while (!u.finished) {
    u = s->Wait(milliseconds(100));
    got.insert(got.end(), u.tokens.begin(), u.tokens.end());
  }
  engine.join();
  ASSERT_EQ(got.size(), static_cast<size_t>(kTokens));
  for (int i = 0; i < kTokens; ++i) ASSERT_EQ(got[i], i);
  EXPECT_EQ(u.id, 42);
}

TEST(RequestInboxTest, DrainsInPushOrder) {
  RequestInbox inbox(8);
  ASSERT_THAT(inbox.Push(Sub(1)), IsOk());
  ASSERT_THAT(inbox.Push(Sub(2)), IsOk());
  EXPECT_EQ(inbox.pending(), 2);
  std::vector<ApiSubmission> got = inbox.Drain();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].spec.prompt[0], 1);
  EXPECT_EQ(got[1].spec.prompt[0], 2);
  EXPECT_EQ(inbox.pending(), 0);
  EXPECT_TRUE(inbox.Drain().empty());
}

TEST(RequestInboxTest, RefusesWhenPendingPlusEngineWaitingReachMax) {
  RequestInbox inbox(3);
  EXPECT_EQ(inbox.max_queue(), 3);
  ASSERT_THAT(inbox.Push(Sub(1)), IsOk());
  inbox.SetEngineWaiting(2);
  EXPECT_THAT(inbox.Push(Sub(2)),
              StatusIs(StatusCode::kResourceExhausted, HasSubstr("queue full: 3 requests")));
  EXPECT_EQ(inbox.pending(), 1);  // nothing queued by the refusal
  inbox.SetEngineWaiting(1);
  EXPECT_THAT(inbox.Push(Sub(3)), IsOk());
  (void)inbox.Drain();
  inbox.SetEngineWaiting(0);
  EXPECT_THAT(inbox.Push(Sub(4)), IsOk());
}

TEST(RequestInboxTest, ManyProducersOneConsumer) {
  RequestInbox inbox(1 << 20);
  constexpr int kThreads = 4, kEach = 500;
  std::vector<std::thread> producers;
  for (int t = 0; t < kThreads; ++t) {
    producers.emplace_back([&inbox, t] {
      for (int i = 0; i < kEach; ++i) ASSERT_THAT(inbox.Push(Sub(t * kEach + i)), IsOk());
    });
  }
  std::vector<int> seen(kThreads * kEach, 0);
  std::vector<int> last(kThreads, -1);
  int total = 0;
  while (total < kThreads * kEach) {
    for (ApiSubmission& s : inbox.Drain()) {
      const int v = s.spec.prompt[0];
      ++seen[v];
      // Each producer's pushes arrive in its order.
      EXPECT_GT(v % kEach, last[v / kEach]);
      last[v / kEach] = v % kEach;
      ++total;
    }
  }
  for (std::thread& p : producers) p.join();
  for (int n : seen) EXPECT_EQ(n, 1);
}

}  // namespace
}  // namespace sy::engine
