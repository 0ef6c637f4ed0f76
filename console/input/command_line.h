// File: console/input/command_line.h
//
// The `:` command line: the table of commands (also rendered by the help
// overlay), parsing a typed line into a request for the engine, Tab
// completion, and a small line editor with history.
//
//   Result<ParsedCommand> c = ParseCommand("trace full");
//   // c->request == {"cmd": "trace", "args": {"level": "full"}}
//   ParseCommand("trace loud");  // INVALID_ARGUMENT: bad trace level 'loud' ...
//
// An unknown command or bad arguments is an error value: nothing is sent.
// Thread-safety: pure functions; a CommandLineEditor is used by one thread.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "console/input/keymap.h"
#include "telemetry/protocol.h"

namespace sy::console {

struct CommandSpec {
  std::string_view name;
  std::string_view args;  // usage, e.g. "off|summary|full"; "" for none
  std::string_view help;
  bool local;       // handled by the console, never sent
  bool disruptive;  // asks y/n unless typed with a trailing '!'
};

std::span<const CommandSpec> CommandTable();
inline constexpr std::string_view kTraceLevels[] = {"off", "summary", "full"};
// EPLB policies `:rebalance` accepts (docs/PROTOCOL.md 7.4 "rebalance").
inline constexpr std::string_view kRebalancePolicies[] = {"auto", "global", "hierarchical"};

struct ParsedCommand {
  std::string name;  // "pause", "quit", ...
  std::string text;  // normalised text as typed, e.g. "trace full"
  bool local = false;
  bool needs_confirm = false;  // disruptive and typed without '!'
  // `:rebalance` without '!': a dry run whose plan is shown and then asked
  // about (y/n); yes sends ConfirmedRebalance(this).
  bool preview = false;
  telemetry::CommandRequest request;  // for engine commands; id left null
};

// `line` is what follows ':' (surrounding blanks ignored). INVALID_ARGUMENT
// for an empty line, an unknown command (message lists the known ones), a
// missing, extra or bad argument; '!' on a command that is not disruptive.
//
//   rebalance [N] [POLICY]   {"cmd":"rebalance","args":{"dry_run":true[,"window":N]
//                             [,"policy":P]}}, preview; "rebalance!" sends
//                             dry_run false at once. N: 1..1000000 steps.
//   rebalance_auto N [GAIN]  {"cmd":"rebalance_auto","args":{"every":N[,"min_gain":GAIN]}}
//   rebalance_auto off       every 0. GAIN: a number in [0, 1].
//   switch, policy, calibrate   as console/input/parallel_commands.h says.
//   engine N|all             local (never sent): request.args.engine = N - 1
//                            (engines are numbered from 1 on screen), -1 for all.
Result<ParsedCommand> ParseCommand(std::string_view line);

// The command that applies what the dry run `preview` planned: the same
// window and policy with dry_run false (text "rebalance! ...").
// REQUIRES: preview.preview.
ParsedCommand ConfirmedRebalance(const ParsedCommand& preview);

struct Completion {
  std::string line;                     // the line after completion
  std::vector<std::string> candidates;  // all matches (shown when > 1)
};
// Completes the command name, the trace level after "trace ", the policy
// after "rebalance ... ", "off" after "rebalance_auto ", and the words of
// ParallelCompletionWords() after "switch ", "policy ", "calibrate ". A
// unique command match gets a trailing space when the command takes
// arguments.
Completion Complete(std::string_view line);

// What the command line shows beside a line being typed: the usage and help
// of the command its first word names (a trailing '!' ignored), or of the
// only command that word begins; "" when it names none or several.
//   InlineUsage("trace f") == "trace off|summary|full  set the trace level ..."
//   InlineUsage("st")      == ""  (status, stop)
std::string InlineUsage(std::string_view line);

// Line editing for the command line: printable keys insert at the cursor,
// Left/Right/Home/End move, Backspace/Delete erase, Tab completes, Up/Down
// walk the history, Enter submits, Esc cancels.
class CommandLineEditor {
 public:
  enum class Outcome { kEditing, kSubmit, kCancel };

  // `complete`: Tab completes commands (false for the `/` filter line,
  // where Tab does nothing).
  explicit CommandLineEditor(bool complete = true) : complete_(complete) {}

  // Starts a fresh line holding `initial`, cursor at its end (history
  // position reset).
  void Open(std::string_view initial = "");
  Outcome HandleKey(const Key& key);
  // Adds a submitted line to the history (consecutive duplicates skipped).
  void Remember(const std::string& line);

  std::string text() const;
  int cursor() const { return cursor_; }  // in scalars
  const std::vector<std::string>& candidates() const { return candidates_; }

 private:
  std::u32string buf_;
  int cursor_ = 0;
  std::vector<std::string> history_;
  size_t history_pos_ = 0;  // == history_.size(): editing a new line
  std::u32string draft_;    // the new line while browsing history
  std::vector<std::string> candidates_;
  bool complete_ = true;
};

}  // namespace sy::console
