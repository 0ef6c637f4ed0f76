// File: console/app/controller.h
//
// Controller: the UI's decisions, without a terminal. It turns keys into
// changes of ViewState and into effects the caller carries out (quit, send a
// command to the engine, move the replay clock). Keeping it free of curses and
// sockets lets tests drive it key by key (":", "p", "a", ... "Enter").
//
// Key handling order: a pending y/n question, then the command line when
// open, then the help overlay (Esc/?/q close it), then the key table.
// Up/Down/PageUp/PageDown scroll the Experts view when it is shown, else the
// Log; '[' / ']' pick the Experts view's slot-map layer.
//
// Thread-safety: one thread (the UI thread).
#pragma once

#include <optional>
#include <string>
#include <utility>

#include "console/draw/view_state.h"
#include "console/input/command_line.h"
#include "console/input/keymap.h"

namespace sy::console {

enum class ReplayAction {
  kPlayPause,
  kFaster,
  kSlower,
  kSeekBack,
  kSeekForward,
  kSeekStart,
  kSeekEnd
};

struct Effects {
  bool quit = false;
  bool redraw = true;
  std::optional<ParsedCommand> send;  // an engine command to send now
  std::optional<ReplayAction> replay;
};

class Controller {
 public:
  explicit Controller(bool replay_mode);

  Effects HandleKey(const Key& key);
  // Shown on the command line row until the next command or key action.
  void SetMessage(std::string text, bool error);
  // Asks `question` (ending in "(y/n)") on the command line; 'y' sends
  // `command` (Effects::send), any other key drops it. Asked at once, or,
  // while the command line is open, once it closes, so keys typed there are
  // never taken as the answer, and after a question already on the line is
  // answered. A newer Ask() replaces one not yet shown.
  // Used for `:rebalance`: the plan's question arrives with the dry run's reply.
  void Ask(std::string question, ParsedCommand command);

  const ViewState& view() const { return view_; }
  ViewState& mutable_view() { return view_; }

 private:
  Effects HandleKeyInner(const Key& key);
  Effects Submit(const std::string& line);
  void SyncCommandLine();
  void PromoteDeferredQuestion();

  ViewState view_;
  CommandLineEditor editor_;
  std::optional<ParsedCommand> pending_confirm_;
  std::optional<std::pair<std::string, ParsedCommand>> deferred_;  // Ask() while typing
};

}  // namespace sy::console
