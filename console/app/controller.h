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
// `/` (Requests and Log views) opens a filter line edited like the command
// line (its own history; no completion): Enter applies it to that view
// (empty clears), Esc leaves the old filter. 's' cycles the Requests sort,
// 'k' the Log's kind filter; in the Kernels view ',' / '.' pick an older /
// newer kept step (past the newest: follow it again), 'f' follows the
// newest, 'z' / 'Z' zoom the lanes in / out, '{' / '}' pan them, 'g' cycles
// the table. These view keys pressed in another view only say where they
// act.
//
// Several engines (view().engine_count > 1, set by the caller through
// mutable_view()): 'e' / 'E' and `:engine N|all` pick the engine shown and
// commanded, or all. With all selected, ordinary commands go to every
// engine; disruptive ones (those that ask y/n) and `:rebalance` previews are
// refused until one engine is picked, so one keystroke never stops or
// reshapes every engine at once.
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
  kSeekEnd,
  kNextEvent,  // the nearest stored event or command after / before the position
  kPrevEvent
};

struct Effects {
  bool quit = false;
  bool redraw = true;
  std::optional<ParsedCommand> send;  // an engine command to send now
  // With `send`, several engines: the engine to send it to (0-based), or -1
  // for every engine. Always -1 with one engine.
  int engine = -1;
  std::optional<ReplayAction> replay;
  // Replay: a local `:seek` or `:compare` (console/input/replay_commands.h)
  // for the replay loop to carry out.
  std::optional<ParsedCommand> replay_command;
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
  // The same, for a question one engine raised: 'y' sends to `engine`.
  void Ask(std::string question, ParsedCommand command, int engine);

  const ViewState& view() const { return view_; }
  ViewState& mutable_view() { return view_; }

 private:
  Effects HandleKeyInner(const Key& key);
  Effects Submit(const std::string& line);
  void SyncCommandLine();
  void PromoteDeferredQuestion();
  // `:engine N|all` and the engine keys (engine_select.cc).
  void SelectEngine(int engine);
  // Where an engine command typed now goes; false (and a message) when it
  // must not go to all engines.
  bool RouteCommand(const ParsedCommand& cmd, int& engine);

  // The `/` filter line and the view keys of the Requests, Log and Kernels
  // views (view_keys.cc).
  Effects HandleFilterKey(const Key& key);
  void HandleViewAction(Action action);

  ViewState view_;
  CommandLineEditor editor_;
  CommandLineEditor filter_editor_{/*complete=*/false};
  View filter_view_ = View::kRequests;  // the view the open `/` line filters
  std::optional<ParsedCommand> pending_confirm_;
  std::optional<std::pair<std::string, ParsedCommand>> deferred_;  // Ask() while typing
  int pending_engine_ = -1;                                        // where pending_confirm_ goes
  int deferred_engine_ = -1;                                       // where deferred_ goes
};

}  // namespace sy::console
