// Console sessions (schema v5): a v4 file gains the sessions table and
// runs.session_id; every run one Writer records shares its session; moe-store
// list shows the session and show lists the sibling runs.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "base/status_matchers.h"
#include "store/schema.h"
#include "store/store.h"
#include "store/tool/cli.h"
#include "tests/store/store_test_util.h"

namespace sy::store {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using namespace ::sy::store::testing;

// A file as a v4 build left it, with one finished run.
void MakeV4Store(const std::string& path) {
  std::string sql;
  for (int v = 1; v <= 4; ++v) {
    sql += std::string(MigrationSql(v)) + "; PRAGMA user_version = " + std::to_string(v) + ";";
  }
  sql +=
      "INSERT INTO runs (rid, id, status, model, devices, created_unix_ms) "
      "VALUES (1, 'v4run', 1, 'tiny-moe', 2, 1700000000000);";
  ASSERT_EQ(SqlExec(path, sql), "");
}

void Record(Writer& w, const std::string& run) {
  for (const auto& m : SampleRun(run)) w.Enqueue(m);
}

std::string RunCliText(std::vector<std::string> args, int* code) {
  args.insert(args.begin(), "moe-store");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  *code = tool::RunCli(static_cast<int>(argv.size()), argv.data(), out, err,
                       [] { return Result<std::string>(NotFound("no default in tests")); });
  return out.str() + err.str();
}

TEST(StoreSessions, V4FileOpensAndGainsSessionColumn) {
  TempDir dir;
  const std::string path = dir.File("v4.db");
  MakeV4Store(path);
  EXPECT_THAT(Reader::Open(path),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("schema v4")));
  {
    WriterOptions o;
    o.session_hosts = "tcp://a:5555,tcp://b:5555";
    Result<std::unique_ptr<Writer>> w = Writer::Open(path, o);
    ASSERT_THAT(w, IsOk());
    Record(**w, "rank0");
    Record(**w, "rank1");
  }
  EXPECT_EQ(SqlText(path, "PRAGMA user_version"), std::to_string(kSchemaVersion));
  EXPECT_EQ(SqlText(path, "PRAGMA integrity_check"), "ok");
  // The old run has no session (NULL), the new ones one session between them.
  EXPECT_EQ(SqlText(path, "SELECT ifnull(session_id, 'null') FROM runs WHERE id = 'v4run'"),
            "null");
  EXPECT_EQ(SqlText(path, "SELECT count(*) FROM sessions"), "1");
  EXPECT_EQ(SqlText(path, "SELECT hosts FROM sessions"), "tcp://a:5555,tcp://b:5555");

  Result<std::unique_ptr<Reader>> r = Reader::Open(path);
  ASSERT_THAT(r, IsOk());
  Result<RunInfo> old = (*r)->GetRun("v4run");
  ASSERT_THAT(old, IsOk());
  EXPECT_EQ(old->session_id, 0);
  EXPECT_EQ(old->status, "ended");
  Result<RunInfo> a = (*r)->GetRun("rank0");
  Result<RunInfo> b = (*r)->GetRun("rank1");
  ASSERT_THAT(a, IsOk());
  ASSERT_THAT(b, IsOk());
  EXPECT_GT(a->session_id, 0);
  EXPECT_EQ(a->session_id, b->session_id);
}

TEST(StoreSessions, EachWriterIsItsOwnSessionAndARevivedRunMoves) {
  TempDir dir;
  const std::string path = dir.File("s.db");
  {
    auto w = Writer::Open(path);
    ASSERT_THAT(w, IsOk());
    Record(**w, "first");
    Record(**w, "kept");
  }
  {
    // A console restarted while engine "kept" ran on: the run is revived by
    // the new session; "first" stays in the old one.
    auto w = Writer::Open(path);
    ASSERT_THAT(w, IsOk());
    Record(**w, "second");
    (*w)->Enqueue(SampleMeta("kept", 99, 900000));
  }
  auto r = Reader::Open(path);
  ASSERT_THAT(r, IsOk());
  auto runs = (*r)->ListRuns();
  ASSERT_THAT(runs, IsOk());
  std::map<std::string, int64_t> session;
  for (const RunInfo& i : *runs) session[i.id] = i.session_id;
  EXPECT_GT(session["first"], 0);
  EXPECT_NE(session["first"], session["second"]);
  EXPECT_EQ(session["kept"], session["second"]);
  EXPECT_EQ(SqlText(path, "SELECT count(*) FROM sessions"), "2");
}

TEST(StoreSessions, ToolListShowsSessionAndShowListsSiblings) {
  TempDir dir;
  const std::string path = dir.File("t.db");
  MakeV4Store(path);
  {
    WriterOptions o;
    o.session_hosts = "tcp://p:5555,tcp://d:5555";
    auto w = Writer::Open(path, o);
    ASSERT_THAT(w, IsOk());
    Record(**w, "prefill-run");
    Record(**w, "decode-run");
  }
  const std::string sid = SqlText(path, "SELECT id FROM sessions");
  int code = -1;
  const std::string list = RunCliText({"--db", path, "list"}, &code);
  ASSERT_EQ(code, 0) << list;
  EXPECT_THAT(list, HasSubstr("SESSION"));
  std::istringstream in(list);
  int with_session = 0;
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string id, session;
    words >> id >> session;
    if (id == "prefill-run" || id == "decode-run") {
      EXPECT_EQ(session, sid) << line;
      ++with_session;
    }
    if (id == "v4run") {
      EXPECT_EQ(session, "-") << line;
    }
  }
  EXPECT_EQ(with_session, 2);

  const std::string show = RunCliText({"--db", path, "show", "prefill-run"}, &code);
  ASSERT_EQ(code, 0) << show;
  EXPECT_THAT(show, HasSubstr("session:      " + sid + ", started "));
  EXPECT_THAT(show, HasSubstr("tcp://p:5555,tcp://d:5555"));
  EXPECT_THAT(show, HasSubstr("siblings:     1"));
  EXPECT_THAT(show, HasSubstr("  decode-run"));
  EXPECT_THAT(show, Not(HasSubstr("  v4run")));

  const std::string old = RunCliText({"--db", path, "show", "v4run"}, &code);
  ASSERT_EQ(code, 0) << old;
  EXPECT_THAT(old, HasSubstr("session:      - (recorded before sessions)"));

  // Pruning every run of the session removes the session too.
  const std::string pruned = RunCliText({"--db", path, "prune", "--keep", "0"}, &code);
  ASSERT_EQ(code, 0) << pruned;
  EXPECT_EQ(SqlText(path, "SELECT count(*) FROM sessions"), "0");
}

}  // namespace
}  // namespace sy::store
