// File: console/app/controller.h
//
// Controller: the UI's decisions, without a terminal. It turns keys into
// changes of ViewState and into effects the caller carries out (quit, send a
// command to the engine, move the replay clock). Keeping it free of curses and
// sockets lets tests drive it key by key (":", "p", "a", ... "Enter").
//
// Key handling order: a pending y/n question, then the command line when
// open, then the help overlay (Esc/?/q close it), then the key table.
//
// Thread-safety: one thread (the UI thread).
#pragma once

#include <optional>
#include <string>

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

  const ViewState& view() const { return view_; }
  ViewState& mutable_view() { return view_; }

 private:
  Effects Submit(const std::string& line);
  void SyncCommandLine();

  ViewState view_;
  CommandLineEditor editor_;
  std::optional<ParsedCommand> pending_confirm_;
};

}  // namespace sy::console
