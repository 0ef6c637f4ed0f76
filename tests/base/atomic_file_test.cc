// AtomicFile on a real directory: the target keeps its old bytes until
// Commit, an abandoned write leaves nothing behind, and errors name the path.
#include "base/atomic_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/status_matchers.h"

namespace sy {
namespace {

using ::testing::HasSubstr;

std::string Slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class AtomicFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::path(::testing::TempDir()) / ("sy-atomic-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  size_t Entries() const {
    return static_cast<size_t>(std::distance(std::filesystem::directory_iterator(dir_),
                                             std::filesystem::directory_iterator()));
  }
  std::filesystem::path dir_;
};

TEST_F(AtomicFileTest, TargetChangesOnlyAtCommit) {
  const auto target = dir_ / "out.json";
  std::ofstream(target) << "old";
  {
    AtomicFile f(target.string());
    ASSERT_THAT(f.Create(), IsOk());
    ASSERT_THAT(f.Write("new bytes", 9), IsOk());
    EXPECT_EQ(Slurp(target), "old");
    EXPECT_EQ(Entries(), 2u);  // the target and the temporary file beside it
    ASSERT_THAT(f.Commit(), IsOk());
  }
  EXPECT_EQ(Slurp(target), "new bytes");
  EXPECT_EQ(Entries(), 1u);
}

TEST_F(AtomicFileTest, AbandonedWriteLeavesTheOldFileAndNoTemporary) {
  const auto target = dir_ / "out.json";
  std::ofstream(target) << "old";
  {
    AtomicFile f(target.string());
    ASSERT_THAT(f.Create(), IsOk());
    ASSERT_THAT(f.Write("half", 4), IsOk());
  }
  EXPECT_EQ(Slurp(target), "old");
  EXPECT_EQ(Entries(), 1u);
}

TEST_F(AtomicFileTest, ErrorsNameTheLabelAndPath) {
  const auto target = dir_ / "missing-dir" / "out.json";
  AtomicFile f(target.string(), "expert stats to ");
  EXPECT_THAT(f.Create(), StatusIs(StatusCode::kUnavailable,
                                   HasSubstr("writing expert stats to " + target.string() +
                                             ": cannot create a temporary file")));
}

}  // namespace
}  // namespace sy
