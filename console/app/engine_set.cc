#include "console/app/engine_set.h"

#include <algorithm>
#include <charconv>
#include <set>

namespace sy::console {
namespace {

constexpr std::string_view kDefaultTelemetry = "tcp://127.0.0.1:5555";
constexpr std::string_view kDefaultControl = "tcp://127.0.0.1:5556";

// tcp://HOST:PORT -> tcp://HOST:PORT+1, the pairing moe-engine uses by
// default (5555 telemetry, 5556 control).
std::optional<std::string> NextPort(const std::string& ep) {
  if (ep.rfind("tcp://", 0) != 0) return std::nullopt;
  const size_t colon = ep.rfind(':');
  if (colon == std::string::npos || colon < 6) return std::nullopt;
  int port = 0;
  const char* first = ep.data() + colon + 1;
  const char* last = ep.data() + ep.size();
  auto [p, ec] = std::from_chars(first, last, port);
  if (ec != std::errc() || p != last || port <= 0 || port >= 65535) return std::nullopt;
  return ep.substr(0, colon + 1) + std::to_string(port + 1);
}

}  // namespace

Result<std::vector<EngineEndpoints>> ResolveEngines(const std::vector<std::string>& connects,
                                                    const std::optional<std::string>& control) {
  std::vector<EngineEndpoints> out;
  if (connects.empty()) {
    out.push_back({std::string(kDefaultTelemetry), control.value_or(std::string(kDefaultControl))});
    return out;
  }
  if (connects.size() > 1 && control) {
    return InvalidArgument("--control " + *control + " is ambiguous with " +
                           std::to_string(connects.size()) +
                           " engines: give each one as --connect TELEMETRY,CONTROL");
  }
  std::set<std::string> seen;
  for (const std::string& spec : connects) {
    EngineEndpoints e;
    const size_t comma = spec.find(',');
    e.telemetry = spec.substr(0, comma);
    if (comma != std::string::npos) {
      e.control = spec.substr(comma + 1);
      if (e.control.find(',') != std::string::npos) {
        return InvalidArgument("--connect '" + spec + "': expected TELEMETRY[,CONTROL]");
      }
      if (e.control.empty()) {
        return InvalidArgument("--connect '" + spec + "': empty CONTROL after the comma");
      }
    }
    if (e.telemetry.empty()) {
      return InvalidArgument("--connect '" + spec + "': empty TELEMETRY endpoint");
    }
    if (e.control.empty()) {
      if (connects.size() == 1) {
        e.control = control.value_or(std::string(kDefaultControl));
      } else if (auto next = NextPort(e.telemetry)) {
        e.control = *next;
      } else {
        return InvalidArgument("--connect '" + spec +
                               "': name its control endpoint (--connect TELEMETRY,CONTROL); "
                               "only tcp://HOST:PORT implies PORT+1");
      }
    }
    if (!seen.insert(e.telemetry).second) {
      return InvalidArgument("--connect " + e.telemetry + " is given twice");
    }
    out.push_back(std::move(e));
  }
  return out;
}

Result<std::unique_ptr<EngineSet>> EngineSet::Start(const EngineSetOptions& options) {
  if (options.engines.empty()) return InvalidArgument("no engine to connect to");
  auto set = std::unique_ptr<EngineSet>(new EngineSet(options));
  if (!options.db_path.empty()) {
    store::WriterOptions wo;
    for (const EngineEndpoints& e : options.engines) {
      wo.session_hosts += (wo.session_hosts.empty() ? "" : ",") + e.telemetry;
    }
    auto writer = store::Writer::Open(options.db_path, wo);
    if (!writer.ok()) return writer.status().WithContext("store " + options.db_path);
    set->writer_ = std::move(writer).value();
  }
  for (size_t i = 0; i < options.engines.size(); ++i) {
    LiveOptions lo;
    lo.connect = options.engines[i].telemetry;
    lo.control = options.engines[i].control;
    lo.writer = set->writer_.get();
    lo.command_timeout = options.command_timeout;
    lo.collector = options.collector;
    lo.curve = options.curve;
    auto live = LiveSession::Start(lo);
    if (!live.ok()) {
      return options.engines.size() == 1
                 ? live.status()
                 : live.status().WithContext("engine " + std::to_string(i + 1));
    }
    set->sessions_.push_back(std::move(live).value());
  }
  return set;
}

EngineSet::~EngineSet() {
  sessions_.clear();  // their threads stop before the store closes
  writer_.reset();
}

std::vector<std::string> EngineSet::names() const {
  std::vector<std::string> out;
  for (const EngineEndpoints& e : options_.engines) out.push_back(e.telemetry);
  return out;
}

std::vector<Snapshot> EngineSet::TakeSnapshots() {
  std::vector<Snapshot> out;
  out.reserve(sessions_.size());
  for (auto& s : sessions_) out.push_back(s->collector().TakeSnapshot());
  return out;
}

void EngineSet::Send(int engine, const ParsedCommand& command) {
  for (int i = 0; i < size(); ++i) {
    if (engine < 0 || engine == i) sessions_[i]->SendCommand(command);
  }
}

std::vector<std::pair<std::string, bool>> EngineSet::TakeCommandMessages() {
  std::vector<std::pair<std::string, bool>> out;
  for (int i = 0; i < size(); ++i) {
    for (auto& [text, error] : sessions_[i]->TakeCommandMessages()) {
      out.emplace_back(size() > 1 ? "engine " + std::to_string(i + 1) + ": " + text : text, error);
    }
  }
  return out;
}

std::vector<EngineSet::Question> EngineSet::TakeQuestions() {
  std::vector<Question> out;
  for (int i = 0; i < size(); ++i) {
    for (auto& q : sessions_[i]->TakeQuestions()) {
      if (size() > 1) q.text = "engine " + std::to_string(i + 1) + ": " + q.text;
      out.push_back(Question{i, std::move(q)});
    }
  }
  return out;
}

bool EngineSet::all_stopped() const {
  return std::all_of(sessions_.begin(), sessions_.end(),
                     [](const auto& s) { return s->stop_seen(); });
}

bool EngineSet::all_over() const {
  return std::all_of(sessions_.begin(), sessions_.end(),
                     [](const auto& s) { return s->run_over(); });
}

LiveSummary EngineSet::Finish() {
  LiveSummary sum;
  for (auto& s : sessions_) {
    const LiveSummary one = s->Finish();
    sum.received += one.received;
    sum.gaps += one.gaps;
    sum.malformed += one.malformed;
    // The store is shared: every session reports the same Writer's figures.
    sum.written = one.written;
    sum.dropped = one.dropped;
    if (sum.store_error.empty()) sum.store_error = one.store_error;
  }
  return sum;
}

}  // namespace sy::console
