// File: console/draw/grid.h
//
// Grid: a rectangle of text cells that every panel draws into. Panels never
// call the terminal; the terminal layer (console/term/) writes one finished
// Grid per frame, and tests compare Grid text directly.
//
// Cells hold one Unicode scalar and a Style. A wide character (CJK, most
// emoji) takes two cells: the first holds the character, the second is a
// continuation cell (`cont`) that writers skip. Every write is clipped to the
// grid (and to an optional right edge), so nothing a panel does can overflow.
//
//   Grid g(80, 24);
//   int x = g.Put(0, 0, "run ", Style{});
//   g.Put(x, 0, run_id, Style{Color::kCyan, Color::kDefault, kBold});
//   std::string text = g.ToString();  // rows joined by '\n'
//
// Thread-safety: a value; no shared state.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sy::console {

// Terminal colours by role-free name; kDefault is the terminal's own colour.
enum class Color : uint8_t {
  kDefault,
  kBlack,
  kRed,
  kGreen,
  kYellow,
  kBlue,
  kMagenta,
  kCyan,
  kWhite
};

// Attribute bits, combined with |.
inline constexpr uint8_t kBold = 1;
inline constexpr uint8_t kReverse = 2;
inline constexpr uint8_t kDim = 4;
inline constexpr uint8_t kUnderline = 8;

struct Style {
  Color fg = Color::kDefault;
  Color bg = Color::kDefault;
  uint8_t attrs = 0;
  bool operator==(const Style&) const = default;
};

struct Cell {
  char32_t ch = U' ';
  Style style;
  bool cont = false;  // right half of a wide character
  bool operator==(const Cell&) const = default;
};

struct Rect {
  int x = 0;
  int y = 0;
  int w = 0;
  int h = 0;
};

// Display width of one scalar: 0 (combining, zero-width), 1 or 2 (wide).
// Control characters count 1 because Put() shows them as '?'.
int CharWidth(char32_t c);
// UTF-8 to scalars; an invalid byte becomes U+FFFD (never throws).
std::u32string DecodeUtf8(std::string_view s);
std::string EncodeUtf8(std::u32string_view s);
// Columns `s` (UTF-8) occupies.
int DisplayWidth(std::string_view s);
// The longest prefix of `s` that fits in `width` columns; adds "…" when cut
// and width allows.
std::string TruncateToWidth(std::string_view s, int width);

class Grid {
 public:
  // Negative sizes are treated as 0.
  Grid(int width, int height);

  int width() const { return width_; }
  int height() const { return height_; }
  // REQUIRES: 0 <= x < width(), 0 <= y < height().
  const Cell& at(int x, int y) const { return cells_[static_cast<size_t>(y) * width_ + x]; }

  // Writes UTF-8 text at (x, y), clipped at min(width(), clip_right).
  // Returns the column after the last written character (may exceed the
  // clip if the text was cut). Control characters show as '?'.
  int Put(int x, int y, std::string_view utf8, Style style = {}, int clip_right = 1 << 30);
  int Put(int x, int y, std::u32string_view text, Style style = {}, int clip_right = 1 << 30);
  // One scalar; returns the next column.
  int PutChar(int x, int y, char32_t c, Style style = {});
  // Sets the style of existing cells in [x, x+w) on row y, keeping characters.
  void Restyle(int x, int y, int w, Style style);
  void Fill(Rect r, char32_t c, Style style = {});
  // Copies `src` with its top-left at (x, y), clipped.
  void Blit(const Grid& src, int x, int y);

  // Row y as UTF-8 (continuation cells skipped, trailing spaces kept).
  std::string Row(int y) const;
  // All rows joined by '\n'.
  std::string ToString() const;

 private:
  void Set(int x, int y, const Cell& c);

  int width_;
  int height_;
  std::vector<Cell> cells_;
};

}  // namespace sy::console
