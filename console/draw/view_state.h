// File: console/draw/view_state.h
//
// ViewState: what the user has chosen to look at (current view, overlays,
// scroll, command line contents, messages). Owned and changed only by the UI
// controller (console/app/controller.h); read by the pure draw functions.
//
// Thread-safety: a value.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sy::console {

struct Comparison;  // console/collect/compare.h

// Tab order. Requests came after Log, so the number keys of the first five
// stay what they were.
enum class View { kOverview = 0, kKernels, kMemory, kExperts, kLog, kRequests };
inline constexpr int kViewCount = 6;

// Requests view order ('s' cycles); every order is ascending except that
// progress, TTFT, TPOT and age put the largest first.
enum class RequestSort { kId = 0, kState, kProgress, kTtft, kTpot, kAge };
inline constexpr int kRequestSortCount = 6;
// Log view kind filter ('k' cycles): switch covers the switch, policy and
// calibrate events; command the console's commands and their replies;
// error errors and warnings.
enum class LogKind { kAll = 0, kSwitch, kRebalance, kCommand, kError };
inline constexpr int kLogKindCount = 5;
// Kernels view lower table ('g' cycles): top kernels over the kept steps,
// the selected step by layer (compute | comm), by kind (its kernels under
// compute and comm).
enum class KernelTable { kTop = 0, kLayer, kKind };
inline constexpr int kKernelTableCount = 3;
const char* RequestSortName(RequestSort s);  // "id", "state", "progress", ...
const char* LogKindName(LogKind k);          // "all", "switch", ...
const char* KernelTableName(KernelTable t);  // "top", "layer", "kind"

const char* ViewTitle(View v);  // "Overview", "Kernels", ...
// Case-insensitive "overview" | "kernels" | "memory" | "experts" | "log" |
// "requests".
std::optional<View> ParseView(std::string_view name);

struct ViewState {
  View view = View::kOverview;
  bool replay = false;  // help lists replay keys; status line says "replay"
  bool help = false;
  bool debug = false;  // collect/draw timing overlay
  // Replay: the `:compare` overlay (console/draw/compare.h) is shown over
  // the view (Esc closes it), with the last comparison made.
  bool compare = false;
  std::shared_ptr<const Comparison> comparison;
  double collect_ms = 0;
  double draw_ms = 0;
  int log_scroll = 0;  // lines scrolled up from the newest
  // Experts view: rows scrolled down from the top (clamped when drawn), and
  // the layer whose physical slots are shown: -1 follows the least balanced
  // layer, 0.. picks one ('[' / ']').
  int experts_scroll = 0;
  int expert_layer = -1;

  // Several engines (moe-console --connect given more than once): how many,
  // and the one shown and commanded, 0-based; -1 = all (merged views, and
  // commands to every engine). With one engine `engine` is ignored.
  int engine_count = 1;
  int engine = -1;

  // `/` filter line (Requests and Log views), edited like the command
  // line; Enter applies filter_text to the view it was opened in.
  bool filter_active = false;
  std::string filter_text;
  int filter_cursor = 0;
  // Applied filters: case-insensitive substrings ("" shows everything).
  std::string requests_filter;  // of a row's id, state and finish text
  std::string log_filter;       // of a line's text
  RequestSort requests_sort = RequestSort::kId;
  LogKind log_kind = LogKind::kAll;

  // Kernels view. kernel_step pins a step (-1 follows the newest kept);
  // kernel_nav counts ',' (-1) and '.' (+1) presses not yet applied:
  // ResolveKernelStep (draw/views.h) applies them against the steps a
  // Snapshot keeps. Lanes show 1/2^kernel_zoom of the step, starting
  // kernel_pan half-windows in.
  int64_t kernel_step = -1;
  int kernel_nav = 0;
  int kernel_zoom = 0;
  int kernel_pan = 0;
  KernelTable kernel_table = KernelTable::kTop;

  bool command_active = false;
  std::string command_text;  // without the ':'
  int command_cursor = 0;    // in scalars
  std::vector<std::string> completions;

  std::string confirm;  // non-empty: a y/n question is on the command line
  std::string message;  // last command result or input error
  bool message_error = false;
};

}  // namespace sy::console
