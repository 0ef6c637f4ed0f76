// File: console/input/keymap.h
//
// The one table of key names and actions. Input handling looks keys up here
// and the `?` help overlay is rendered from the same table, so the help can
// never disagree with what a key does (btop's Input::process, as data).
//
// Key names are what console/term produces: a printable character as itself
// ("q", ":", "1", "+"), or a name: "Space", "Tab", "BackTab", "Enter", "Esc",
// "Backspace", "Delete", "Up", "Down", "Left", "Right", "Home", "End",
// "PageUp", "PageDown", "Resize", and "[" / "]".
//
// Thread-safety: immutable data.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace sy::console {

struct Key {
  std::string name;
  bool operator==(const Key&) const = default;
};

enum class Action {
  kViewOverview,
  kViewKernels,
  kViewMemory,
  kViewExperts,
  kViewLog,
  kViewRequests,
  kNextView,
  kPrevView,
  kCommandLine,
  kHelp,
  kQuit,
  kClose,
  kScrollUp,
  kScrollDown,
  kPageUp,
  kPageDown,
  kPrevLayer,  // Experts view: the layer whose slots are shown
  kNextLayer,
  kDebug,
  kNextEngine,  // several engines: engine 1, 2, ..., all (merged)
  kPrevEngine,
  kPlayPause,
  kFaster,
  kSlower,
  kSeekBack,
  kSeekForward,
  kSeekStart,
  kSeekEnd,
  kNextEvent,  // replay: jump to the next / previous stored event or command
  kPrevEvent,
  kFilter,        // `/` filter line (Requests, Log)
  kSortRequests,  // Requests: next sort order
  kLogKind,       // Log: next kind filter
  kOlderStep,     // Kernels: select the previous kept step
  kNewerStep,     // Kernels: the next one (past the newest: follow)
  kFollowStep,    // Kernels: follow the newest step
  kZoomIn,        // Kernels: lanes x2 / /2
  kZoomOut,
  kPanLeft,  // Kernels: move the zoomed window by half its width
  kPanRight,
  kKernelTable,  // Kernels: top kernels / by layer / by kind
};

enum class KeyScope { kAll, kReplay };

struct KeyBinding {
  std::string_view key;
  Action action;
  KeyScope scope;
  std::string_view help;
};

// Neighbouring entries with the same `help` are one row of the help overlay
// ("Up/Down  scroll up / down ..."), so pairs of keys cost one line.
std::span<const KeyBinding> KeyTable();
// The action bound to `key`; replay-only keys match only when `replay`.
std::optional<Action> LookupKey(std::string_view key, bool replay);

}  // namespace sy::console
