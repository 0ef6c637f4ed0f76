#include "console/term/terminal.h"

#include <algorithm>
#include <clocale>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <unistd.h>

#ifndef NCURSES_WIDECHAR
#define NCURSES_WIDECHAR 1
#endif
#include <ncursesw/curses.h>

namespace sy::console {
namespace {

int CursesColor(Color c) {
  switch (c) {
    case Color::kDefault:
      return -1;
    case Color::kBlack:
      return COLOR_BLACK;
    case Color::kRed:
      return COLOR_RED;
    case Color::kGreen:
      return COLOR_GREEN;
    case Color::kYellow:
      return COLOR_YELLOW;
    case Color::kBlue:
      return COLOR_BLUE;
    case Color::kMagenta:
      return COLOR_MAGENTA;
    case Color::kCyan:
      return COLOR_CYAN;
    case Color::kWhite:
      return COLOR_WHITE;
  }
  return -1;
}

attr_t CursesAttrs(uint8_t a) {
  attr_t out = A_NORMAL;
  if (a & kBold) out |= A_BOLD;
  if (a & kReverse) out |= A_REVERSE;
  if (a & kDim) out |= A_DIM;
  if (a & kUnderline) out |= A_UNDERLINE;
  return out;
}

std::string KeyName(wint_t ch, bool function_key) {
  if (function_key) {
    switch (ch) {
      case KEY_UP:
        return "Up";
      case KEY_DOWN:
        return "Down";
      case KEY_LEFT:
        return "Left";
      case KEY_RIGHT:
        return "Right";
      case KEY_HOME:
        return "Home";
      case KEY_END:
        return "End";
      case KEY_PPAGE:
        return "PageUp";
      case KEY_NPAGE:
        return "PageDown";
      case KEY_BACKSPACE:
        return "Backspace";
      case KEY_DC:
        return "Delete";
      case KEY_ENTER:
        return "Enter";
      case KEY_BTAB:
        return "BackTab";
      case KEY_RESIZE:
        return "Resize";
      default:
        return "F" + std::to_string(static_cast<int>(ch));
    }
  }
  switch (ch) {
    case '\t':
      return "Tab";
    case '\n':
    case '\r':
      return "Enter";
    case 27:
      return "Esc";
    case 127:
    case 8:
      return "Backspace";
    case ' ':
      return "Space";
    default:
      break;
  }
  if (ch < 0x20) return "Ctrl-" + std::string(1, static_cast<char>('A' + ch - 1));
  return EncodeUtf8(std::u32string(1, static_cast<char32_t>(ch)));
}

}  // namespace

Result<std::unique_ptr<Terminal>> Terminal::Open() {
  if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
    return FailedPrecondition("the console UI needs a terminal (use --headless to record)");
  }
  std::setlocale(LC_ALL, "");
  // newterm, unlike initscr, reports failure instead of exiting.
  screen* scr = newterm(nullptr, stdout, stdin);
  if (scr == nullptr) {
    const char* term = std::getenv("TERM");
    return FailedPrecondition(std::string("cannot start curses for TERM=") +
                              (term ? term : "(unset)"));
  }
  set_term(scr);
  cbreak();
  noecho();
  nonl();
  keypad(stdscr, TRUE);
  set_escdelay(25);
  curs_set(0);
  auto t = std::unique_ptr<Terminal>(new Terminal(scr));
  if (has_colors()) {
    start_color();
    use_default_colors();
    t->colors_ = true;
  }
  return t;
}

Terminal::Terminal(screen* scr) : screen_(scr) {}

Terminal::~Terminal() {
  curs_set(1);
  endwin();
  delscreen(screen_);
  std::fflush(stdout);
}

int Terminal::width() const { return getmaxx(stdscr); }
int Terminal::height() const { return getmaxy(stdscr); }

short Terminal::PairFor(Color fg, Color bg) {
  if (!colors_) return 0;
  const std::pair<int, int> key{CursesColor(fg), CursesColor(bg)};
  if (key.first == -1 && key.second == -1) return 0;
  if (auto it = pairs_.find(key); it != pairs_.end()) return it->second;
  const int next = static_cast<int>(pairs_.size()) + 1;
  // Terminals with few pairs fall back to the default pair rather than fail.
  if (next >= COLOR_PAIRS || next > 32767) return 0;
  init_pair(static_cast<short>(next), static_cast<short>(key.first),
            static_cast<short>(key.second));
  pairs_[key] = static_cast<short>(next);
  return static_cast<short>(next);
}

void Terminal::Draw(const Grid& g) {
  const int h = std::min(g.height(), height());
  const int w = std::min(g.width(), width());
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      const Cell& c = g.at(x, y);
      if (c.cont) continue;
      // A wide character that would hang over the right edge is blanked.
      const bool wide = x + 1 < g.width() && g.at(x + 1, y).cont;
      wchar_t text[2] = {static_cast<wchar_t>(wide && x + 1 >= w ? U' ' : c.ch), 0};
      cchar_t cc;
      setcchar(&cc, text, CursesAttrs(c.style.attrs), PairFor(c.style.fg, c.style.bg), nullptr);
      // Writing the bottom-right cell returns ERR (the cursor cannot advance);
      // the cell is still drawn.
      (void)mvwadd_wch(stdscr, y, x, &cc);
    }
  }
  wnoutrefresh(stdscr);
  doupdate();
}

std::optional<Key> Terminal::ReadKey(std::chrono::milliseconds timeout) {
  wtimeout(stdscr, static_cast<int>(timeout.count()));
  wint_t ch = 0;
  const int rc = wget_wch(stdscr, &ch);
  if (rc == ERR) return std::nullopt;
  return Key{KeyName(ch, rc == KEY_CODE_YES)};
}

}  // namespace sy::console
