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

TEST(ConsoleFormat, BytesInBinaryUnitsWithThreeDigits) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(1023), "1023 B");
  EXPECT_EQ(FormatBytes(1024), "1.00 KiB");
  EXPECT_EQ(FormatBytes(20480), "20.0 KiB");
  EXPECT_EQ(FormatBytes(448512), "438 KiB");
  EXPECT_EQ(FormatBytes(1023 * 1024), "1.00 MiB");  // rounds up a unit, not "1023 KiB"
  EXPECT_EQ(FormatBytes(int64_t{5} << 19), "2.50 MiB");
  EXPECT_EQ(FormatBytes(int64_t{3} << 30), "3.00 GiB");
  EXPECT_EQ(FormatBytes(int64_t{80} << 30), "80.0 GiB");
  EXPECT_EQ(FormatBytes(int64_t{1} << 50), "1.00 PiB");
  EXPECT_EQ(FormatBytes(int64_t{5000} << 50), "5000 PiB");  // no unit beyond PiB
}

TEST(ConsoleFormat, Padding) {
  EXPECT_EQ(PadLeft("ab", 4), "  ab");
  EXPECT_EQ(PadRight("ab", 4), "ab  ");
  EXPECT_EQ(PadRight("abcdef", 4), "abc…");
  EXPECT_EQ(PadLeft("x", 0), "");
}

}  // namespace
}  // namespace sy::console
