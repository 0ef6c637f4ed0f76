// File: console/input/parallel_commands.h
//
// The command-line side of TP <-> EP switching: parsing and completing
// `:switch`, `:policy` and `:calibrate` (docs/PROTOCOL.md 7.4 "switch",
// "policy", "calibrate"). Arguments are checked here so a typo never reaches
// the engine; the engine still checks everything again.
//
//   switch tp|ep                  {"to": "tp"|"ep"}
//   policy                        {} (reads the policy in force)
//   policy auto|manual [K=V ...]  {"mode": ..., K: V ...}
//   policy K=V ...                keys t_high (int >= 1), t_low ("auto" or
//                                 a number > 0, at most t_high when both are
//                                 given), window (int >= 1), cooldown (int
//                                 >= 0), queue (int >= 0), rollout
//                                 (auto|on|off), mode
//   calibrate [B1,B2,...] [steps=N] [prompt=N] [apply]
//                                 {"batches": [...], "steps": N,
//                                 "prompt_len": N, "apply": true}; at least
//                                 2 distinct batches from 1 to 65536,
//                                 brackets optional; steps 1 to 1000, prompt
//                                 1 to 2^20 (the engine checks its max_seq)
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "console/input/command_line.h"

namespace sy::console {

inline constexpr std::string_view kSwitchTargets[] = {"tp", "ep"};
inline constexpr std::string_view kPolicyModes[] = {"auto", "manual"};
inline constexpr std::string_view kPolicyKeys[] = {"t_high", "t_low",   "window", "cooldown",
                                                   "queue",  "rollout", "mode"};
// The Overview's policy line labels the keys T_h, T_l, W, C and Q; typed
// (any case), they stand for the key beside them.
inline constexpr std::pair<std::string_view, std::string_view> kPolicyKeyLabels[] = {
    {"t_h", "t_high"}, {"t_l", "t_low"}, {"w", "window"}, {"c", "cooldown"}, {"q", "queue"}};
inline constexpr std::string_view kRolloutValues[] = {"auto", "on", "off"};

// Each fills out.request.args and out.text from `words` (words[0] is the
// command name). INVALID_ARGUMENT with a message naming the bad word.
Status ParseSwitch(const std::vector<std::string>& words, ParsedCommand& out);
Status ParsePolicy(const std::vector<std::string>& words, ParsedCommand& out);
Status ParseCalibrate(const std::vector<std::string>& words, ParsedCommand& out);

// Completion words for the argument `arg` being typed after `cmd`, where
// `first` says whether it is the first argument: tp|ep after "switch";
// auto, manual and the "KEY=" prefixes after "policy" (then the values of
// rollout= and t_low=); "apply", "steps=" and "prompt=" after "calibrate". Empty for
// other commands.
std::vector<std::string> ParallelCompletionWords(std::string_view cmd, bool first,
                                                 std::string_view arg);

}  // namespace sy::console
