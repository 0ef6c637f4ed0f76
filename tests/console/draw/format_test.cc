#include "console/draw/format.h"

#include <gtest/gtest.h>

namespace sy::console {
namespace {

TEST(ConsoleFormat, Durations) {
  EXPECT_EQ(FormatUs(0), "0us");
  EXPECT_EQ(FormatUs(999), "999us");
  EXPECT_EQ(FormatUs(1250), "1.25ms");
  EXPECT_EQ(FormatUs(3'400'000), "3.40s");
}

TEST(ConsoleFormat, CountsRatesPercents) {
  EXPECT_EQ(FormatCount(999), "999");
  EXPECT_EQ(FormatCount(2.5), "2.5");
  EXPECT_EQ(FormatCount(12'345), "12.3k");
  EXPECT_EQ(FormatCount(4'500'000), "4.5M");
  EXPECT_EQ(FormatRate(850), "850/s");
  EXPECT_EQ(FormatPercent(0.42), "42.0%");
}

TEST(ConsoleFormat, Padding) {
  EXPECT_EQ(PadLeft("ab", 4), "  ab");
  EXPECT_EQ(PadRight("ab", 4), "ab  ");
  EXPECT_EQ(PadRight("abcdef", 4), "abc…");
  EXPECT_EQ(PadLeft("x", 0), "");
}

}  // namespace
}  // namespace sy::console
