// Round trips through real SQLite files: what the Writer stores, the Reader
// gives back as the same messages, listed and windowed as documented.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>

#include "base/status_matchers.h"
#include "store/store.h"
#include "tests/store/store_test_util.h"

namespace sy::store {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using namespace ::sy::store::testing;

constexpr int64_t kAll0 = std::numeric_limits<int64_t>::min();
constexpr int64_t kAll1 = std::numeric_limits<int64_t>::max();

std::unique_ptr<Writer> MustOpenWriter(const std::string& path, WriterOptions o = {}) {
  Result<std::unique_ptr<Writer>> w = Writer::Open(path, o);
  EXPECT_THAT(w, IsOk());
  return w.ok() ? std::move(w).value() : nullptr;
}

std::unique_ptr<Reader> MustOpenReader(const std::string& path) {
  Result<std::unique_ptr<Reader>> r = Reader::Open(path);
  EXPECT_THAT(r, IsOk());
  return r.ok() ? std::move(r).value() : nullptr;
}

TEST(StoreReader, EveryMessageTypeRoundTripsInReplayOrder) {
  TempDir dir;
  std::string path = dir.File("runs.db");
  std::vector<tel::Message> sent = SampleRun("run-a");
  {
    auto w = MustOpenWriter(path);
    ASSERT_NE(w, nullptr);
    for (const auto& m : sent) w->Enqueue(m);
  }
  auto r = MustOpenReader(path);
  ASSERT_NE(r, nullptr);
  Result<std::vector<tel::Message>> got = r->Messages("run-a", kAll0, kAll1);
  ASSERT_THAT(got, IsOk());
  ExpectSameMessages(*got, ReplayOrder(sent));
  // At t=1000 the topics come out in the protocol's variant order.
  std::vector<std::string> topics;
  for (const auto& m : *got) {
    if (tel::EnvelopeOf(m).t_us == 1000) topics.emplace_back(tel::TopicOf(m));
  }
  EXPECT_THAT(topics, ElementsAre("step", "spans", "kstats", "occupancy", "experts", "request",
                                  "event", "heartbeat", "requests"));
  // Decoding the reconstructed wire form succeeds: it is replayable as received.
  for (const auto& m : *got) {
    tel::WireMessage wire = tel::Encode(m);
    EXPECT_THAT(tel::Decode(wire.topic, wire.body), IsOk()) << wire.topic;
  }
}

TEST(StoreReader, ListRunsNewestFirstWithCounts) {
  TempDir dir;
  std::string path = dir.File("runs.db");
  {
    auto w = MustOpenWriter(path);
    ASSERT_NE(w, nullptr);
    tel::Meta old_meta = SampleMeta("old", 0, 0);
    old_meta.started_unix_ms = 1000;
    w->Enqueue(old_meta);
    for (const auto& m : SampleRun("new")) w->Enqueue(m);
    tel::Heartbeat hb;
    hb.env = Env("new", 9, 2900);
    hb.sent_total = 777;
    hb.dropped_total = 12;
    w->Enqueue(hb);
    w->Flush();
    // While the Writer is open (WAL), a Reader sees committed runs as live.
    auto r = MustOpenReader(path);
    ASSERT_NE(r, nullptr);
    Result<RunInfo> live = r->GetRun("new");
    ASSERT_THAT(live, IsOk());
    EXPECT_EQ(live->status, "live");
    EXPECT_EQ(live->ended_unix_ms, 0);
  }
  auto r = MustOpenReader(path);
  ASSERT_NE(r, nullptr);
  Result<std::vector<RunInfo>> runs = r->ListRuns();
  ASSERT_THAT(runs, IsOk());
  ASSERT_EQ(runs->size(), 2u);
  const RunInfo& n = (*runs)[0];
  EXPECT_EQ(n.id, "new");
  EXPECT_EQ(n.started_unix_ms, 1700000000000);
  EXPECT_EQ(n.duration_us, 3000);  // last t seen
  EXPECT_EQ(n.status, "ended");
  EXPECT_EQ(n.model, "tiny-moe");
  EXPECT_EQ(n.devices, 2);
  EXPECT_EQ(n.steps, 3);
  EXPECT_EQ(n.requests, 3);
  EXPECT_EQ(n.spans, 12);  // 6 + 0 + 6
  EXPECT_EQ(n.engine_dropped, 12);
  EXPECT_EQ(n.store_dropped, 0);
  EXPECT_GT(n.created_unix_ms, 0);
  EXPECT_GE(n.ended_unix_ms, n.created_unix_ms);
  EXPECT_EQ((*runs)[1].id, "old");
  EXPECT_EQ((*runs)[1].started_unix_ms, 1000);
  EXPECT_EQ((*runs)[1].steps, 0);

  Result<RunInfo> one = r->GetRun("old");
  ASSERT_THAT(one, IsOk());
  EXPECT_EQ(one->model, "tiny-moe");
  EXPECT_THAT(r->GetRun("nope"), StatusIs(StatusCode::kNotFound, HasSubstr("nope")));

  Result<tel::Meta> meta = r->GetMeta("new");
  ASSERT_THAT(meta, IsOk());
  EXPECT_EQ(Show(*meta), Show(SampleMeta("new", 1, 2500)));  // the latest one
  EXPECT_THAT(r->GetMeta("nope"), StatusIs(StatusCode::kNotFound));
  EXPECT_THAT(r->Messages("nope", kAll0, kAll1), StatusIs(StatusCode::kNotFound));
}

TEST(StoreReader, GetMetaIsNotFoundBeforeAnyMeta) {
  TempDir dir;
  std::string path = dir.File("runs.db");
  {
    auto w = MustOpenWriter(path);
    ASSERT_NE(w, nullptr);
    w->Enqueue(SampleSpans("r", 0, 10, 0, 2));
  }
  auto r = MustOpenReader(path);
  ASSERT_NE(r, nullptr);
  EXPECT_THAT(r->GetMeta("r"), StatusIs(StatusCode::kNotFound, HasSubstr("no meta")));
  Result<RunInfo> info = r->GetRun("r");
  ASSERT_THAT(info, IsOk());
  EXPECT_EQ(info->model, "");
  EXPECT_EQ(info->spans, 2);
}

// The requests stream: parent row per snapshot, running then waiting
// requests as children; lists come back split as they were sent.
TEST(StoreReader, RequestsSnapshotsKeepTheirTwoLists) {
  TempDir dir;
  std::string path = dir.File("runs.db");
  {
    auto w = MustOpenWriter(path);
    ASSERT_NE(w, nullptr);
    for (const auto& m : SampleRun("q")) w->Enqueue(m);
  }
  EXPECT_EQ(SqlText(path, "SELECT count(*) FROM request_snapshots"), "3");
  EXPECT_EQ(SqlText(path,
                    "SELECT group_concat(req_id || ':' || waiting, ' ') FROM "
                    "(SELECT req_id, waiting FROM request_progress ORDER BY snap, idx)"),
            "7:0 5:0 9:1 11:1 12:1");
  EXPECT_EQ(SqlText(path, "SELECT waiting_total FROM request_snapshots WHERE step = 2"), "302");
  auto r = MustOpenReader(path);
  ASSERT_NE(r, nullptr);
  Result<std::vector<tel::Message>> got = r->Messages("q", kAll0, kAll1);
  ASSERT_THAT(got, IsOk());
  std::vector<tel::Requests> snaps;
  for (const auto& m : *got) {
    if (const auto* q = std::get_if<tel::Requests>(&m)) snaps.push_back(*q);
  }
  ASSERT_EQ(snaps.size(), 3u);
  ASSERT_EQ(snaps[0].running.size(), 2u);
  EXPECT_EQ(snaps[0].running[0].id, 7);
  EXPECT_EQ(snaps[0].running[0].first_token_us, -1);
  EXPECT_EQ(snaps[0].running[1].computed, 60);
  ASSERT_EQ(snaps[0].waiting.size(), 1u);
  EXPECT_EQ(snaps[0].waiting[0].device, -1);
  EXPECT_TRUE(snaps[1].running.empty());
  EXPECT_TRUE(snaps[1].waiting.empty());
  EXPECT_TRUE(snaps[2].running.empty());
  EXPECT_EQ(snaps[2].waiting.size(), 2u);
  EXPECT_EQ(snaps[2].waiting_total, 302);
  // Losing a child row is reported, not replayed short.
  ASSERT_EQ(SqlText(path, "DELETE FROM request_progress WHERE req_id = 9"), "");
  EXPECT_THAT(r->Messages("q", kAll0, kAll1),
              StatusIs(StatusCode::kDataLoss,
                       AllOf(HasSubstr("request_snapshots row 1"), HasSubstr("2 of its 3"))));
}

TEST(StoreReader, TimeWindowIsHalfOpen) {
  TempDir dir;
  std::string path = dir.File("runs.db");
  std::vector<tel::Message> sent = SampleRun("w");
  {
    auto w = MustOpenWriter(path);
    ASSERT_NE(w, nullptr);
    for (const auto& m : sent) w->Enqueue(m);
    // Another run in the same window must not leak in.
    for (const auto& m : SampleRun("other")) w->Enqueue(m);
  }
  auto r = MustOpenReader(path);
  ASSERT_NE(r, nullptr);
  auto window = [&](int64_t from, int64_t to) {
    std::vector<tel::Message> want;
    for (const auto& m : sent) {
      int64_t t = tel::EnvelopeOf(m).t_us;
      if (from <= t && t < to) want.push_back(m);
    }
    return ReplayOrder(want);
  };
  for (auto [from, to] : std::vector<std::pair<int64_t, int64_t>>{
           {1000, 2000}, {1000, 2001}, {999, 1000}, {0, 1}, {2500, 2501}, {3001, 9000}}) {
    Result<std::vector<tel::Message>> got = r->Messages("w", from, to);
    ASSERT_THAT(got, IsOk());
    SCOPED_TRACE(std::to_string(from) + ".." + std::to_string(to));
    ExpectSameMessages(*got, window(from, to));
  }
  Result<std::vector<tel::Message>> one = r->Messages("w", 1000, 2000);
  ASSERT_THAT(one, IsOk());
  EXPECT_EQ(one->size(), 9u);
  Result<std::vector<tel::Message>> none = r->Messages("w", 3001, 9000);
  ASSERT_THAT(none, IsOk());
  EXPECT_TRUE(none->empty());
}

TEST(StoreReader, CommandRecordsRoundTrip) {
  TempDir dir;
  std::string path = dir.File("runs.db");
  CommandRecord a{"r1",
                  1500,
                  1700000000123,
                  "trace full",
                  R"({"id":1,"cmd":"trace","args":{"level":"full"}})",
                  true,
                  R"({"id":1,"ok":true,"result":{}})"};
  CommandRecord b{"r1",
                  0,
                  1700000000456,
                  "frobnicate",
                  R"({"id":2,"cmd":"frobnicate"})",
                  false,
                  "NOT_FOUND: unknown command 'frobnicate'"};
  CommandRecord orphan{"",
                       0,
                       1700000000001,
                       "status",
                       R"({"id":0,"cmd":"status"})",
                       false,
                       "UNAVAILABLE: no engine"};
  {
    auto w = MustOpenWriter(path);
    ASSERT_NE(w, nullptr);
    w->RecordCommand(orphan);
    w->Enqueue(SampleMeta("r1", 0, 0));
    w->RecordCommand(a);
    w->RecordCommand(b);
  }
  auto r = MustOpenReader(path);
  ASSERT_NE(r, nullptr);
  auto same = [](const CommandRecord& x, const CommandRecord& y) {
    return x.run == y.run && x.t_us == y.t_us && x.unix_ms == y.unix_ms && x.text == y.text &&
           x.request == y.request && x.ok == y.ok && x.reply == y.reply;
  };
  Result<std::vector<CommandRecord>> got = r->Commands("r1");
  ASSERT_THAT(got, IsOk());
  ASSERT_EQ(got->size(), 2u);
  EXPECT_TRUE(same((*got)[0], a));
  EXPECT_TRUE(same((*got)[1], b));
  Result<std::vector<CommandRecord>> none = r->Commands("");
  ASSERT_THAT(none, IsOk());
  ASSERT_EQ(none->size(), 1u);
  EXPECT_TRUE(same((*none)[0], orphan));
  EXPECT_THAT(r->Commands("r2"), StatusIs(StatusCode::kNotFound));
}

// Not a timing test: checks that a full-trace volume is stored and read back
// whole, in batches, with the default options.
TEST(StoreReader, FiftyThousandSpansRoundTrip) {
  TempDir dir;
  std::string path = dir.File("runs.db");
  constexpr int kMessages = 1000, kPerMessage = 50;
  {
    auto w = MustOpenWriter(path);
    ASSERT_NE(w, nullptr);
    for (int i = 0; i < kMessages; ++i) {
      w->Enqueue(SampleSpans("big", i, 100 * i, i, kPerMessage));
    }
    w->Flush();
    WriterCounters c = w->counters();
    EXPECT_EQ(c.written, kMessages);
    EXPECT_EQ(c.dropped, 0);
    EXPECT_EQ(c.queued, 0);
  }
  auto r = MustOpenReader(path);
  ASSERT_NE(r, nullptr);
  Result<RunInfo> info = r->GetRun("big");
  ASSERT_THAT(info, IsOk());
  EXPECT_EQ(info->spans, kMessages * kPerMessage);
  Result<std::vector<tel::Message>> got = r->Messages("big", kAll0, kAll1);
  ASSERT_THAT(got, IsOk());
  ASSERT_EQ(got->size(), static_cast<size_t>(kMessages));
  size_t spans = 0;
  for (size_t i = 0; i < got->size(); ++i) {
    const auto& s = std::get<tel::Spans>((*got)[i]);
    spans += s.spans.size();
    if (i % 97 == 0) {
      EXPECT_EQ(Show((*got)[i]), Show(SampleSpans("big", i, 100 * i, i, kPerMessage)));
    }
  }
  EXPECT_EQ(spans, static_cast<size_t>(kMessages * kPerMessage));
  EXPECT_EQ(SqlText(path, "SELECT count(*) FROM spans_v WHERE run_id = 'big'"), "50000");
}

}  // namespace
}  // namespace sy::store
