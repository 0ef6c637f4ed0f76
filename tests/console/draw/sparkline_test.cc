#include "console/draw/sparkline.h"

#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "console/draw/grid.h"

namespace sy::console {
namespace {

std::string U8(const std::u32string& s) { return EncodeUtf8(s); }

TEST(ConsoleSparkline, BlocksScaleToTheMaximum) {
  const std::vector<double> v = {0, 1, 2, 4, 8};
  EXPECT_EQ(U8(BlockSparkline(v, 5)), " ▁▂▄█");
  EXPECT_EQ(U8(BlockSparkline(v, 5, 16)), " ▁▁▂▄");  // fixed scale
}

TEST(ConsoleSparkline, NewestSamplesAtTheRightEdge) {
  const std::vector<double> v = {8, 8, 8, 1};
  EXPECT_EQ(U8(BlockSparkline(v, 2)), "█▁");      // only the last two fit
  EXPECT_EQ(U8(BlockSparkline(v, 6)), "  ███▁");  // short series padded on the left
}

TEST(ConsoleSparkline, BadSamplesAndSizes) {
  const std::vector<double> v = {-1, std::nan(""), std::numeric_limits<double>::infinity(), 2};
  EXPECT_EQ(U8(BlockSparkline(v, 4)), "   █");
  EXPECT_EQ(BlockSparkline(v, 0), U"");
  EXPECT_EQ(U8(BlockSparkline({}, 3)), "   ");
  EXPECT_EQ(U8(BlockSparkline(std::vector<double>{0, 0}, 2)), "  ");
  EXPECT_TRUE(BrailleChart(v, 0, 2).empty());
  EXPECT_TRUE(BrailleChart(v, 3, 0).empty());
}

TEST(ConsoleSparkline, BrailleTwoSamplesPerCellFourDotsPerRow) {
  // Two rows = 8 dot levels. Samples 8 (full) and 4 (half) in one cell.
  const std::vector<double> v = {8, 4};
  const auto rows = BrailleChart(v, 1, 2);
  ASSERT_EQ(rows.size(), 2u);
  // Top row: left column full (dots 1,2,3,7), right column empty.
  EXPECT_EQ(rows[0], std::u32string(1, U'\u2800' | 0x01 | 0x02 | 0x04 | 0x40));
  // Bottom row: both columns full.
  EXPECT_EQ(rows[1], U"⣿");
}

TEST(ConsoleSparkline, BrailleSmallPositiveValueStillVisible) {
  const std::vector<double> v = {1000, 1};
  const auto rows = BrailleChart(v, 1, 1);
  ASSERT_EQ(rows.size(), 1u);
  // Left column 4 dots, right column just the bottom dot (0x80).
  EXPECT_EQ(rows[0], std::u32string(1, U'\u2800' | 0x47 | 0x80));
}

TEST(ConsoleSparkline, BrailleWidthIsExact) {
  std::vector<double> v(100, 1.0);
  const auto rows = BrailleChart(v, 7, 3);
  ASSERT_EQ(rows.size(), 3u);
  for (const auto& r : rows) EXPECT_EQ(r.size(), 7u);
  EXPECT_EQ(rows[0], std::u32string(7, U'⣿'));
}

}  // namespace
}  // namespace sy::console
