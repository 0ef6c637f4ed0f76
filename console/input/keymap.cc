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
    {"?", Action::kHelp, KeyScope::kAll, "toggle this help (:help)"},
    {"Esc", Action::kClose, KeyScope::kAll, "close overlay / cancel"},
    {"q", Action::kQuit, KeyScope::kAll, "quit (:quit)"},
    {"Up", Action::kScrollUp, KeyScope::kAll, "scroll Log/Experts"},
    {"Down", Action::kScrollDown, KeyScope::kAll, "scroll Log/Experts"},
    {"PageUp", Action::kPageUp, KeyScope::kAll, "page up / down"},
    {"PageDown", Action::kPageDown, KeyScope::kAll, "page up / down"},
    {"[", Action::kPrevLayer, KeyScope::kAll, "Experts: slot map layer"},
    {"]", Action::kNextLayer, KeyScope::kAll, "Experts: slot map layer"},
    {"d", Action::kDebug, KeyScope::kAll, "timing overlay"},
    {"Space", Action::kPlayPause, KeyScope::kReplay, "play / pause"},
    {"+", Action::kFaster, KeyScope::kReplay, "speed x2 / ÷2 (x0.25-x16)"},
    {"-", Action::kSlower, KeyScope::kReplay, "speed x2 / ÷2 (x0.25-x16)"},
    {"Left", Action::kSeekBack, KeyScope::kReplay, "seek -10s / +10s"},
    {"Right", Action::kSeekForward, KeyScope::kReplay, "seek -10s / +10s"},
    {"Home", Action::kSeekStart, KeyScope::kReplay, "seek to start / end"},
    {"End", Action::kSeekEnd, KeyScope::kReplay, "seek to start / end"},
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
