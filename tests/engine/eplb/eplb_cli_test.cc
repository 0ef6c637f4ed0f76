#include "engine/eplb/eplb_cli.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "base/status_matchers.h"

namespace sy::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A temp directory removed at scope exit.
class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::temp_directory_path() /
            ("eplb_cli_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string Write(const std::string& name, const std::string& text) const {
    const std::filesystem::path p = path_ / name;
    std::ofstream(p) << text;
    return p.string();
  }

 private:
  static inline int counter_ = 0;
  std::filesystem::path path_;
};

struct CliRun {
  int code;
  std::string out, err;
};

CliRun RunWith(std::vector<std::string> args) {
  args.insert(args.begin(), "moe-engine eplb");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  const int code = RunEplb(static_cast<int>(argv.size()), argv.data(), out, err);
  return {code, out.str(), err.str()};
}

const char kReadme[] =
    R"({"load": [[90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86],
                 [20, 107, 104, 64, 19, 197, 187, 157, 172, 86, 16, 27]],
        "window": 1000})";

TEST(EplbCliTest, RoundTripThroughAFile) {
  TempDir dir;
  const std::string path = dir.Write("load.json", kReadme);
  const CliRun r = RunWith(
      {"--stats", path, "--replicas", "16", "--groups", "4", "--nodes", "2", "--devices", "8"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  ASSERT_EQ(r.out.back(), '\n');
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["policy"], "hierarchical");
  ASSERT_EQ(j["phy2log"].size(), 2u);
  EXPECT_THAT(j["phy2log"][0].get<std::vector<int>>(),
              ElementsAre(5, 6, 5, 7, 8, 4, 3, 4, 10, 9, 10, 2, 0, 1, 11, 1));
  // Shapes: log2phy [2][12][max], logcnt [2][12], balancedness [2].
  ASSERT_EQ(j["log2phy"].size(), 2u);
  ASSERT_EQ(j["log2phy"][1].size(), 12u);
  ASSERT_EQ(j["logcnt"].size(), 2u);
  ASSERT_EQ(j["logcnt"][0].size(), 12u);
  ASSERT_EQ(j["balancedness"].size(), 2u);

  // The same placement as the library computes from the parsed file.
  Result<EplbLoad> load = ReadEplbLoadFile(path);
  ASSERT_THAT(load, IsOk());
  Result<EplbPlacement> p = RebalanceExperts(*load, EplbOptions{.num_replicas = 16,
                                                                .num_groups = 4,
                                                                .num_nodes = 2,
                                                                .num_devices = 8,
                                                                .policy = EplbPolicy::kAuto});
  ASSERT_THAT(p, IsOk());
  EXPECT_EQ(r.out, EplbPlacementJson(*p) + "\n");
  EXPECT_EQ(j["log2phy"].get<std::vector<std::vector<std::vector<int>>>>(), p->log2phy);
  EXPECT_EQ(j["logcnt"].get<std::vector<std::vector<int>>>(), p->logcnt);
  EXPECT_EQ(j["balancedness"].get<std::vector<double>>(), p->balancedness);
}

TEST(EplbCliTest, PolicyFlagAndDefaults) {
  TempDir dir;
  const std::string path = dir.Write("load.json", R"({"load": [[9, 1, 1, 1, 5, 5, 2, 0]]})");
  // --groups and --nodes default to 1: one group on one node.
  CliRun r = RunWith({"--stats", path, "--replicas", "12", "--devices", "4"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["policy"], "hierarchical");
  r = RunWith({"--stats", path, "--replicas", "12", "--devices", "4", "--policy", "global"});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["policy"], "global");
  EXPECT_EQ(j["phy2log"][0].size(), 12u);
  int total = 0;
  for (int c : j["logcnt"][0].get<std::vector<int>>()) total += c;
  EXPECT_EQ(total, 12);
}

TEST(EplbCliTest, BadUsageExitsTwo) {
  TempDir dir;
  const std::string path = dir.Write("load.json", R"({"load": [[1, 2, 3, 4]]})");
  CliRun r = RunWith({"--replicas", "4", "--devices", "2"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--stats"));
  r = RunWith({"--stats", path, "--replicas", "4", "--devices", "2", "--policy", "greedy"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("greedy"));
  r = RunWith({"--stats", path, "--replicas", "3", "--devices", "1"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--replicas (3) is less than the number of logical experts (4)"));
  r = RunWith({"--stats", path, "--replicas", "6", "--devices", "4"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--replicas (6) is not a multiple of --devices (4)"));
  r = RunWith({"--stats", path, "--replicas", "6", "--groups", "3", "--nodes", "2", "--devices",
               "2", "--policy", "hierarchical"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--groups (3) is not a multiple of --nodes (2)"));
  EXPECT_EQ(r.out, "");
}

TEST(EplbCliTest, HelpExitsZero) {
  const CliRun r = RunWith({"--help"});
  EXPECT_EQ(r.code, 0);
  EXPECT_THAT(r.out, HasSubstr("--replicas"));
}

TEST(EplbCliTest, BadInputNamesTheFileAndTheProblem) {
  TempDir dir;
  const auto run = [&](const std::string& text) {
    const std::string path = dir.Write("in.json", text);
    const CliRun r = RunWith({"--stats", path, "--replicas", "4", "--devices", "2"});
    EXPECT_EQ(r.code, 2) << text;
    EXPECT_THAT(r.err, HasSubstr(path)) << text;
    return r.err;
  };
  EXPECT_THAT(run("{\"load\": [[1, 2"), HasSubstr("not valid JSON"));
  EXPECT_THAT(run("[[1, 2]]"), HasSubstr("expected a JSON object"));
  EXPECT_THAT(run(R"({"lode": [[1, 2]]})"), HasSubstr("missing key \"load\""));
  EXPECT_THAT(run(R"({"load": 3})"), HasSubstr("\"load\" must be an array of layers, got number"));
  EXPECT_THAT(run(R"({"load": []})"), HasSubstr("\"load\" has no layers"));
  EXPECT_THAT(run(R"({"load": [3]})"), HasSubstr("load[0] must be an array"));
  EXPECT_THAT(run(R"({"load": [[]]})"), HasSubstr("load[0] has no experts"));
  EXPECT_THAT(run(R"({"load": [[1, 2], [1, 2, 3]]})"),
              HasSubstr("load[1] has 3 experts but load[0] has 2 (ragged matrix)"));
  EXPECT_THAT(run(R"({"load": [[1, "2"]]})"), HasSubstr("load[0][1] must be a number, got string"));
  EXPECT_THAT(run(R"({"load": [[1, true]]})"), HasSubstr("load[0][1] must be a number"));
  EXPECT_THAT(run(R"({"load": [[1, -2.5]]})"), HasSubstr("load[0][1] is negative"));

  const std::string missing =
      (std::filesystem::temp_directory_path() / "no_such_eplb.json").string();
  const CliRun r = RunWith({"--stats", missing, "--replicas", "4", "--devices", "2"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr(missing + ": cannot open"));
  EXPECT_THAT(ReadEplbLoadFile(missing), StatusIs(StatusCode::kNotFound));
}

TEST(EplbCliTest, ParseAcceptsIntegersAndFloats) {
  Result<EplbLoad> load = ParseEplbLoadJson(R"({"load": [[1, 2.5, 0], [0.25, 7, 3]]})", "x");
  ASSERT_THAT(load, IsOk());
  EXPECT_EQ(*load, (EplbLoad{{1, 2.5, 0}, {0.25, 7, 3}}));
}

}  // namespace
}  // namespace sy::engine
