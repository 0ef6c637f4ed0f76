#include "console/draw/grid.h"

#include <gtest/gtest.h>

namespace sy::console {
namespace {

TEST(ConsoleGrid, PutClipsAtTheEdgeAndReturnsNextColumn) {
  Grid g(5, 2);
  EXPECT_EQ(g.Put(0, 0, "abc"), 3);
  g.Put(3, 0, "defgh");
  EXPECT_EQ(g.Row(0), "abcde");
  g.Put(1, 1, "xyz", {}, 3);  // explicit clip
  EXPECT_EQ(g.Row(1), " xy  ");
  g.Put(-2, 1, "12345");  // negative x: leading characters dropped
  EXPECT_EQ(g.Row(1), "345  ");
  g.Put(0, 7, "offgrid");  // no effect
  EXPECT_EQ(g.ToString(), "abcde\n345  ");
}

TEST(ConsoleGrid, WideCharactersTakeTwoCellsAndNeverHangOver) {
  Grid g(5, 1);
  EXPECT_EQ(g.Put(0, 0, "日本語"), 6);  // third one does not fit
  EXPECT_EQ(g.Row(0), "日本 ");
  EXPECT_TRUE(g.at(1, 0).cont);
  // Overwriting the right half of a wide character blanks its left half.
  g.Put(1, 0, "x");
  EXPECT_EQ(g.Row(0), " x本 ");
  EXPECT_EQ(DisplayWidth(g.Row(0)), 5);
}

TEST(ConsoleGrid, ControlCharactersAndBadUtf8AreMadeVisible) {
  Grid g(6, 1);
  g.Put(0, 0, std::string("a\tb\xff") + "c");
  EXPECT_EQ(g.Row(0), "a?b\uFFFDc ");
  EXPECT_EQ(DecodeUtf8("\xe2\x82"), U"\uFFFD\uFFFD");  // truncated sequence
  EXPECT_EQ(DecodeUtf8("\xc0\xaf"), U"\uFFFD\uFFFD");  // overlong '/'
  EXPECT_EQ(EncodeUtf8(DecodeUtf8("héllo ⣿ 日")), "héllo ⣿ 日");
}

TEST(ConsoleGrid, WidthsAndTruncation) {
  EXPECT_EQ(CharWidth(U'a'), 1);
  EXPECT_EQ(CharWidth(U'⣿'), 1);
  EXPECT_EQ(CharWidth(U'█'), 1);
  EXPECT_EQ(CharWidth(U'日'), 2);
  EXPECT_EQ(CharWidth(U'\u0301'), 0);
  EXPECT_EQ(DisplayWidth("ab日"), 4);
  EXPECT_EQ(TruncateToWidth("abcdef", 4), "abc…");
  EXPECT_EQ(TruncateToWidth("abcd", 4), "abcd");
  EXPECT_EQ(TruncateToWidth("日本語", 4), "日…");
  EXPECT_EQ(TruncateToWidth("abc", 0), "");
}

TEST(ConsoleGrid, BlitClipsAndKeepsStyles) {
  Grid src(3, 2);
  src.Put(0, 0, "abc", Style{Color::kRed, Color::kDefault, kBold});
  src.Put(0, 1, "def");
  Grid dst(4, 2);
  dst.Blit(src, 2, 1);
  EXPECT_EQ(dst.ToString(), "    \n  ab");
  EXPECT_EQ(dst.at(2, 1).style.fg, Color::kRed);
  Grid wide(2, 1);
  wide.Put(0, 0, "日");
  Grid narrow(3, 1);
  narrow.Blit(wide, 2, 0);  // would hang over: blanked
  EXPECT_EQ(narrow.Row(0), "   ");
  narrow.Blit(wide, -1, 0);  // left half clipped: right half blanked
  EXPECT_EQ(narrow.Row(0), "   ");
}

TEST(ConsoleGrid, FillAndRestyle) {
  Grid g(4, 3);
  g.Fill(Rect{1, 1, 10, 10}, U'#');
  EXPECT_EQ(g.ToString(), "    \n ###\n ###");
  g.Restyle(0, 1, 2, Style{Color::kGreen, Color::kDefault, 0});
  EXPECT_EQ(g.at(1, 1).style.fg, Color::kGreen);
  EXPECT_EQ(g.at(1, 1).ch, U'#');
}

TEST(ConsoleGrid, DegenerateSizes) {
  Grid g(-3, 0);
  EXPECT_EQ(g.width(), 0);
  g.Put(0, 0, "x");
  g.Fill(Rect{0, 0, 5, 5}, U'x');
  EXPECT_EQ(g.ToString(), "");
}

}  // namespace
}  // namespace sy::console
