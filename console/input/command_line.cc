#include "console/input/command_line.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "console/draw/grid.h"
#include "console/input/parallel_commands.h"
#include "console/input/replay_commands.h"

namespace sy::console {
namespace {

constexpr CommandSpec kTable[] = {
    // Neighbours with the same help text share one row of the help overlay.
    {"pause", "", "pause / resume the scheduler (nothing is lost)", false, false},
    {"resume", "", "pause / resume the scheduler (nothing is lost)", false, false},
    {"trace", "off|summary|full", "set the trace level (full adds per-kernel spans)", false, false},
    {"status", "", "ask the engine for its state / model and devices", false, false},
    {"describe", "", "ask the engine for its state / model and devices", false, false},
    {"cancel", "ID", "cancel a request by id (Requests view); asks y/n", false, true},
    {"flush_cache", "", "drop every unpinned prefix-cache entry (asks y/n)", false, true},
    {"rebalance", "[N] [POLICY]", "plan from last N steps, show it, ask y/n (! skips)", false,
     true},
    {"rebalance_auto", "N|off", "auto-rebalance every N steps (add GAIN: min gain)", false, false},
    {"expert_stats", "[N] [dump F]", "expert load over N steps; dump: JSON for eplb", false, false},
    {"switch", "tp|ep", "move the experts to the TP or EP layout (y/n; ! skips)", false, true},
    {"policy", "auto|manual|K=V", "K: t_high t_low(=auto) window cooldown queue rollout", false,
     false},
    {"calibrate", "[Bs] [apply]",
     "time TP and EP at batches (prompt=N: tokens); apply sets T_h, T_l", false, false},
    {"stop", "", "stop the engine (asks y/n; ':stop!' does not)", false, true},
    {"engine", "N|all", "show and command engine N, or all merged (several --connect)", true,
     false},
    {"seek", "TIME|+T|-T|step N", "replay: go to 1m30s, +10s, or a step", true, false},
    {"compare", "[event [W]]|A-B C-D", "replay: compare before/after the event, or 2 windows", true,
     false},
    {"quit", "", "quit the console / show this help", true, false},
    {"help", "", "quit the console / show this help", true, false},
};

std::vector<std::string> Words(std::string_view line) {
  std::vector<std::string> out;
  std::istringstream in{std::string(line)};
  std::string w;
  while (in >> w) out.push_back(w);
  return out;
}

std::string KnownCommands() {
  std::string s;
  for (const CommandSpec& c : kTable) {
    if (!s.empty()) s += ", ";
    s += c.name;
  }
  return s;
}

std::string Levels() { return "off|summary|full"; }

std::string Policies() { return "auto|global|hierarchical"; }

std::string DisruptiveCommands() {
  std::string s;
  for (const CommandSpec& c : kTable) {
    if (c.disruptive) s += (s.empty() ? "" : ", ") + std::string(c.name);
  }
  return s;
}

bool AllDigits(const std::string& w, size_t max_len) {
  return !w.empty() && w.size() <= max_len &&
         std::all_of(w.begin(), w.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
}

// `rebalance[!] [N] [POLICY]`, in either order.
Status ParseRebalance(const std::vector<std::string>& words, bool bang, ParsedCommand& out) {
  std::string window, policy;
  for (size_t i = 1; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (AllDigits(w, 7)) {
      if (!window.empty()) return InvalidArgument("rebalance takes one window (got '" + w + "')");
      if (std::stoll(w) < 1) return InvalidArgument("rebalance window must be at least 1 step");
      window = w;
    } else if (std::find(std::begin(kRebalancePolicies), std::end(kRebalancePolicies), w) !=
               std::end(kRebalancePolicies)) {
      if (!policy.empty()) return InvalidArgument("rebalance takes one policy (got '" + w + "')");
      policy = w;
    } else {
      return InvalidArgument("bad rebalance argument '" + w + "': expected a window in steps or " +
                             Policies());
    }
  }
  out.preview = !bang;
  out.request.args["dry_run"] = !bang;
  if (!window.empty()) out.request.args["window"] = std::stoll(window);
  if (!policy.empty()) out.request.args["policy"] = policy;
  out.text = std::string(bang ? "rebalance!" : "rebalance") + (window.empty() ? "" : " " + window) +
             (policy.empty() ? "" : " " + policy);
  return Status::Ok();
}

// `rebalance_auto N [GAIN]` or `rebalance_auto off`.
Status ParseRebalanceAuto(const std::vector<std::string>& words, ParsedCommand& out) {
  const std::string usage = "rebalance_auto N [GAIN] (every N steps; 0 or off stops)";
  if (words.size() < 2 || words.size() > 3) return InvalidArgument("usage: " + usage);
  out.request.cmd = "rebalance_auto";
  const std::string& every = words[1];
  if (every == "off") {
    if (words.size() > 2) return InvalidArgument("rebalance_auto off takes nothing more");
    out.request.args["every"] = 0;
    out.text = "rebalance_auto off";
    return Status::Ok();
  }
  if (!AllDigits(every, 9)) {
    return InvalidArgument("bad rebalance_auto interval '" + every + "': expected steps or off");
  }
  out.request.args["every"] = std::stoll(every);
  out.text = "rebalance_auto " + every;
  if (words.size() == 3) {
    const std::string& g = words[2];
    char* end = nullptr;
    const double gain = std::strtod(g.c_str(), &end);
    if (g.empty() || end != g.c_str() + g.size() || !(gain >= 0 && gain <= 1)) {
      return InvalidArgument("bad min gain '" + g + "': expected a number from 0 to 1");
    }
    out.request.args["min_gain"] = gain;
    out.text += " " + g;
  }
  return Status::Ok();
}

// `expert_stats [N] [dump FILE]`: the engine's statistics over the last N
// steps (0: since the start), optionally written to FILE on the engine's
// machine for `moe-engine eplb --stats FILE`.
Status ParseExpertStats(const std::vector<std::string>& words, ParsedCommand& out) {
  const std::string usage = "usage: expert_stats [N] [dump FILE]";
  out.text = "expert_stats";
  for (size_t i = 1; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (AllDigits(w, 4) && !out.request.args.contains("window")) {
      out.request.args["window"] = std::stoll(w);
      out.text += " " + w;
    } else if (w == "dump" && i + 1 < words.size() && !out.request.args.contains("path")) {
      out.request.args["path"] = words[++i];
      out.text += " dump " + words[i];
    } else {
      return InvalidArgument("bad expert_stats argument '" + w + "'; " + usage);
    }
  }
  return Status::Ok();
}

std::string CommonPrefix(const std::vector<std::string>& v) {
  if (v.empty()) return "";
  std::string p = v.front();
  for (const auto& s : v) {
    size_t i = 0;
    while (i < p.size() && i < s.size() && p[i] == s[i]) ++i;
    p.resize(i);
  }
  return p;
}

}  // namespace

std::span<const CommandSpec> CommandTable() { return kTable; }

Result<ParsedCommand> ParseCommand(std::string_view line) {
  std::vector<std::string> words = Words(line);
  if (words.empty()) return InvalidArgument("empty command (try: " + KnownCommands() + ")");
  std::string name = words[0];
  bool bang = false;
  if (name.size() > 1 && name.back() == '!') {
    bang = true;
    name.pop_back();
  }
  const auto it = std::find_if(std::begin(kTable), std::end(kTable),
                               [&](const CommandSpec& c) { return c.name == name; });
  if (it == std::end(kTable)) {
    return InvalidArgument("unknown command '" + words[0] + "' (try: " + KnownCommands() + ")");
  }
  if (bang && !it->disruptive) {
    return InvalidArgument("'!' only applies to " + DisruptiveCommands() + ", not to '" + name +
                           "'");
  }
  ParsedCommand out;
  out.name = name;
  out.local = it->local;
  out.needs_confirm = it->disruptive && !bang;
  out.request.cmd = name;
  out.request.args = nlohmann::json::object();
  if (name == "trace") {
    if (words.size() < 2) return InvalidArgument("trace needs a level: " + Levels());
    if (words.size() > 2) return InvalidArgument("trace takes one level: " + Levels());
    const std::string& level = words[1];
    if (std::find(std::begin(kTraceLevels), std::end(kTraceLevels), level) ==
        std::end(kTraceLevels)) {
      return InvalidArgument("bad trace level '" + level + "': expected " + Levels());
    }
    out.request.args["level"] = level;
    out.text = "trace " + level;
    return out;
  }
  if (name == "rebalance") {
    out.needs_confirm = false;  // the plan is the question (preview)
    RETURN_IF_ERROR(ParseRebalance(words, bang, out));
    return out;
  }
  if (name == "rebalance_auto") {
    RETURN_IF_ERROR(ParseRebalanceAuto(words, out));
    return out;
  }
  if (name == "expert_stats") {
    RETURN_IF_ERROR(ParseExpertStats(words, out));
    return out;
  }
  if (name == "switch") {
    RETURN_IF_ERROR(ParseSwitch(words, out));
    // Keep the '!' (as cancel! and stop! do): the history recalls this text,
    // and recalling it must not bring back the question it skipped.
    if (bang) out.text.insert(name.size(), "!");
    return out;
  }
  if (name == "policy") {
    RETURN_IF_ERROR(ParsePolicy(words, out));
    return out;
  }
  if (name == "calibrate") {
    RETURN_IF_ERROR(ParseCalibrate(words, out));
    return out;
  }
  if (name == "seek") {
    RETURN_IF_ERROR(ParseSeek(words, out));
    return out;
  }
  if (name == "compare") {
    RETURN_IF_ERROR(ParseCompare(words, out));
    return out;
  }
  if (name == "cancel") {
    if (words.size() != 2) return InvalidArgument("cancel needs one request id: cancel ID");
    const std::string& id = words[1];
    const bool digits =
        !id.empty() && id.size() <= 18 &&
        std::all_of(id.begin(), id.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
    if (!digits) return InvalidArgument("bad request id '" + id + "': expected a number");
    out.request.args["id"] = std::stoll(id);
    out.text = "cancel" + std::string(bang ? "!" : "") + " " + id;
    return out;
  }
  if (name == "engine") {
    // Local: the console picks what it shows and where commands go. Engines
    // are numbered from 1 as the header shows them; args.engine is 0-based,
    // -1 for all.
    if (words.size() != 2) return InvalidArgument("engine needs one argument: engine N|all");
    const std::string& w = words[1];
    if (w == "all") {
      out.request.args["engine"] = -1;
    } else if (AllDigits(w, 3) && std::stoi(w) >= 1) {
      out.request.args["engine"] = std::stoi(w) - 1;
    } else {
      return InvalidArgument("bad engine '" + w + "': expected a number from 1, or all");
    }
    out.text = "engine " + w;
    return out;
  }
  if (words.size() > 1) {
    return InvalidArgument(name + " takes no arguments (got '" + words[1] + "')");
  }
  out.text = name + (bang ? "!" : "");
  return out;
}

ParsedCommand ConfirmedRebalance(const ParsedCommand& preview) {
  ParsedCommand out = preview;
  out.preview = false;
  out.request.args["dry_run"] = false;
  out.text = "rebalance!" + preview.text.substr(std::string_view("rebalance").size());
  return out;
}

Completion Complete(std::string_view line) {
  Completion c;
  c.line = std::string(line);
  std::string s(line);
  s.erase(0, s.find_first_not_of(' '));
  const size_t space = s.find(' ');
  if (space == std::string::npos) {
    for (const CommandSpec& spec : kTable) {
      if (spec.name.substr(0, s.size()) == s) c.candidates.emplace_back(spec.name);
    }
    if (c.candidates.size() == 1) {
      const CommandSpec* spec =
          &*std::find_if(std::begin(kTable), std::end(kTable),
                         [&](const auto& x) { return x.name == c.candidates[0]; });
      c.line = c.candidates[0] + (spec->args.empty() ? "" : " ");
    } else if (!c.candidates.empty()) {
      c.line = CommonPrefix(c.candidates);
      if (c.line.size() < s.size()) c.line = s;
    }
    return c;
  }
  // The word being typed is completed from the command's word list; the
  // words before it are kept as typed.
  const std::string cmd = s.substr(0, space);
  const size_t last = s.find_last_of(' ');
  const std::string head = s.substr(0, last + 1);
  const std::string arg = s.substr(last + 1);
  std::vector<std::string> words;
  const bool first = head.find_first_not_of(' ', space) == std::string::npos;
  if (cmd == "switch" || cmd == "policy" || cmd == "calibrate") {
    words = ParallelCompletionWords(cmd, first, arg);
  } else if (cmd == "trace" && head.find_first_not_of(' ', space) == std::string::npos) {
    words.assign(std::begin(kTraceLevels), std::end(kTraceLevels));
  } else if (cmd == "rebalance" || cmd == "rebalance!") {
    words.assign(std::begin(kRebalancePolicies), std::end(kRebalancePolicies));
  } else if (cmd == "rebalance_auto" && head.find_first_not_of(' ', space) == std::string::npos) {
    words = {"off"};
  }
  for (const std::string& w : words) {
    if (w.substr(0, arg.size()) == arg) c.candidates.emplace_back(w);
  }
  if (c.candidates.size() == 1) {
    c.line = head + c.candidates[0];
  } else if (!c.candidates.empty()) {
    c.line = head + CommonPrefix(c.candidates);
  }
  return c;
}

std::string InlineUsage(std::string_view line) {
  const std::vector<std::string> words = Words(line);
  if (words.empty()) return "";
  std::string name = words[0];
  if (name.size() > 1 && name.back() == '!') name.pop_back();
  const CommandSpec* found = nullptr;
  for (const CommandSpec& c : kTable) {
    if (c.name == name) {
      found = &c;
      break;
    }
    if (words.size() == 1 && c.name.substr(0, name.size()) == name) {
      if (found != nullptr) return "";  // several commands begin so
      found = &c;
    }
  }
  if (found == nullptr) return "";
  std::string out(found->name);
  if (!found->args.empty()) out += " " + std::string(found->args);
  return out + "  " + std::string(found->help);
}

void CommandLineEditor::Open(std::string_view initial) {
  buf_ = DecodeUtf8(initial);
  cursor_ = static_cast<int>(buf_.size());
  history_pos_ = history_.size();
  draft_.clear();
  candidates_.clear();
}

void CommandLineEditor::Remember(const std::string& line) {
  if (line.empty()) return;
  if (history_.empty() || history_.back() != line) history_.push_back(line);
  if (history_.size() > 100) history_.erase(history_.begin());
  history_pos_ = history_.size();
}

std::string CommandLineEditor::text() const { return EncodeUtf8(buf_); }

CommandLineEditor::Outcome CommandLineEditor::HandleKey(const Key& key) {
  const std::string& k = key.name;
  if (k == "Enter") return Outcome::kSubmit;
  if (k == "Esc") return Outcome::kCancel;
  if (k != "Tab") candidates_.clear();
  const int n = static_cast<int>(buf_.size());
  if (k == "Backspace") {
    if (cursor_ > 0) {
      buf_.erase(static_cast<size_t>(cursor_ - 1), 1);
      --cursor_;
    } else if (buf_.empty()) {
      return Outcome::kCancel;  // like vim: backspace on an empty line leaves
    }
  } else if (k == "Delete") {
    if (cursor_ < n) buf_.erase(static_cast<size_t>(cursor_), 1);
  } else if (k == "Left") {
    cursor_ = std::max(0, cursor_ - 1);
  } else if (k == "Right") {
    cursor_ = std::min(n, cursor_ + 1);
  } else if (k == "Home") {
    cursor_ = 0;
  } else if (k == "End") {
    cursor_ = n;
  } else if (k == "Tab") {
    if (!complete_) return Outcome::kEditing;
    Completion c = Complete(EncodeUtf8(buf_));
    buf_ = DecodeUtf8(c.line);
    cursor_ = static_cast<int>(buf_.size());
    candidates_ = c.candidates.size() > 1 ? c.candidates : std::vector<std::string>{};
  } else if (k == "Up") {
    if (history_pos_ > 0) {
      if (history_pos_ == history_.size()) draft_ = buf_;
      --history_pos_;
      buf_ = DecodeUtf8(history_[history_pos_]);
      cursor_ = static_cast<int>(buf_.size());
    }
  } else if (k == "Down") {
    if (history_pos_ < history_.size()) {
      ++history_pos_;
      buf_ = history_pos_ == history_.size() ? draft_ : DecodeUtf8(history_[history_pos_]);
      cursor_ = static_cast<int>(buf_.size());
    }
  } else {
    const std::u32string text = k == "Space" ? std::u32string(U" ") : DecodeUtf8(k);
    // Only single printable characters are typed; other named keys are ignored.
    if (text.size() == 1 && text[0] >= 0x20 && text[0] != 0x7F) {
      buf_.insert(static_cast<size_t>(cursor_), text);
      ++cursor_;
    }
  }
  return Outcome::kEditing;
}

}  // namespace sy::console
