#include "console/draw/grid.h"

#include <algorithm>

namespace sy::console {
namespace {

struct Range {
  char32_t lo;
  char32_t hi;
};

// East Asian Wide/Fullwidth blocks and the emoji planes: enough for run ids,
// model names and messages; exotic scalars fall back to width 1.
constexpr Range kWide[] = {
    {0x1100, 0x115F},   {0x231A, 0x231B},   {0x2329, 0x232A},   {0x23E9, 0x23EC},
    {0x2E80, 0x303E},   {0x3041, 0x33FF},   {0x3400, 0x4DBF},   {0x4E00, 0x9FFF},
    {0xA000, 0xA4CF},   {0xA960, 0xA97F},   {0xAC00, 0xD7A3},   {0xF900, 0xFAFF},
    {0xFE10, 0xFE19},   {0xFE30, 0xFE6F},   {0xFF00, 0xFF60},   {0xFFE0, 0xFFE6},
    {0x1F300, 0x1F64F}, {0x1F680, 0x1F6FF}, {0x1F900, 0x1F9FF}, {0x20000, 0x2FFFD},
    {0x30000, 0x3FFFD},
};

constexpr Range kZero[] = {
    {0x0300, 0x036F}, {0x0483, 0x0489}, {0x0591, 0x05BD}, {0x0610, 0x061A},
    {0x200B, 0x200F}, {0x202A, 0x202E}, {0x2060, 0x2064}, {0x20D0, 0x20FF},
    {0xFE00, 0xFE0F}, {0xFE20, 0xFE2F}, {0xFEFF, 0xFEFF},
};

bool InRanges(char32_t c, const Range* begin, const Range* end) {
  return std::any_of(begin, end, [c](const Range& r) { return c >= r.lo && c <= r.hi; });
}

}  // namespace

int CharWidth(char32_t c) {
  if (c < 0x300) return 1;
  if (InRanges(c, std::begin(kZero), std::end(kZero))) return 0;
  if (InRanges(c, std::begin(kWide), std::end(kWide))) return 2;
  return 1;
}

std::u32string DecodeUtf8(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    int len = 0;
    char32_t cp = 0;
    if (b0 < 0x80) {
      len = 1;
      cp = b0;
    } else if ((b0 & 0xE0) == 0xC0) {
      len = 2;
      cp = b0 & 0x1F;
    } else if ((b0 & 0xF0) == 0xE0) {
      len = 3;
      cp = b0 & 0x0F;
    } else if ((b0 & 0xF8) == 0xF0) {
      len = 4;
      cp = b0 & 0x07;
    }
    bool ok = len > 0 && i + len <= s.size();
    for (int k = 1; ok && k < len; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if ((b & 0xC0) != 0x80) {
        ok = false;
      } else {
        cp = (cp << 6) | (b & 0x3F);
      }
    }
    // Reject overlong forms, surrogates and out-of-range scalars.
    if (ok && ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
               cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))) {
      ok = false;
    }
    if (ok) {
      out.push_back(cp);
      i += len;
    } else {
      out.push_back(U'\uFFFD');
      ++i;
    }
  }
  return out;
}

std::string EncodeUtf8(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) {
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else if (c < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (c >> 6)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else if (c < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (c >> 12)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (c >> 18)));
      out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    }
  }
  return out;
}

int DisplayWidth(std::string_view s) {
  int w = 0;
  for (char32_t c : DecodeUtf8(s)) w += CharWidth(c);
  return w;
}

std::string TruncateToWidth(std::string_view s, int width) {
  if (width <= 0) return "";
  const std::u32string u = DecodeUtf8(s);
  int total = 0;
  for (char32_t c : u) total += CharWidth(c);
  if (total <= width) return std::string(s);
  // Leave one column for the ellipsis.
  std::u32string out;
  int w = 0;
  for (char32_t c : u) {
    const int cw = CharWidth(c);
    if (w + cw > width - 1) break;
    out.push_back(c);
    w += cw;
  }
  out.push_back(U'…');
  return EncodeUtf8(out);
}

