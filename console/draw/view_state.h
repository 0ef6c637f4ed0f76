// File: console/draw/view_state.h
//
// ViewState: what the user has chosen to look at (current view, overlays,
// scroll, command line contents, messages). Owned and changed only by the UI
// controller (console/app/controller.h); read by the pure draw functions.
//
// Thread-safety: a value.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sy::console {

// Tab order. Requests came after Log, so the number keys of the first five
// stay what they were.
enum class View { kOverview = 0, kKernels, kMemory, kExperts, kLog, kRequests };
inline constexpr int kViewCount = 6;

const char* ViewTitle(View v);  // "Overview", "Kernels", ...
// Case-insensitive "overview" | "kernels" | "memory" | "experts" | "log" |
// "requests".
std::optional<View> ParseView(std::string_view name);

struct ViewState {
  View view = View::kOverview;
  bool replay = false;  // help lists replay keys; status line says "replay"
  bool help = false;
  bool debug = false;  // collect/draw timing overlay
  double collect_ms = 0;
  double draw_ms = 0;
  int log_scroll = 0;  // lines scrolled up from the newest
  // Experts view: rows scrolled down from the top (clamped when drawn), and
  // the layer whose physical slots are shown: -1 follows the least balanced
  // layer, 0.. picks one ('[' / ']').
  int experts_scroll = 0;
  int expert_layer = -1;

  bool command_active = false;
  std::string command_text;  // without the ':'
  int command_cursor = 0;    // in scalars
  std::vector<std::string> completions;

  std::string confirm;  // non-empty: a y/n question is on the command line
  std::string message;  // last command result or input error
  bool message_error = false;
};

}  // namespace sy::console
