// File: engine/workload/workload_file.cc
//
// JSONL traces: reading (with errors naming file, line and field), writing,
// and the `file` scenario that replays them.
#include "engine/workload/workload_file.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "engine/workload/scenarios.h"

namespace sy::engine {
namespace {

using nlohmann::json;

constexpr double kMaxArrivalS = 1e9;  // about 31.7 years

// Parses one non-blank line; `where` is "PATH:LINE". `last_arrival_s` is the
// previous line's arrival_s, updated to this one's.
Result<TraceEntry> ParseLine(const std::string& line, const std::string& where,
                             double* last_arrival_s) {
  auto bad = [&](std::string_view field, std::string_view what) {
    return InvalidArgument(where + ": " + std::string(field) + ": " + std::string(what));
  };
  json j;
  try {
    j = json::parse(line);
  } catch (const json::exception& e) {
    return InvalidArgument(where + ": not valid JSON: " + e.what());
  }
  if (!j.is_object()) return InvalidArgument(where + ": expected a JSON object");
  static const std::set<std::string> kKeys = {
      "arrival_s", "prompt", "prompt_tokens", "output_len", "temperature", "ignore_eos", "seed"};
  for (const auto& [key, value] : j.items()) {
    if (!kKeys.count(key)) return bad(key, "unknown field");
  }
  TraceEntry e;
  if (!j.contains("arrival_s")) return bad("arrival_s", "missing");
  const json& t = j["arrival_s"];
  // Bounded so that microseconds fit int64 and survive WriteWorkloadFile's
  // seconds exactly (1e15 us < 2^53); 1e300 used to round to a negative time.
  if (!t.is_number() || !(t.get<double>() >= 0 && t.get<double>() <= kMaxArrivalS)) {
    return bad("arrival_s", "must be a number in [0, 1e9] (seconds)");
  }
  const double arrival_s = t.get<double>();
  if (arrival_s < *last_arrival_s) {
    return bad("arrival_s", "goes back in time (arrivals must be non-decreasing)");
  }
  *last_arrival_s = arrival_s;
  e.time_us = std::llround(arrival_s * 1e6);

  if (j.contains("prompt") == j.contains("prompt_tokens")) {
    return bad("prompt", "give exactly one of prompt and prompt_tokens");
  }
  if (j.contains("prompt")) {
    if (!j["prompt"].is_string() || j["prompt"].get<std::string>().empty()) {
      return bad("prompt", "must be a non-empty string");
    }
    e.text = j["prompt"].get<std::string>();
  } else {
    const json& ids = j["prompt_tokens"];
    if (!ids.is_array() || ids.empty()) return bad("prompt_tokens", "must be a non-empty array");
    e.tokens.reserve(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      if (!ids[i].is_number_integer() || ids[i].get<int64_t>() < 0 ||
          ids[i].get<int64_t>() > std::numeric_limits<int32_t>::max()) {
        return bad("prompt_tokens", "entry " + std::to_string(i) + " is not a token id (>= 0)");
      }
      e.tokens.push_back(static_cast<int32_t>(ids[i].get<int64_t>()));
    }
  }

  if (!j.contains("output_len")) return bad("output_len", "missing");
  const json& out = j["output_len"];
  if (!out.is_number_integer() || out.get<int64_t>() < 1 ||
      out.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
    return bad("output_len", "must be an integer >= 1");
  }
  e.output_len = static_cast<int>(out.get<int64_t>());

  if (j.contains("temperature")) {
    const json& v = j["temperature"];
    // Checked as the float it becomes: 1e39 is a finite double but an
    // infinite float, which WriteWorkloadFile refuses.
    const float temp = v.is_number() ? static_cast<float>(v.get<double>()) : -1.0f;
    if (!std::isfinite(temp) || temp < 0) {
      return bad("temperature", "must be a number >= 0 (and within the float range)");
    }
    e.temperature = temp;
  }
  if (j.contains("ignore_eos")) {
    if (!j["ignore_eos"].is_boolean()) return bad("ignore_eos", "must be true or false");
    e.ignore_eos = j["ignore_eos"].get<bool>();
  }
  if (j.contains("seed")) {
    if (!j["seed"].is_number_unsigned()) return bad("seed", "must be an integer >= 0");
    e.seed = j["seed"].get<uint64_t>();
  }
  return e;
}

// A float as the shortest decimal that reads back as the same float, so
// 0.7f is written "0.7" rather than 0.699999988079071.
json ShortestFloat(float f) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), f);
  return json::parse(std::string(buf, end));
}

