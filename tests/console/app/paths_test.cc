#include "store/paths.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/status_matchers.h"
#include "tests/console/app/test_store.h"

namespace sy::store {
namespace {

using ::sy::console::testing::TempDir;
using ::testing::HasSubstr;

// Each test runs in its own process under ctest, so changing the environment
// here does not leak into other tests.
TEST(ConsolePaths, SwitchyardDbThenXdgDataHomeThenHome) {
  setenv("SWITCHYARD_DB", "/runs/mine.db", 1);
  setenv("XDG_DATA_HOME", "/data", 1);
  setenv("HOME", "/home/u", 1);
  EXPECT_EQ(*DefaultDbPath(), "/runs/mine.db");
  setenv("SWITCHYARD_DB", "", 1);  // empty: not set
  EXPECT_EQ(*DefaultDbPath(), "/data/switchyard/runs.db");
  unsetenv("SWITCHYARD_DB");
  setenv("XDG_DATA_HOME", "/data", 1);
  setenv("HOME", "/home/u", 1);
  EXPECT_EQ(*DefaultDbPath(), "/data/switchyard/runs.db");
  unsetenv("XDG_DATA_HOME");
  EXPECT_EQ(*DefaultDbPath(), "/home/u/.local/share/switchyard/runs.db");
  setenv("XDG_DATA_HOME", "relative", 1);  // the spec says: ignore relative paths
  EXPECT_EQ(*DefaultDbPath(), "/home/u/.local/share/switchyard/runs.db");
  unsetenv("XDG_DATA_HOME");
  unsetenv("HOME");
  EXPECT_THAT(DefaultDbPath(), StatusIs(StatusCode::kFailedPrecondition, HasSubstr("--db")));
}

TEST(ConsolePaths, EnsureParentDirCreatesOrExplains) {
  TempDir dir;
  ASSERT_THAT(EnsureParentDir(dir / "a/b/c/runs.db"), IsOk());
  EXPECT_TRUE(std::filesystem::is_directory(dir.path() / "a/b/c"));
  ASSERT_THAT(EnsureParentDir("runs.db"), IsOk());  // current folder
  { std::ofstream(dir / "file") << "x"; }
  EXPECT_THAT(EnsureParentDir(dir / "file/runs.db"),
              StatusIs(StatusCode::kUnavailable, HasSubstr("cannot create folder")));
}

}  // namespace
}  // namespace sy::store
