#include "engine/parallelism/calibrate.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "base/status_matchers.h"

namespace sy::engine {
namespace {

using ::testing::HasSubstr;

std::vector<std::string> Lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST(CalibrateTest, InterpolatesTheCrossoverBetweenBracketingPoints) {
  // Given out of order; d = tp - ep: -1, -0.5, +2, +7.
  Result<Calibration> c =
      FitCrossover({{128, 10.0, 8.0}, {1, 2.0, 3.0}, {256, 19.0, 12.0}, {64, 6.0, 6.5}});
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->kind, CrossoverKind::kCrossover);
  ASSERT_EQ(c->points.size(), 4u);
  EXPECT_EQ(c->points[0].batch, 1);
  EXPECT_EQ(c->points[3].batch, 256);
  EXPECT_EQ(c->lower_batch, 64);
  EXPECT_EQ(c->upper_batch, 128);
  EXPECT_DOUBLE_EQ(c->crossover_batch, 64 + 64 * 0.5 / 2.5);  // 76.8
  EXPECT_EQ(c->sign_changes, 1);
  EXPECT_TRUE(c->has_thresholds);
  EXPECT_EQ(c->t_high, 77);
  EXPECT_DOUBLE_EQ(c->t_low, 0.8 * 77);
  EXPECT_EQ(c->summary,
            "EP faster above batch 76.8 (interpolated between 64 and 128): T_h 77, T_l 61.6 "
            "(0.8 T_h).");
}

TEST(CalibrateTest, TieAtAPointPutsTheCrossoverExactlyThere) {
  Result<Calibration> c = FitCrossover({{16, 3.0, 4.0}, {32, 5.0, 5.0}, {64, 8.0, 6.0}});
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->kind, CrossoverKind::kCrossover);
  EXPECT_DOUBLE_EQ(c->crossover_batch, 32.0);
  EXPECT_EQ(c->t_high, 32);  // not 33: ceil of an exact integer
  EXPECT_EQ(c->lower_batch, 32);
}

TEST(CalibrateTest, LowRatioSetsTLow) {
  CalibrateOptions o;
  o.low_ratio = 0.5;
  Result<Calibration> c = FitCrossover({{1, 1.0, 2.0}, {10, 3.0, 2.0}}, o);
  ASSERT_THAT(c, IsOk());
  // d: -1 at 1, +1 at 10 -> 5.5 -> T_h 6, T_l 3.
  EXPECT_DOUBLE_EQ(c->crossover_batch, 5.5);
  EXPECT_EQ(c->t_high, 6);
  EXPECT_DOUBLE_EQ(c->t_low, 3.0);
  EXPECT_THAT(c->summary, HasSubstr("T_h 6, T_l 3 (0.5 T_h)"));
}

TEST(CalibrateTest, TpEverywhereGivesNoThresholds) {
  Result<Calibration> c = FitCrossover({{1, 1.0, 2.0}, {64, 3.0, 3.0}, {256, 9.0, 9.5}});
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->kind, CrossoverKind::kTpEverywhere);  // the tie counts for TP
  EXPECT_FALSE(c->has_thresholds);
  EXPECT_EQ(c->summary,
            "TP at least as fast at every measured batch (1 to 256): no crossover in range; "
            "measure larger batches or keep TP.");
}

TEST(CalibrateTest, EpEverywhereGivesNoThresholds) {
  Result<Calibration> c = FitCrossover({{8, 4.0, 2.0}, {64, 9.0, 3.0}});
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->kind, CrossoverKind::kEpEverywhere);
  EXPECT_FALSE(c->has_thresholds);
  EXPECT_THAT(c->summary, HasSubstr("EP faster at every measured batch (8 to 64)"));
  EXPECT_THAT(c->summary, HasSubstr("the crossover lies below batch 8"));
}

TEST(CalibrateTest, NoisyPointsTakeTheLastTpToEpCrossing) {
  // EP wins at 8 by noise, loses at 16, wins from 32 on.
  Result<Calibration> c =
      FitCrossover({{1, 1.0, 1.5}, {8, 2.0, 1.9}, {16, 3.0, 3.4}, {32, 5.0, 4.0}, {64, 9.0, 6.0}});
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->kind, CrossoverKind::kCrossover);
  EXPECT_EQ(c->sign_changes, 3);
  EXPECT_EQ(c->lower_batch, 16);
  EXPECT_EQ(c->upper_batch, 32);
  EXPECT_NEAR(c->crossover_batch, 16 + 16 * 0.4 / 1.4, 1e-9);
  EXPECT_EQ(c->t_high, 21);
  EXPECT_THAT(c->summary, HasSubstr("Noisy: the faster layout changes 3 times"));
  EXPECT_THAT(c->summary, HasSubstr("last TP->EP crossing"));
}

TEST(CalibrateTest, TpWinningAtTheTopIsUnstable) {
  Result<Calibration> c = FitCrossover({{1, 1.0, 2.0}, {8, 3.0, 2.0}, {16, 4.0, 4.5}});
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->kind, CrossoverKind::kUnstable);
  EXPECT_FALSE(c->has_thresholds);
  EXPECT_EQ(c->sign_changes, 2);
  EXPECT_THAT(c->summary, HasSubstr("TP faster at the largest measured batch 16 though EP is "
                                    "faster at 1 of 3 points: no stable crossover"));
}