// Replays the trace: entry i is arrival i, times as written.
class FileReplay final : public workload_internal::Scenario {
 public:
  explicit FileReplay(const WorkloadOptions& o) : o_(o) {}

  bool Next(workload_internal::TokenSource& src, Arrival* a) override {
    if (next_ >= o_.trace->size()) return false;
    const TraceEntry& e = (*o_.trace)[next_++];
    a->time_us = e.time_us;
    a->spec.prompt = e.text.empty() ? e.tokens : src.Encode(e.text);
    if (static_cast<int>(a->spec.prompt.size()) > o_.max_prompt_tokens) {
      a->spec.prompt.resize(o_.max_prompt_tokens);
    }
    a->spec.max_new_tokens = e.output_len;
    if (e.temperature) a->spec.temperature = *e.temperature;
    if (e.ignore_eos) a->spec.ignore_eos = *e.ignore_eos;
    if (e.seed) a->spec.seed = *e.seed;
    return true;
  }

 private:
  const WorkloadOptions& o_;
  size_t next_ = 0;
};

}  // namespace

Result<std::vector<TraceEntry>> ReadWorkloadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot open workload file " + path + ": " + std::strerror(errno));
  std::vector<TraceEntry> entries;
  std::string line;
  double last_s = 0;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    Result<TraceEntry> e = ParseLine(line, path + ":" + std::to_string(n), &last_s);
    if (!e.ok()) return e.status();
    entries.push_back(std::move(*e));
  }
  if (in.bad()) return Unavailable("cannot read workload file " + path);
  if (entries.empty()) return InvalidArgument(path + ": no requests (the file is empty)");
  return entries;
}

Status LoadWorkloadFile(const std::string& path, WorkloadOptions* options) {
  ASSIGN_OR_RETURN(std::vector<TraceEntry> entries, ReadWorkloadFile(path));
  options->kind = WorkloadKind::kFile;
  options->file = path;
  options->trace = std::make_shared<const std::vector<TraceEntry>>(std::move(entries));
  return Status::Ok();
}

Status WriteWorkloadFile(const std::vector<Arrival>& arrivals, const std::string& path) {
  int64_t last_us = 0;
  for (size_t i = 0; i < arrivals.size(); ++i) {
    const Arrival& a = arrivals[i];
    const std::string which = "arrival " + std::to_string(i) + ": ";
    if (a.time_us < last_us) return InvalidArgument(which + "time goes back or is negative");
    if (a.spec.prompt.empty()) return InvalidArgument(which + "empty prompt");
    if (a.spec.max_new_tokens < 1) return InvalidArgument(which + "max_new_tokens < 1");
    if (!(a.spec.temperature >= 0) || !std::isfinite(a.spec.temperature)) {
      return InvalidArgument(which + "temperature must be >= 0");
    }
    last_us = a.time_us;
  }
  std::ofstream out(path, std::ios::trunc);
  if (!out) return Unavailable("cannot write workload file " + path + ": " + std::strerror(errno));
  for (const Arrival& a : arrivals) {
    nlohmann::ordered_json j;
    j["arrival_s"] = static_cast<double>(a.time_us) / 1e6;
    j["prompt_tokens"] = a.spec.prompt;
    j["output_len"] = a.spec.max_new_tokens;
    j["temperature"] = ShortestFloat(a.spec.temperature);
    j["ignore_eos"] = a.spec.ignore_eos;
    j["seed"] = a.spec.seed;
    out << j.dump() << '\n';
  }
  out.flush();
  if (!out) return Unavailable("cannot write workload file " + path + ": write failed");
  return Status::Ok();
}

namespace workload_internal {
std::unique_ptr<Scenario> MakeFileReplay(const WorkloadOptions& o) {
  return std::make_unique<FileReplay>(o);
}
}  // namespace workload_internal

}  // namespace sy::engine
