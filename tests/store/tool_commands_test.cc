// moe-store list, show, prune, vacuum, check and the error paths of every
// command, run in-process through RunCli on real store files.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/status_matchers.h"
#include "store/tool/cli.h"
#include "tests/store/tool_test_util.h"

namespace sy::store::tool {
namespace {

using ::sy::store::testing::FileBytes;
using ::sy::store::testing::SqlExec;
using ::sy::store::testing::SqlRows;
using ::sy::store::testing::SqlText;
using ::sy::store::testing::TempDir;
using ::sy::store::testing::WriteStore;
using ::testing::AllOf;
using ::testing::AnyOf;
using ::testing::HasSubstr;

struct Ran {
  int code = -1;
  std::string out, err;
};

Ran Cli(std::vector<std::string> args) {
  args.insert(args.begin(), "moe-store");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  Ran r;
  r.code = RunCli(static_cast<int>(argv.size()), argv.data(), out, err,
                  [] { return Result<std::string>(NotFound("no default in tests")); });
  r.out = out.str();
  r.err = err.str();
  return r;
}

// The line of `text` that starts with `prefix`.
std::string LineOf(const std::string& text, const std::string& prefix) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) == 0) return line;
  }
  return "";
}

TEST(StoreToolCommands, ListShowsOneRowPerRunNewestFirst) {
  TempDir dir;
  std::string path = WriteStore(dir);
  Ran r = Cli({"--db", path, "list"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("RUN"));
  EXPECT_THAT(r.out, HasSubstr("LAYOUTS"));
  const size_t n = r.out.find("\nnew "), m = r.out.find("\nmid "), o = r.out.find("\nold ");
  ASSERT_NE(n, std::string::npos) << r.out;
  EXPECT_LT(n, m);
  EXPECT_LT(m, o);
  // new: 4 steps of 14 spans and a 15th in step 0; EP then TP; 1 switch, 1 rebalance (the "auto"
  // done and the "planned" do not count); ended normally.
  EXPECT_THAT(LineOf(r.out, "new "),
              AllOf(HasSubstr("tiny-moe"), HasSubstr(" EP>TP "), HasSubstr(" 1  "),
                    HasSubstr(" 57  "), HasSubstr("normal")));
  EXPECT_THAT(LineOf(r.out, "old "),
              AllOf(HasSubstr(" EP "), HasSubstr(" 29  "), HasSubstr("abnormal")));
  EXPECT_EQ(r.err, "");
}

TEST(StoreToolCommands, ListOfAnEmptyStore) {
  TempDir dir;
  std::string path = dir.File("empty.db");
  { ASSERT_THAT(Writer::Open(path), IsOk()); }
  Ran r = Cli({"--db", path, "list"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("(no runs)"));
}

TEST(StoreToolCommands, ShowGivesMetadataRowsAndEvents) {
  TempDir dir;
  std::string path = WriteStore(dir);
  Ran r = Cli({"--db", path, "show", "mid", "--events", "3"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("run:          mid"));
  EXPECT_THAT(r.out, HasSubstr("layouts:      EP > TP"));
  EXPECT_THAT(r.out, HasSubstr("switches:     1"));
  EXPECT_THAT(r.out, HasSubstr("rebalances:   1"));
  EXPECT_THAT(r.out, HasSubstr("trace:        full"));
  EXPECT_THAT(LineOf(r.out, "  spans "), HasSubstr(" 43"));
  EXPECT_THAT(LineOf(r.out, "  steps "), HasSubstr(" 3"));
  EXPECT_THAT(LineOf(r.out, "  occupancy_devices "), HasSubstr(" 6"));
  EXPECT_THAT(LineOf(r.out, "  commands "), HasSubstr(" 1"));
  EXPECT_THAT(r.out, HasSubstr("events (3 of 7)"));
  EXPECT_THAT(r.out, HasSubstr("lifecycle start: lifecycle start"));
  EXPECT_THAT(r.out, HasSubstr("switch tp -> ok"));

  r = Cli({"--db", path, "show", "nope"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "moe-store: no run 'nope' in " + path + "\n");
  EXPECT_EQ(r.out, "");
}

TEST(StoreToolCommands, PruneKeepsTheNewestInOneGo) {
  TempDir dir;
  std::string path = WriteStore(dir);
  const std::string new_rows = SqlText(path, "SELECT count(*) FROM spans_v WHERE run_id = 'new'");
  Ran r = Cli({"--db", path, "prune", "--keep", "1"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("kept 1 run(s), deleted 2"));
  EXPECT_THAT(r.out, HasSubstr("deleted mid"));
  EXPECT_THAT(r.out, HasSubstr("deleted old"));
  EXPECT_THAT(r.out, HasSubstr("  spans 72\n"));  // 43 + 29
  EXPECT_THAT(r.out, HasSubstr("  runs 2\n"));
  EXPECT_EQ(SqlText(path, "SELECT group_concat(id) FROM runs"), "new");
  EXPECT_EQ(SqlText(path, "SELECT count(*) FROM spans_v WHERE run_id = 'new'"), new_rows);
  // No row of the deleted runs is left anywhere.
  for (const char* t : {"metas", "steps", "span_batches", "spans", "kstat_batches", "kernel_stats",
                        "occupancy", "occupancy_devices", "expert_load", "requests", "events",
                        "heartbeats", "request_snapshots", "request_progress"}) {
    EXPECT_EQ(SqlText(path, std::string("SELECT count(*) FROM ") + t +
                                " WHERE run NOT IN (SELECT rid FROM runs)"),
              "0")
        << t;
  }
  // The command recorded with no run stays.
  EXPECT_EQ(SqlText(path, "SELECT count(*) FROM commands WHERE run IS NULL"), "1");
  EXPECT_EQ(Cli({"--db", path, "check"}).code, 0);

  r = Cli({"--db", path, "prune", "--keep", "5"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("kept 1 run(s), deleted 0"));
  r = Cli({"--db", path, "prune", "--keep", "0"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(SqlText(path, "SELECT count(*) FROM runs"), "0");
  EXPECT_EQ(SqlText(path, "SELECT count(*) FROM spans"), "0");
}

TEST(StoreToolCommands, PruneRefusesWhileAConsoleRecordsAndOnBadFlags) {
  TempDir dir;
  std::string path = WriteStore(dir);
  {
    auto w = Writer::Open(path);
    ASSERT_THAT(w, IsOk());
    Ran r = Cli({"--db", path, "prune", "--keep", "1"});
    EXPECT_EQ(r.code, 1);
    EXPECT_THAT(r.err, HasSubstr("is open for writing"));
    r = Cli({"--db", path, "vacuum"});
    EXPECT_EQ(r.code, 1);
    EXPECT_THAT(r.err, HasSubstr("is open for writing"));
  }
  EXPECT_EQ(SqlText(path, "SELECT count(*) FROM runs"), "3");
  const std::string closed = FileBytes(path);
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"prune", "--keep", "-1"}, {"prune"}, {"prune", "--keep", "x"}}) {
    std::vector<std::string> a = {"--db", path};
    a.insert(a.end(), args.begin(), args.end());
    Ran r = Cli(a);
    EXPECT_EQ(r.code, 2) << args.size();
    EXPECT_NE(r.err, "");
    if (args.size() == 3 && args[2] == "-1") {
      EXPECT_THAT(r.err, HasSubstr("--keep: Value -1 must be >= 0\n"));
    }
  }
  EXPECT_EQ(FileBytes(path), closed) << "a refused prune changed the file";
}

TEST(StoreToolCommands, VacuumShrinksAfterPrune) {
  TempDir dir;
  std::string path = dir.File("big.db");
  {
    auto w = Writer::Open(path);
    ASSERT_THAT(w, IsOk());
    testing::WriteRun(**w, "a", 1700000000000, 400, false);
    testing::WriteRun(**w, "b", 1700000100000, 2, false);
  }
  ASSERT_EQ(Cli({"--db", path, "prune", "--keep", "1"}).code, 0);
  const auto before = std::filesystem::file_size(path);
  Ran r = Cli({"--db", path, "vacuum"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("vacuumed " + path));
  EXPECT_LT(std::filesystem::file_size(path), before / 2);
  EXPECT_EQ(SqlText(path, "SELECT group_concat(id) FROM runs"), "b");
  EXPECT_EQ(Cli({"--db", path, "check"}).code, 0);
}

TEST(StoreToolCommands, CheckReportsRowsAndFailsOnDamage) {
  TempDir dir;
  std::string path = WriteStore(dir);
  Ran r = Cli({"--db", path, "check"});
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_THAT(r.out, HasSubstr("integrity_check: ok"));
  EXPECT_THAT(LineOf(r.out, "  spans "), HasSubstr(" 129"));  // 57 + 43 + 29
  EXPECT_THAT(LineOf(r.out, "  runs "), HasSubstr(" 3"));
  EXPECT_THAT(LineOf(r.out, "  store_info "), HasSubstr(" 2"));
  EXPECT_THAT(r.out, HasSubstr("check: ok"));

  // Counters that disagree with the rows.
  ASSERT_EQ(SqlExec(path, "UPDATE runs SET n_spans = n_spans + 1 WHERE id = 'mid'"), "");
  r = Cli({"--db", path, "check"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.out, HasSubstr("runs.n_spans adds up to 130 but the table holds 129 rows"));
  EXPECT_THAT(r.out, HasSubstr("check: FAILED"));
}

TEST(StoreToolCommands, CheckFailsOnACorruptFile) {
  TempDir dir;
  std::string path = WriteStore(dir);
  ASSERT_EQ(SqlExec(path, "PRAGMA journal_mode = DELETE"), "");  // fold the WAL in
  std::string bytes = FileBytes(path);
  ASSERT_GT(bytes.size(), 8192u);
  // Scribble over every page but the first (the header and schema).
  const size_t page = 4096;
  for (size_t off = page + 100; off + 64 < bytes.size(); off += page) {
    for (size_t i = 0; i < 64; ++i) bytes[off + i] = static_cast<char>(0xA5 ^ i);
  }
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << bytes;
  }
  Ran r = Cli({"--db", path, "check"});
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_THAT(r.out + r.err, AnyOf(HasSubstr("check: FAILED"), HasSubstr("malformed")));
}

TEST(StoreToolCommands, ErrorsArePreciseWithExitCode2) {
  TempDir dir;
  std::string path = WriteStore(dir);
  const std::string missing = dir.File("nope.db");
  Ran r = Cli({"--db", missing, "list"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "moe-store: no store at " + missing + "\n");
  EXPECT_FALSE(std::filesystem::exists(missing)) << "a missing store must not be created";

  r = Cli({"--db", path, "export", "new", "--format", "pprof"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "moe-store: unknown export format 'pprof'; known: chrome-trace\n");
  EXPECT_EQ(r.out, "");

  r = Cli({"--db", path, "export", "new", "--from", "3", "--to", "1"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--from 3.000000 is after --to 1.000000"));
  EXPECT_EQ(r.out, "");

  r = Cli({"--db", path, "export", "new", "--from", "-1"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--from must be a number of seconds >= 0"));

  const std::string out_file = dir.File("trace.json");
  r = Cli({"--db", path, "export", "ghost", "--out", out_file});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "moe-store: no run 'ghost' in " + path + "\n");
  EXPECT_FALSE(std::filesystem::exists(out_file));

  r = Cli({"--db", path});
  EXPECT_EQ(r.code, 2) << "a command is required";
  r = Cli({"--db", path, "fly"});
  EXPECT_EQ(r.code, 2);
  r = Cli({"list"});  // no --db and no default
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("no default in tests"));

  std::string garbage = dir.File("garbage.db");
  { std::ofstream(garbage) << "this is not a database, just text that is long enough....."; }
  r = Cli({"--db", garbage, "list"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("is not a SQLite database"));

  r = Cli({"--help"});
  EXPECT_EQ(r.code, 0);
  EXPECT_THAT(r.out, HasSubstr("export"));
}

TEST(StoreToolCommands, ExportToFileAndWindowInSeconds) {
  TempDir dir;
  std::string path = WriteStore(dir);
  const std::string out_file = dir.File("trace.json");
  Ran r = Cli({"--db", path, "export", "new", "--format", "chrome-trace", "--from", "0.025", "--to",
               "0.026", "--out", out_file});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(r.err, HasSubstr("wrote " + out_file));
  nlohmann::json j = nlohmann::json::parse(FileBytes(out_file), nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(j["otherData"]["from_us"], 25000);
  EXPECT_EQ(j["otherData"]["to_us"], 26000);
  int spans = 0;
  for (const auto& e : j["traceEvents"]) spans += e["ph"] == "X" && e["cat"] != "step";
  // [25000, 26000]: expert_ffn and mark of both devices, overlap_a on device 0.
  EXPECT_EQ(spans, 5);
}

}  // namespace
}  // namespace sy::store::tool
