// File: console/term/terminal.h
//
// Terminal: the only code in Switchyard that calls ncursesw. It owns curses
// mode for its lifetime (RAII: the destructor always restores the terminal),
// writes one finished Grid per frame, and reads keys as names (see
// console/input/keymap.h).
//
//   ASSIGN_OR_RETURN(auto term, Terminal::Open());
//   term->Draw(DrawFrame(snapshot, view, term->width(), term->height()));
//   std::optional<Key> k = term->ReadKey(100ms);  // "Resize" after SIGWINCH
//
// Frames are written without erase(): every cell is drawn, then one doupdate(),
// so ncurses sends only the difference and nothing flickers.
//
// Signals: SIGINT/SIGTERM are the application's business (console/app blocks
// them and waits for them on a thread), so the destructor runs on the normal
// exit path. Thread-safety: one thread (ncurses is not thread-safe).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "base/status.h"
#include "console/draw/grid.h"
#include "console/input/keymap.h"

struct screen;  // ncurses SCREEN

namespace sy::console {

class Terminal {
 public:
  // FAILED_PRECONDITION when stdin/stdout is not a terminal or curses cannot
  // start (unknown TERM).
  static Result<std::unique_ptr<Terminal>> Open();
  ~Terminal();
  Terminal(const Terminal&) = delete;
  Terminal& operator=(const Terminal&) = delete;

  int width() const;
  int height() const;
  // Writes the grid at (0,0), clipped to the screen, and refreshes once.
  void Draw(const Grid& g);
  // Waits up to `timeout` for a key. nullopt on timeout.
  std::optional<Key> ReadKey(std::chrono::milliseconds timeout);

 private:
  explicit Terminal(screen* scr);
  short PairFor(Color fg, Color bg);

  screen* screen_;
  bool colors_ = false;
  std::map<std::pair<int, int>, short> pairs_;
};

}  // namespace sy::console
