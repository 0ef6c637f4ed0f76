// File: console/app/replay_control.h
//
// Carries out what the controller hands the replay loop: a `:seek` or
// `:compare` (Effects::replay_command), and the message a key action left
// (ReplayPlayer::TakeNotice, e.g. the event `n` jumped to). Results go to the
// controller's message line and, for `:compare`, to the compare overlay
// (ViewState::compare / comparison).
//
// Thread-safety: the UI thread.
#pragma once

#include "console/app/controller.h"
#include "console/app/replay_player.h"

namespace sy::console {

// `cmd` as ParseSeek / ParseCompare (console/input/replay_commands.h) left
// it. Seek errors and compare errors go to the message line as errors.
void ApplyReplayCommand(ReplayPlayer& player, const ParsedCommand& cmd, Controller& ctl);

// After Apply(action): its error, or its notice, on the message line.
void ReportReplayAction(ReplayPlayer& player, const Status& applied, Controller& ctl);

}  // namespace sy::console
