#include "console/input/parallel_commands.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>

namespace sy::console {
namespace {

template <size_t N>
bool OneOf(const std::string_view (&set)[N], std::string_view w) {
  return std::find(std::begin(set), std::end(set), w) != std::end(set);
}

template <size_t N>
std::string Joined(const std::string_view (&set)[N], const char* sep = "|") {
  std::string s;
  for (std::string_view w : set) s += (s.empty() ? "" : sep) + std::string(w);
  return s;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A whole number in [lo, hi], or nullopt.
std::optional<int64_t> Integer(const std::string& w, int64_t lo, int64_t hi) {
  if (w.empty() || w.size() > 10 ||
      !std::all_of(w.begin(), w.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  const int64_t v = std::stoll(w);
  if (v < lo || v > hi) return std::nullopt;
  return v;
}

// A finite number > 0, or nullopt.
std::optional<double> Positive(const std::string& w) {
  if (w.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(w.c_str(), &end);
  if (errno != 0 || end != w.c_str() + w.size() || !std::isfinite(v) || !(v > 0)) {
    return std::nullopt;
  }
  return v;
}

}  // namespace

Status ParseSwitch(const std::vector<std::string>& words, ParsedCommand& out) {
  const std::string usage = "switch " + Joined(kSwitchTargets);
  if (words.size() != 2) return InvalidArgument("usage: " + usage + " (the layout to move to)");
  const std::string to = Lower(words[1]);
  if (!OneOf(kSwitchTargets, to)) {
    return InvalidArgument("bad switch target '" + words[1] + "': expected " +
                           Joined(kSwitchTargets));
  }
  out.request.args["to"] = to;
  out.text = "switch " + to;
  return Status::Ok();
}

Status ParsePolicy(const std::vector<std::string>& words, ParsedCommand& out) {
  const std::string keys = Joined(kPolicyKeys, ", ");
  std::map<std::string, std::string> seen;  // key -> value as typed, for duplicates
  std::string text = "policy";
  std::optional<int64_t> t_high;
  std::optional<double> t_low;
  for (size_t i = 1; i < words.size(); ++i) {
    std::string key, value;
    const std::string& w = words[i];
    const size_t eq = w.find('=');
    if (eq == std::string::npos) {
      if (!OneOf(kPolicyModes, Lower(w))) {
        return InvalidArgument("bad policy argument '" + w + "': expected " + Joined(kPolicyModes) +
                               " or KEY=VALUE with KEY one of " + keys);
      }
      key = "mode";
      value = Lower(w);
    } else {
      key = Lower(w.substr(0, eq));
      value = w.substr(eq + 1);
      for (const auto& [label, name] : kPolicyKeyLabels) {
        if (key == label) key = name;
      }
      if (!OneOf(kPolicyKeys, key)) {
        return InvalidArgument("unknown policy key '" + w.substr(0, eq) + "': expected " + keys +
                               " (or the Overview's T_h, T_l, W, C, Q)");
      }
      if (value.empty()) return InvalidArgument("policy " + key + "= needs a value");
    }
    if (seen.count(key) != 0) return InvalidArgument("policy " + key + " given twice");
    seen[key] = value;
    nlohmann::json& args = out.request.args;
    if (key == "mode") {
      value = Lower(value);
      if (!OneOf(kPolicyModes, value)) {
        return InvalidArgument("bad policy mode '" + value + "': expected " + Joined(kPolicyModes));
      }
      args["mode"] = value;
    } else if (key == "t_high") {
      t_high = Integer(value, 1, 1'000'000);
      if (!t_high) {
        return InvalidArgument("bad t_high '" + value +
                               "': expected a batch size from 1 to 1000000");
      }
      args["t_high"] = *t_high;
    } else if (key == "t_low") {
      if (Lower(value) == "auto") {
        value = "auto";
        args["t_low"] = "auto";
      } else {
        t_low = Positive(value);
        if (!t_low) {
          return InvalidArgument("bad t_low '" + value +
                                 "': expected auto (0.8 t_high) or a batch size > 0");
        }
        args["t_low"] = *t_low;
      }
    } else if (key == "window") {
      const auto n = Integer(value, 1, 1'000'000);
      if (!n)
        return InvalidArgument("bad window '" + value + "': expected steps from 1 to 1000000");
      args["window"] = *n;
    } else if (key == "cooldown") {
      const auto n = Integer(value, 0, 1'000'000);
      if (!n) {
        return InvalidArgument("bad cooldown '" + value + "': expected steps from 0 to 1000000");
      }
      args["cooldown"] = *n;
    } else if (key == "queue") {
      const auto n = Integer(value, 0, 1'000'000);
      if (!n) {
        return InvalidArgument("bad queue '" + value +
                               "': expected requests from 0 (off) to 1000000");
      }
      args["queue"] = *n;
    } else if (key == "rollout") {
      value = Lower(value);
      if (!OneOf(kRolloutValues, value)) {
        return InvalidArgument("bad rollout '" + value + "': expected " + Joined(kRolloutValues));
      }
      args["rollout"] = value;
    }
    text += " " + (eq == std::string::npos ? value : key + "=" + value);
  }
  if (t_high && t_low && *t_low > static_cast<double>(*t_high)) {
    return InvalidArgument("t_low " + seen["t_low"] + " above t_high " + seen["t_high"] +
                           ": the low threshold must not exceed the high one");
  }
  out.text = text;
  return Status::Ok();
}

Status ParseCalibrate(const std::vector<std::string>& words, ParsedCommand& out) {
  bool apply = false, have_batches = false;
  std::string text = "calibrate";
  std::string batches_text, steps_text, prompt_text;
  // steps=N and prompt=N: the engine's "steps" and "prompt_len".
  struct Keyed {
    const char* word;
    const char* arg;
    int64_t max;
    std::string* text;
  };
  const Keyed keyed[] = {{"steps", "steps", 1000, &steps_text},
                         {"prompt", "prompt_len", 1 << 20, &prompt_text}};
  for (size_t i = 1; i < words.size(); ++i) {
    std::string w = words[i];
    if (Lower(w) == "apply") {
      if (apply) return InvalidArgument("calibrate: apply given twice");
      apply = true;
      continue;
    }
    const Keyed* key = nullptr;
    for (const Keyed& k : keyed) {
      if (Lower(w).rfind(std::string(k.word) + "=", 0) == 0) key = &k;
    }
    if (key) {
      if (!key->text->empty()) {
        return InvalidArgument(std::string("calibrate: ") + key->word + " given twice");
      }
      const std::string v = w.substr(std::string(key->word).size() + 1);
      const auto n = Integer(v, 1, key->max);
      if (!n) {
        return InvalidArgument(std::string("bad calibrate ") + key->word + " '" + v +
                               "': expected 1 to " + std::to_string(key->max));
      }
      out.request.args[key->arg] = *n;
      *key->text = std::string(key->word) + "=" + v;
      continue;
    }
    if (have_batches) {
      return InvalidArgument("bad calibrate argument '" + w +
                             "': batches go in one list without spaces, e.g. 1,4,16,64");
    }
    if (!w.empty() && w.front() == '[') w.erase(0, 1);
    if (!w.empty() && w.back() == ']') w.pop_back();
    nlohmann::json list = nlohmann::json::array();
    std::vector<int64_t> values;
    size_t start = 0;
    while (start <= w.size()) {
      size_t comma = w.find(',', start);
      if (comma == std::string::npos) comma = w.size();
      const std::string item = w.substr(start, comma - start);
      const auto b = Integer(item, 1, 65536);
      if (!b) {
        return InvalidArgument("bad calibrate batch '" + item + "' in '" + words[i] +
                               "': expected batch sizes from 1 to 65536 like 1,4,16,64 "
                               "(or apply, steps=N, prompt=N)");
      }
      if (std::find(values.begin(), values.end(), *b) != values.end()) {
        return InvalidArgument("calibrate batch " + item + " listed twice");
      }
      values.push_back(*b);
      list.push_back(*b);
      start = comma + 1;
    }
    if (values.size() < 2) {
      return InvalidArgument("calibrate needs at least 2 batch sizes to fit a crossover (got '" +
                             words[i] + "')");
    }
    out.request.args["batches"] = std::move(list);
    have_batches = true;
    for (int64_t v : values) batches_text += (batches_text.empty() ? "" : ",") + std::to_string(v);
  }
  if (apply) out.request.args["apply"] = true;
  if (have_batches) text += " " + batches_text;
  if (!steps_text.empty()) text += " " + steps_text;
  if (!prompt_text.empty()) text += " " + prompt_text;
  if (apply) text += " apply";
  out.text = text;
  return Status::Ok();
}

std::vector<std::string> ParallelCompletionWords(std::string_view cmd, bool first,
                                                 std::string_view arg) {
  std::vector<std::string> words;
  if (cmd == "switch") {
    if (first) words.assign(std::begin(kSwitchTargets), std::end(kSwitchTargets));
  } else if (cmd == "policy") {
    if (arg.rfind("rollout=", 0) == 0) {
      for (std::string_view v : kRolloutValues) words.push_back("rollout=" + std::string(v));
    } else if (arg.rfind("t_low=", 0) == 0) {
      words.push_back("t_low=auto");
    } else if (arg.rfind("mode=", 0) == 0) {
      for (std::string_view v : kPolicyModes) words.push_back("mode=" + std::string(v));
    } else {
      if (first) words.assign(std::begin(kPolicyModes), std::end(kPolicyModes));
      for (std::string_view k : kPolicyKeys) {
        if (k != "mode") words.push_back(std::string(k) + "=");
      }
    }
  } else if (cmd == "calibrate") {
    words = {"apply", "steps=", "prompt="};
  }
  return words;
}

}  // namespace sy::console
