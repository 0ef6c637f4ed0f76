// Writer behaviour on real files: commit timing (Flush), run status
// transitions, a writer killed mid-run, queue-full drops (by count and by
// bytes) and a full disk.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <limits>

#include "base/status_matchers.h"
#include "store/store.h"
#include "tests/store/store_test_util.h"

namespace sy::store {
namespace {

using ::testing::HasSubstr;
using namespace ::sy::store::testing;

constexpr int64_t kAll0 = std::numeric_limits<int64_t>::min();
constexpr int64_t kAll1 = std::numeric_limits<int64_t>::max();
// Long enough that the timer never fires within a test: only batch_max,
// Flush() or the destructor make the writer commit.
constexpr int kNever = 3600 * 1000;

std::unique_ptr<Writer> MustOpenWriter(const std::string& path, WriterOptions o = {}) {
  Result<std::unique_ptr<Writer>> w = Writer::Open(path, o);
  EXPECT_THAT(w, IsOk());
  return w.ok() ? std::move(w).value() : nullptr;
}

std::string Status(const std::string& path, const std::string& run) {
  Result<std::unique_ptr<Reader>> r = Reader::Open(path);
  if (!r.ok()) return r.status().ToString();
  Result<RunInfo> info = (*r)->GetRun(run);
  return info.ok() ? info->status : info.status().ToString();
}

size_t MessageCount(const std::string& path, const std::string& run) {
  Result<std::unique_ptr<Reader>> r = Reader::Open(path);
  EXPECT_THAT(r, IsOk());
  if (!r.ok()) return 0;
  Result<std::vector<tel::Message>> m = (*r)->Messages(run, kAll0, kAll1);
  EXPECT_THAT(m, IsOk());
  return m.ok() ? m->size() : 0;
}

TEST(StoreWriter, FlushCommitsEverythingEnqueuedBefore) {
  TempDir dir;
  std::string path = dir.File("runs.db");
  WriterOptions o;
  o.flush_ms = kNever;
  auto w = MustOpenWriter(path, o);
  ASSERT_NE(w, nullptr);
  for (int i = 0; i < 10; ++i) w->Enqueue(SampleSpans("f", i, i, i, 3));
  // Not committed yet: the run is not even visible to a Reader.
  EXPECT_EQ(w->counters().queued, 10);
  EXPECT_EQ(w->counters().written, 0);
  EXPECT_THAT(Status(path, "f"), HasSubstr("NOT_FOUND"));
  w->Flush();
  EXPECT_EQ(w->counters().written, 10);
  EXPECT_EQ(w->counters().queued, 0);
  EXPECT_EQ(MessageCount(path, "f"), 10u);
  EXPECT_EQ(Status(path, "f"), "live");
  w->Flush();  // nothing pending: returns at once
  EXPECT_THAT(w->status(), IsOk());
  EXPECT_EQ(w->path(), path);
}

TEST(StoreWriter, TimerCommitsWithoutFlush) {
  TempDir dir;
  std::string path = dir.File("runs.db");
  WriterOptions o;
  o.flush_ms = 5;
  auto w = MustOpenWriter(path, o);
  ASSERT_NE(w, nullptr);
  w->Enqueue(SampleMeta("t", 0, 0));
  // Polls rather than asserting a latency: the timer must fire eventually.
  for (int i = 0; i < 2000 && w->counters().written == 0; ++i) usleep(5000);
  EXPECT_EQ(w->counters().written, 1);
  EXPECT_EQ(MessageCount(path, "t"), 1u);
}

TEST(StoreWriter, RunStatusTransitions) {
  TempDir dir;
  std::string path = dir.File("runs.db");
  {
    auto w = MustOpenWriter(path);
    ASSERT_NE(w, nullptr);
    w->Enqueue(SampleMeta("normal", 0, 0));
    w->Enqueue(SampleMeta("lost", 0, 0));
    w->Enqueue(SampleMeta("stopped", 0, 0));
    w->Flush();
    EXPECT_EQ(Status(path, "normal"), "live");
    w->EndRun("lost", /*abnormal=*/true);
    w->EndRun("stopped", /*abnormal=*/false);
    w->EndRun("never-seen", /*abnormal=*/true);  // no row, no error
    w->Flush();
    EXPECT_EQ(Status(path, "lost"), "abnormal");
    EXPECT_EQ(Status(path, "stopped"), "ended");
    EXPECT_THAT(w->status(), IsOk());
  }
  EXPECT_EQ(Status(path, "normal"), "ended");   // by the destructor
  EXPECT_EQ(Status(path, "lost"), "abnormal");  // verdict kept
  EXPECT_EQ(Status(path, "stopped"), "ended");
  EXPECT_THAT(Status(path, "never-seen"), HasSubstr("NOT_FOUND"));
  {
    // A console restarted while the engine kept going: the run is live again.
    auto w = MustOpenWriter(path);
    ASSERT_NE(w, nullptr);
    w->Enqueue(SampleMeta("lost", 1, 5000));
    w->Flush();
    EXPECT_EQ(Status(path, "lost"), "live");
    EXPECT_EQ(Status(path, "normal"), "ended");  // untouched
  }
  EXPECT_EQ(Status(path, "lost"), "ended");
  EXPECT_EQ(MessageCount(path, "lost"), 2u);
}

// A child process opens a Writer, commits, and dies without any destructor.
// The next Writer::Open marks the run interrupted; nothing committed is lost.
TEST(StoreWriter, KilledWriterLeavesRunInterrupted) {
  TempDir dir;
  std::string path = dir.File("runs.db");
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    Result<std::unique_ptr<Writer>> w = Writer::Open(path);
    if (!w.ok()) _exit(2);
    for (const auto& m : SampleRun("killed")) (*w)->Enqueue(m);
    (*w)->Flush();
    for (int i = 0; i < 100; ++i) (*w)->Enqueue(SampleSpans("killed", 100 + i, 9000 + i, i, 4));
    raise(SIGKILL);
    _exit(3);
  }
  int wstatus = 0;
  ASSERT_EQ(waitpid(pid, &wstatus, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(wstatus)) << "child exited with " << WEXITSTATUS(wstatus);
  EXPECT_EQ(WTERMSIG(wstatus), SIGKILL);

  size_t committed = SampleRun("killed").size();
  EXPECT_EQ(Status(path, "killed"), "live");  // nobody has looked yet
  EXPECT_GE(MessageCount(path, "killed"), committed);
  {
    auto w = MustOpenWriter(path);
    ASSERT_NE(w, nullptr);
    EXPECT_EQ(Status(path, "killed"), "interrupted");
  }
  EXPECT_EQ(Status(path, "killed"), "interrupted");  // this Writer never touched it
  EXPECT_GE(MessageCount(path, "killed"), committed);
  EXPECT_EQ(SqlText(path, "PRAGMA integrity_check"), "ok");
}

// queue_capacity < batch_max and no timer: the thread cannot drain while we
// enqueue, so exactly capacity messages get in.
TEST(StoreWriter, FullQueueDropsAndCounts) {
  TempDir dir;
  std::string path = dir.File("runs.db");
  {
    WriterOptions o;
    o.queue_capacity = 5;
    o.batch_max = 100;
    o.flush_ms = kNever;
    auto w = MustOpenWriter(path, o);
    ASSERT_NE(w, nullptr);
    for (int i = 0; i < 12; ++i) w->Enqueue(SampleSpans("d", i, i, i, 1));
    WriterCounters c = w->counters();
    EXPECT_EQ(c.queued, 5);
    EXPECT_EQ(c.dropped, 7);
    EXPECT_EQ(c.written, 0);
    // Commands are not bounded by the queue: an operator's action is kept.
    w->RecordCommand(CommandRecord{"d", 0, 1, "pause", "{}", true, "{}"});
    w->Flush();
    c = w->counters();
    EXPECT_EQ(c.written, 6);
    EXPECT_EQ(c.dropped, 7);
    EXPECT_EQ(c.queued, 0);
    // Room again after the flush.
    w->Enqueue(SampleSpans("d", 12, 12, 12, 1));
    w->Flush();
    EXPECT_EQ(w->counters().written, 7);
  }
  Result<std::unique_ptr<Reader>> r = Reader::Open(path);
  ASSERT_THAT(r, IsOk());
  Result<RunInfo> info = (*r)->GetRun("d");
  ASSERT_THAT(info, IsOk());
  EXPECT_EQ(info->store_dropped, 7);
  EXPECT_EQ(info->spans, 6);
  EXPECT_EQ(MessageCount(path, "d"), 6u);
  Result<std::vector<CommandRecord>> cmds = (*r)->Commands("d");
  ASSERT_THAT(cmds, IsOk());
  EXPECT_EQ(cmds->size(), 1u);
}

// The byte cap, held the same way: no timer and batch_max above what fits,
// so nothing drains while we enqueue. Each 200-span message is estimated at
// a little over 200 * sizeof(Span), so a cap of 2.5 of those admits two.
TEST(StoreWriter, ByteCapDropsBigMessagesAndCounts) {
  TempDir dir;
  std::string path = dir.File("runs.db");
  constexpr int kSpans = 200;
  const size_t one = kSpans * sizeof(tel::Span);
  {
    WriterOptions o;
    o.queue_max_bytes = one * 5 / 2;
    o.batch_max = 100;
    o.flush_ms = kNever;
    auto w = MustOpenWriter(path, o);
    ASSERT_NE(w, nullptr);
    for (int i = 0; i < 6; ++i) w->Enqueue(SampleSpans("b", i, i, i, kSpans));
    WriterCounters c = w->counters();
    EXPECT_EQ(c.queued, 2);
    EXPECT_EQ(c.dropped, 4);
    EXPECT_EQ(c.written, 0);
    // A small message still fits in what is left; the message cap is far away.
    w->Enqueue(SampleSpans("b", 6, 6, 6, 1));
    EXPECT_EQ(w->counters().queued, 3);
    // Bigger than the whole cap: never admitted, even into an empty queue.
    w->Enqueue(SampleSpans("b", 7, 7, 7, 3 * kSpans));
    // Commands and EndRun are not bounded by bytes either.
    w->RecordCommand(CommandRecord{"b", 0, 1, "pause", "{}", true, "{}"});
    w->Flush();
    c = w->counters();
    EXPECT_EQ(c.written, 4);
    EXPECT_EQ(c.dropped, 5);
    EXPECT_EQ(c.queued, 0);
    // The committed batch released its bytes: two big ones fit again.
    for (int i = 8; i < 11; ++i) w->Enqueue(SampleSpans("b", i, i, i, kSpans));
    EXPECT_EQ(w->counters().queued, 2);
    EXPECT_EQ(w->counters().dropped, 6);
    w->Flush();
    EXPECT_EQ(w->counters().written, 6);
    w->Enqueue(SampleSpans("b", 7, 7, 7, 3 * kSpans));
    EXPECT_EQ(w->counters().dropped, 7);
    EXPECT_THAT(w->status(), IsOk());
  }
  Result<std::unique_ptr<Reader>> r = Reader::Open(path);
  ASSERT_THAT(r, IsOk());
  Result<RunInfo> info = (*r)->GetRun("b");
  ASSERT_THAT(info, IsOk());
  EXPECT_EQ(info->store_dropped, 7);
  EXPECT_EQ(info->spans, 4 * kSpans + 1);
  EXPECT_EQ(MessageCount(path, "b"), 5u);
  Result<std::vector<CommandRecord>> cmds = (*r)->Commands("b");
  ASSERT_THAT(cmds, IsOk());
  EXPECT_EQ(cmds->size(), 1u);
}

// A Requests snapshot weighs what its lists hold: a full one (256 running,
// 256 waiting) does not fit where a short one does.
TEST(StoreWriter, RequestsSnapshotsCountTowardTheByteCap) {
  TempDir dir;
  std::string path = dir.File("runs.db");
  {
    WriterOptions o;
    o.queue_max_bytes = 100 * sizeof(tel::RequestProgress);
    o.flush_ms = kNever;
    auto w = MustOpenWriter(path, o);
    ASSERT_NE(w, nullptr);
    tel::Requests big = SampleRequests("q", 0, 10, 1);
    for (int i = 0; i < 256; ++i) {
      big.running.push_back(SampleProgress(i, i % 2, 10, -1));
      big.waiting.push_back(SampleProgress(1000 + i, -1, 0, -1));
    }
    big.running_total = big.waiting_total = 256;
    w->Enqueue(big);
    EXPECT_EQ(w->counters().dropped, 1);
    w->Enqueue(SampleRequests("q", 1, 20, 0));
    w->Flush();
    EXPECT_EQ(w->counters().written, 1);
  }
  EXPECT_EQ(MessageCount(path, "q"), 1u);
}

// queue_max_bytes = 0 turns the byte cap off: only queue_capacity bounds.
TEST(StoreWriter, ZeroByteCapMeansNoByteBound) {
  TempDir dir;
  std::string path = dir.File("runs.db");
  WriterOptions o;
  o.queue_max_bytes = 0;
  o.queue_capacity = 3;
  o.batch_max = 100;
  o.flush_ms = kNever;
  auto w = MustOpenWriter(path, o);
  ASSERT_NE(w, nullptr);
  for (int i = 0; i < 4; ++i) w->Enqueue(SampleSpans("z", i, i, i, 1000));
  EXPECT_EQ(w->counters().queued, 3);
  EXPECT_EQ(w->counters().dropped, 1);
  w->Flush();
  EXPECT_EQ(w->counters().written, 3);
}

// A size cap (max_file_bytes) behaves like a full disk: deterministic.
TEST(StoreWriter, DiskFullStopsWritingKeepsCommittedData) {
  TempDir dir;
  std::string path = dir.File("runs.db");
  std::vector<tel::Message> first = SampleRun("full");
  {
    WriterOptions o;
    o.max_file_bytes = 512 * 1024;
    o.batch_max = 50;
    auto w = MustOpenWriter(path, o);
    ASSERT_NE(w, nullptr);
    for (const auto& m : first) w->Enqueue(m);
    w->Flush();
    ASSERT_THAT(w->status(), IsOk());
    ASSERT_EQ(w->counters().written, static_cast<int64_t>(first.size()));
    // ~100 bytes a span: 20k spans need several MiB.
    for (int i = 0; i < 400; ++i) w->Enqueue(SampleSpans("full", 10 + i, 10000 + i, i, 50));
    w->Flush();
    EXPECT_THAT(w->status(),
                StatusIs(StatusCode::kResourceExhausted, HasSubstr("disk full writing " + path)));
    WriterCounters c = w->counters();
    EXPECT_GT(c.dropped, 0);
    EXPECT_EQ(c.queued, 0);
    EXPECT_EQ(c.written + c.dropped, static_cast<int64_t>(first.size()) + 400);
    // Writing has stopped; later messages are counted, not queued.
    w->Enqueue(SampleMeta("full", 9, 99999));
    w->RecordCommand(CommandRecord{"full", 0, 1, "status", "{}", true, "{}"});
    EXPECT_EQ(w->counters().dropped, c.dropped + 2);
    EXPECT_EQ(w->counters().queued, 0);
    w->Flush();  // returns at once once writing stopped
  }
  EXPECT_EQ(SqlText(path, "PRAGMA integrity_check"), "ok");
  Result<std::unique_ptr<Reader>> r = Reader::Open(path);
  ASSERT_THAT(r, IsOk());
  Result<std::vector<tel::Message>> got = (*r)->Messages("full", kAll0, 10000);
  ASSERT_THAT(got, IsOk());
  ExpectSameMessages(*got, ReplayOrder(first));
  // Batches that did commit before the cap are whole messages.
  Result<std::vector<tel::Message>> later = (*r)->Messages("full", 10000, kAll1);
  ASSERT_THAT(later, IsOk());
  for (const auto& m : *later) EXPECT_EQ(std::get<tel::Spans>(m).spans.size(), 50u);
}

TEST(StoreWriter, SecondWriterOnSameFileIsRefused) {
  TempDir dir;
  std::string path = dir.File("runs.db");
  {
    auto first = MustOpenWriter(path);
    ASSERT_NE(first, nullptr);
    first->Enqueue(SampleMeta("mine", 0, 0));
    first->Flush();
    EXPECT_THAT(Writer::Open(path),
                StatusIs(StatusCode::kFailedPrecondition, HasSubstr("already open for writing")));
    // The refused Writer did not mark the first one's run interrupted.
    EXPECT_EQ(Status(path, "mine"), "live");
  }
  EXPECT_EQ(Status(path, "mine"), "ended");
  EXPECT_NE(MustOpenWriter(path), nullptr);  // free again
}

TEST(StoreWriter, WriterAndReaderShareALiveFile) {
  TempDir dir;
  std::string path = dir.File("runs.db");
  auto w = MustOpenWriter(path);
  ASSERT_NE(w, nullptr);
  w->Enqueue(SampleMeta("s", 0, 0));
  w->Flush();
  Result<std::unique_ptr<Reader>> r = Reader::Open(path);
  ASSERT_THAT(r, IsOk());
  for (int i = 1; i <= 3; ++i) {
    w->Enqueue(SampleSpans("s", i, i * 10, i, 2));
    w->Flush();
    Result<std::vector<tel::Message>> m = (*r)->Messages("s", kAll0, kAll1);
    ASSERT_THAT(m, IsOk());
    EXPECT_EQ(m->size(), static_cast<size_t>(1 + i));
  }
}

}  // namespace
}  // namespace sy::store
