#include "console/input/keymap.h"

namespace sy::console {
namespace {

constexpr KeyBinding kTable[] = {
    {"1", Action::kViewOverview, KeyScope::kAll, "Overview view"},
    {"2", Action::kViewKernels, KeyScope::kAll, "Kernels view"},
    {"3", Action::kViewMemory, KeyScope::kAll, "Memory view"},
    {"4", Action::kViewExperts, KeyScope::kAll, "Experts view"},
    {"5", Action::kViewLog, KeyScope::kAll, "Log view"},
    {"6", Action::kViewRequests, KeyScope::kAll, "Requests view"},
    {"Tab", Action::kNextView, KeyScope::kAll, "next view"},
    {"BackTab", Action::kPrevView, KeyScope::kAll, "previous view"},
    {":", Action::kCommandLine, KeyScope::kAll, "command line"},
    {"/", Action::kFilter, KeyScope::kAll, "filter Requests / Log"},
    {"?", Action::kHelp, KeyScope::kAll, "toggle this help (:help)"},
    {"Esc", Action::kClose, KeyScope::kAll, "close overlay / cancel"},
    {"q", Action::kQuit, KeyScope::kAll, "quit (:quit)"},
    {"Up", Action::kScrollUp, KeyScope::kAll, "scroll Log/Experts"},
    {"Down", Action::kScrollDown, KeyScope::kAll, "scroll Log/Experts"},
    {"PageUp", Action::kPageUp, KeyScope::kAll, "page up / down"},
    {"PageDown", Action::kPageDown, KeyScope::kAll, "page up / down"},
    {"[", Action::kPrevLayer, KeyScope::kAll, "Experts: slot map layer"},
    {"]", Action::kNextLayer, KeyScope::kAll, "Experts: slot map layer"},
    {"s", Action::kSortRequests, KeyScope::kAll, "Requests: next sort order"},
    {"k", Action::kLogKind, KeyScope::kAll, "Log: next kind filter"},
    {",", Action::kOlderStep, KeyScope::kAll, "Kernels: older / newer step"},
    {".", Action::kNewerStep, KeyScope::kAll, "Kernels: older / newer step"},
    {"f", Action::kFollowStep, KeyScope::kAll, "Kernels: follow latest step"},
    {"z", Action::kZoomIn, KeyScope::kAll, "Kernels: zoom in / out"},
    {"Z", Action::kZoomOut, KeyScope::kAll, "Kernels: zoom in / out"},
    {"{", Action::kPanLeft, KeyScope::kAll, "Kernels: pan zoomed lanes"},
    {"}", Action::kPanRight, KeyScope::kAll, "Kernels: pan zoomed lanes"},
    {"g", Action::kKernelTable, KeyScope::kAll, "Kernels: top/layer/kind"},
    {"d", Action::kDebug, KeyScope::kAll, "timing overlay"},
    {"e", Action::kNextEngine, KeyScope::kAll, "next / prev engine, or all"},
    {"E", Action::kPrevEngine, KeyScope::kAll, "next / prev engine, or all"},
    {"Space", Action::kPlayPause, KeyScope::kReplay, "play / pause"},
    {"+", Action::kFaster, KeyScope::kReplay, "speed x2 / ÷2 (x0.25-x16)"},
    {"-", Action::kSlower, KeyScope::kReplay, "speed x2 / ÷2 (x0.25-x16)"},
    {"Left", Action::kSeekBack, KeyScope::kReplay, "seek -10s / +10s"},
    {"Right", Action::kSeekForward, KeyScope::kReplay, "seek -10s / +10s"},
    {"Home", Action::kSeekStart, KeyScope::kReplay, "seek to start / end"},
    {"End", Action::kSeekEnd, KeyScope::kReplay, "seek to start / end"},
    {"n", Action::kNextEvent, KeyScope::kReplay, "next / previous event"},
    {"N", Action::kPrevEvent, KeyScope::kReplay, "next / previous event"},
};

}  // namespace

std::span<const KeyBinding> KeyTable() { return kTable; }

std::optional<Action> LookupKey(std::string_view key, bool replay) {
  for (const KeyBinding& b : kTable) {
    if (b.key == key && (b.scope == KeyScope::kAll || replay)) return b.action;
  }
  return std::nullopt;
}

}  // namespace sy::console
