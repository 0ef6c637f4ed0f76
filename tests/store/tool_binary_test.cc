// The moe-store binary end to end: the default store path (the console's),
// list, export to standard output, and exit codes.

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "tests/store/tool_test_util.h"

namespace sy::store::tool {
namespace {

using ::sy::store::testing::FileBytes;
using ::sy::store::testing::SqlRows;
using ::sy::store::testing::TempDir;
using ::sy::store::testing::WriteStore;
using ::testing::HasSubstr;

struct Ran {
  int code = -1;
  std::string out, err;
};

// Runs moe-store with `args` and an environment of exactly `env`.
Ran RunStore(const TempDir& dir, std::vector<std::string> args, std::vector<std::string> env) {
  args.insert(args.begin(), MOE_STORE_BIN);
  const std::string out_path = dir.File("stdout"), err_path = dir.File("stderr");
  const pid_t pid = fork();
  if (pid == 0) {
    const int o = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(o, 1);
    dup2(e, 2);
    std::vector<char*> argv, envp;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& kv : env) envp.push_back(kv.data());
    envp.push_back(nullptr);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  Ran r;
  int status = 0;
  waitpid(pid, &status, 0);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = FileBytes(out_path);
  r.err = FileBytes(err_path);
  return r;
}

TEST(StoreToolBinary, ListsTheConsolesDefaultStore) {
  TempDir dir;
  // $HOME/.local/share/switchyard/runs.db, as store/paths.cc resolves it.
  const std::string home = dir.File("home");
  const std::string data = home + "/.local/share/switchyard";
  std::filesystem::create_directories(data);
  std::filesystem::rename(WriteStore(dir), data + "/runs.db");
  Ran r = RunStore(dir, {"list"}, {"HOME=" + home});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\nnew "));
  EXPECT_THAT(r.out, HasSubstr("\nold "));

  // XDG_DATA_HOME wins over HOME, SWITCHYARD_DB over both, --db over all.
  r = RunStore(dir, {"list"}, {"HOME=" + home, "XDG_DATA_HOME=" + dir.File("xdg")});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "moe-store: no store at " + dir.File("xdg") + "/switchyard/runs.db\n");
  r = RunStore(dir, {"list"}, {"HOME=/nonexistent", "SWITCHYARD_DB=" + data + "/runs.db"});
  EXPECT_EQ(r.code, 0) << r.err;
  r = RunStore(dir, {"--db", data + "/runs.db", "list"}, {"SWITCHYARD_DB=/nonexistent"});
  EXPECT_EQ(r.code, 0) << r.err;
  r = RunStore(dir, {"list"}, {});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("set SWITCHYARD_DB, XDG_DATA_HOME or HOME, or pass --db"));
}

TEST(StoreToolBinary, ExportsEverySpanToStandardOutput) {
  TempDir dir;
  const std::string path = WriteStore(dir);
  Ran r = RunStore(dir, {"--db", path, "export", "mid", "--format", "chrome-trace"}, {});
  ASSERT_EQ(r.code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out.substr(0, 300);
  std::multiset<std::pair<int64_t, int64_t>> got, want;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "X" && e["cat"] != "step") got.emplace(e["ts"], e["dur"]);
  }
  for (const auto& row :
       SqlRows(path, "SELECT start_us, dur_us FROM spans_v WHERE run_id = 'mid'")) {
    want.emplace(std::stoll(row[0]), std::stoll(row[1]));
  }
  EXPECT_EQ(got, want);
  EXPECT_EQ(got.size(), 43u);

  r = RunStore(dir, {"--db", path, "export", "ghost"}, {});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "moe-store: no run 'ghost' in " + path + "\n");
}

}  // namespace
}  // namespace sy::store::tool