TEST(CalibrateTest, RefusesBadInputPrecisely) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THAT(FitCrossover({}),
              StatusIs(StatusCode::kInvalidArgument,
                       "calibrate: need at least 2 points (batch, tp_ms, ep_ms), got 0"));
  EXPECT_THAT(FitCrossover({{8, 1.0, 1.0}}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("got 1")));
  EXPECT_THAT(FitCrossover({{8, 1.0, 1.0}, {0, 1.0, 1.0}}),
              StatusIs(StatusCode::kInvalidArgument, "calibrate: point 1: batch 0 must be >= 1"));
  EXPECT_THAT(FitCrossover({{-4, 1.0, 1.0}, {8, 1.0, 1.0}}),
              StatusIs(StatusCode::kInvalidArgument, "calibrate: point 0: batch -4 must be >= 1"));
  EXPECT_THAT(FitCrossover({{8, 1.0, 1.0}, {16, 0.0, 1.0}}),
              StatusIs(StatusCode::kInvalidArgument,
                       "calibrate: point 1 (batch 16): tp_ms 0 must be a finite latency > 0"));
  EXPECT_THAT(FitCrossover({{8, 1.0, nan}, {16, 1.0, 1.0}}),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("point 0 (batch 8): ep_ms nan must be a finite latency > 0")));
  EXPECT_THAT(FitCrossover({{8, 1.0, 2.0}, {16, 1.0, 1.0}, {8, 1.5, 1.0}}),
              StatusIs(StatusCode::kInvalidArgument,
                       "calibrate: batch 8 measured twice (points 0 and 2); average the runs "
                       "first"));
  CalibrateOptions o;
  o.low_ratio = 1.5;
  EXPECT_THAT(FitCrossover({{1, 1.0, 2.0}, {10, 3.0, 2.0}}, o),
              StatusIs(StatusCode::kInvalidArgument, "calibrate: low_ratio 1.5 must be in (0, 1]"));
}

TEST(CalibrateTest, TableShowsBothCurvesAndTheCrossover) {
  Result<Calibration> c = FitCrossover({{1, 2.0, 4.0}, {64, 6.0, 5.0}, {128, 8.0, 6.0}});
  ASSERT_THAT(c, IsOk());
  const std::vector<std::string> lines = Lines(FormatCalibrationTable(*c));
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_EQ(lines[0],
            "  batch      TP ms      EP ms  faster  TP/EP  step latency, 0 to 8.000 ms "
            "(T = TP, E = EP, * = both)");
  // Chart columns: round(v / 8 * 39): 2 -> 10, 4 -> 20, 6 -> 29, 5 -> 24, 8 -> 39, 6 -> 29.
  EXPECT_EQ(lines[1], "      1      2.000      4.000  tp       0.50  |" + std::string(10, ' ') +
                          "T" + std::string(9, ' ') + "E" + std::string(19, ' ') + "|");
  EXPECT_EQ(lines[2], "   43.0  --------------------------------- crossover: EP faster above");
  EXPECT_EQ(lines[3], "     64      6.000      5.000  ep       1.20  |" + std::string(24, ' ') +
                          "E" + std::string(4, ' ') + "T" + std::string(10, ' ') + "|");
  EXPECT_EQ(lines[4], "    128      8.000      6.000  ep       1.33  |" + std::string(29, ' ') +
                          "E" + std::string(9, ' ') + "T|");
  EXPECT_EQ(lines[5], c->summary);
}

TEST(CalibrateTest, TableMarksEqualLatenciesAndHasNoCrossoverRowWithoutOne) {
  Result<Calibration> c = FitCrossover({{1, 1.0, 1.0}, {2, 2.0, 3.0}});
  ASSERT_THAT(c, IsOk());
  const std::string table = FormatCalibrationTable(*c);
  EXPECT_THAT(table, HasSubstr("tie"));
  EXPECT_THAT(table, HasSubstr("*"));
  EXPECT_THAT(table, ::testing::Not(HasSubstr("crossover: EP faster above")));
}

TEST(CalibrateTest, JsonCarriesPointsFitAndNullsWhenNotFound) {
  Result<Calibration> c = FitCrossover({{1, 2.0, 4.0}, {64, 6.0, 5.0}});
  ASSERT_THAT(c, IsOk());
  const nlohmann::json j = nlohmann::json::parse(CalibrationToJson(*c));
  EXPECT_EQ(j["kind"], "crossover");
  ASSERT_EQ(j["points"].size(), 2u);
  EXPECT_EQ(j["points"][1]["batch"], 64);
  EXPECT_EQ(j["points"][1]["faster"], "ep");
  EXPECT_DOUBLE_EQ(j["points"][0]["ep_ms"].get<double>(), 4.0);
  EXPECT_DOUBLE_EQ(j["crossover_batch"].get<double>(), c->crossover_batch);
  EXPECT_EQ(j["t_high"], c->t_high);
  EXPECT_EQ(j["lower_batch"], 1);
  EXPECT_EQ(j["summary"], c->summary);

  c = FitCrossover({{1, 1.0, 2.0}, {64, 3.0, 4.0}});
  ASSERT_THAT(c, IsOk());
  const nlohmann::json none = nlohmann::json::parse(CalibrationToJson(*c));
  EXPECT_EQ(none["kind"], "tp_everywhere");
  EXPECT_TRUE(none["crossover_batch"].is_null());
  EXPECT_TRUE(none["t_high"].is_null());
  EXPECT_TRUE(none["t_low"].is_null());
}

}  // namespace
}  // namespace sy::engine