Grid::Grid(int width, int height)
    : width_(std::max(0, width)),
      height_(std::max(0, height)),
      cells_(static_cast<size_t>(width_) * height_) {}

void Grid::Set(int x, int y, const Cell& c) {
  Cell* row = &cells_[static_cast<size_t>(y) * width_];
  // Overwriting half of a wide character blanks the other half so no
  // orphaned continuation (or orphaned wide head) is left behind.
  if (row[x].cont && x > 0) row[x - 1] = Cell{U' ', row[x - 1].style, false};
  if (x + 1 < width_ && row[x + 1].cont && !c.cont)
    row[x + 1] = Cell{U' ', row[x + 1].style, false};
  row[x] = c;
}

int Grid::PutChar(int x, int y, char32_t c, Style style) {
  if (c < 0x20 || c == 0x7F || (c >= 0x80 && c < 0xA0)) c = U'?';
  const int cw = CharWidth(c);
  if (cw == 0) return x;  // combining marks are dropped: one scalar per cell
  if (y < 0 || y >= height_) return x + cw;
  if (x < 0 || x + cw > width_) return x + cw;
  Set(x, y, Cell{c, style, false});
  if (cw == 2) Set(x + 1, y, Cell{U' ', style, true});
  return x + cw;
}

int Grid::Put(int x, int y, std::u32string_view text, Style style, int clip_right) {
  const int right = std::min(width_, clip_right);
  for (char32_t c : text) {
    const int cw = CharWidth(c);
    if (x + cw > right) return x + cw;
    x = PutChar(x, y, c, style);
  }
  return x;
}

int Grid::Put(int x, int y, std::string_view utf8, Style style, int clip_right) {
  return Put(x, y, std::u32string_view(DecodeUtf8(utf8)), style, clip_right);
}

void Grid::Restyle(int x, int y, int w, Style style) {
  if (y < 0 || y >= height_) return;
  for (int i = std::max(0, x); i < std::min(width_, x + w); ++i) {
    cells_[static_cast<size_t>(y) * width_ + i].style = style;
  }
}

void Grid::Fill(Rect r, char32_t c, Style style) {
  for (int y = std::max(0, r.y); y < std::min(height_, r.y + r.h); ++y) {
    for (int x = std::max(0, r.x); x < std::min(width_, r.x + r.w);) {
      const int next = PutChar(x, y, c, style);
      x = next > x ? next : x + 1;
    }
  }
}

void Grid::Blit(const Grid& src, int x0, int y0) {
  for (int y = 0; y < src.height(); ++y) {
    const int ty = y0 + y;
    if (ty < 0 || ty >= height_) continue;
    for (int x = 0; x < src.width(); ++x) {
      const int tx = x0 + x;
      if (tx < 0 || tx >= width_) continue;
      const Cell& c = src.at(x, y);
      if (c.cont) {
        // A continuation whose head was clipped away becomes a blank.
        if (tx == 0 || x == 0) Set(tx, ty, Cell{U' ', c.style, false});
        continue;
      }
      const bool wide = x + 1 < src.width() && src.at(x + 1, y).cont;
      if (wide && tx + 1 >= width_) {
        Set(tx, ty, Cell{U' ', c.style, false});
        continue;
      }
      Set(tx, ty, c);
      if (wide) Set(tx + 1, ty, src.at(x + 1, y));
    }
  }
}

std::string Grid::Row(int y) const {
  std::u32string u;
  if (y < 0 || y >= height_) return "";
  for (int x = 0; x < width_; ++x) {
    const Cell& c = at(x, y);
    if (!c.cont) u.push_back(c.ch);
  }
  return EncodeUtf8(u);
}

std::string Grid::ToString() const {
  std::string out;
  for (int y = 0; y < height_; ++y) {
    if (y) out.push_back('\n');
    out += Row(y);
  }
  return out;
}

}  // namespace sy::console
