#include "console/collect/collector.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "console/collect/kernel_trace.h"
#include "console/collect/parallel_text.h"
#include "console/collect/rebalance_text.h"

namespace sy::console {
namespace {

constexpr int64_t kUsPerS = 1'000'000;

void PushBounded(std::deque<int64_t>& d, int64_t v, int cap) {
  d.push_back(v);
  while (static_cast<int>(d.size()) > cap) d.pop_front();
}

}  // namespace

const char* ConnStateName(ConnState s) {
  switch (s) {
    case ConnState::kWaiting:
      return "waiting";
    case ConnState::kLive:
      return "live";
    case ConnState::kDegraded:
      return "degraded";
    case ConnState::kLost:
      return "lost";
    case ConnState::kReplay:
      return "replay";
    case ConnState::kEnded:
      return "ended";
  }
  return "?";
}

int64_t Percentile(std::vector<int64_t> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double rank = std::ceil(p / 100.0 * static_cast<double>(values.size()));
  const size_t idx = static_cast<size_t>(std::clamp(rank, 1.0, double(values.size()))) - 1;
  return values[idx];
}

Collector::Collector(CollectorOptions options)
    : options_(std::move(options)),
      experts_(options_.expert_window_steps, options_.series_seconds),
      heartbeat_ms_(options_.default_heartbeat_ms) {}

void Collector::Consume(const telemetry::Message& m) {
  std::lock_guard lock(mu_);
  const telemetry::Envelope& env = telemetry::EnvelopeOf(m);
  if (!env.run.empty() && env.run != s_.run) {
    if (!s_.run.empty())
      Log(env.t_us, LogLevel::kInfo, "new run " + env.run + " (was " + s_.run + ")");
    ResetLocked();
    s_.run = env.run;
  }
  ++own_received_;
  const std::string topic(telemetry::TopicOf(m));
  auto it = next_seq_.find(topic);
  if (it != next_seq_.end() && env.seq > it->second) own_gaps_ += env.seq - it->second;
  if (it == next_seq_.end() || env.seq >= it->second) next_seq_[topic] = env.seq + 1;
  s_.latest_t_us = std::max(s_.latest_t_us, env.t_us);
  // Any message proves the engine is alive, not only heartbeats (the ZeroMQ
  // guide's Paranoid Pirate rule): a console that digests a backlog slower
  // than the engine makes it, heartbeats queued behind spans, must not call a
  // busy engine lost (and, headless with --exit-on-stop, quit mid-run).
  last_beat_ = options_.clock();
  std::visit([this](const auto& msg) { OnMessage(msg); }, m);
}

void Collector::OnMessage(const telemetry::Meta& m) {
  if (!s_.have_meta) {
    Log(m.env.t_us, LogLevel::kInfo,
        "run " + m.env.run + ": " + m.model.preset + " on " + std::to_string(m.devices) +
            " devices, " + m.layout + (m.workload.empty() ? "" : ", workload " + m.workload));
  }
  s_.have_meta = true;
  s_.meta = m;
  s_.trace_level = m.trace_level;
  s_.paused = m.paused;
  if (s_.engine_state.empty() || s_.engine_state == "running" || s_.engine_state == "paused") {
    s_.engine_state = m.paused ? "paused" : "running";
  }
  experts_.SetMetaDevices(m.expert_device);
  s_.parallel.layout = m.layout;
  ApplyPolicyJson(m.policy, s_.parallel.policy);
}

void Collector::OnMessage(const telemetry::Step& m) {
  ++s_.steps_seen;
  s_.latest_step = std::max(s_.latest_step, m.step);
  s_.cur_batch = m.batch_requests;
  s_.cur_running = m.running;
  s_.cur_waiting = m.waiting;
  s_.finished_total = m.finished_total;
  s_.generated_total = m.generated_total;
  const int64_t sec = m.env.t_us / kUsPerS;
  if (buckets_.empty() || buckets_.back().second < sec) {
    Bucket b;
    b.second = sec;
    buckets_.push_back(b);
  }
  // Messages arrive in time order; an out-of-order step lands in the newest
  // bucket rather than rewriting history.
  Bucket& b = buckets_.back();
  b.prefill += m.prefill_tokens;
  b.decode += m.decode_tokens;
  b.batch_sum += m.batch_requests;
  ++b.steps;
  b.running = m.running;
  b.waiting = m.waiting;
  while (buckets_.back().second - buckets_.front().second >= options_.series_seconds) {
    buckets_.pop_front();
  }
}

void Collector::OnMessage(const telemetry::Spans& m) {
  s_.spans_seen += static_cast<int64_t>(m.spans.size());
  if (m.step < s_.spans_step) return;
  s_.spans_step = m.step;
  s_.spans = m.spans;
  std::stable_sort(s_.spans.begin(), s_.spans.end(), [](const auto& a, const auto& b) {
    return std::tie(a.device, a.start_us) < std::tie(b.device, b.start_us);
  });
  // The same step again (a resend) replaces the kept copy.
  if (!s_.span_steps.empty() && s_.span_steps.back()->step == m.step) s_.span_steps.pop_back();
  s_.span_steps.push_back(
      std::make_shared<const StepSpans>(StepSpans{m.step, m.env.t_us, s_.spans}));
  const size_t keep = static_cast<size_t>(std::max(1, options_.span_steps_kept));
  if (s_.span_steps.size() > keep) {
    s_.span_steps.erase(
        s_.span_steps.begin(),
        s_.span_steps.begin() + static_cast<ptrdiff_t>(s_.span_steps.size() - keep));
  }
}

void Collector::OnMessage(const telemetry::KernelStats& m) {
  if (m.step < s_.kstats_step) return;
  if (!kstats_.empty() && kstats_.back().step == m.step) kstats_.pop_back();
  s_.kstats_step = m.step;
  kstats_.push_back(m);
  while (static_cast<int>(kstats_.size()) > std::max(1, options_.kernel_steps_kept)) {
    kstats_.pop_front();
  }
  s_.top_kernels = KernelWindowRows(kstats_);
}

void Collector::OnMessage(const telemetry::Occupancy& m) {
  s_.kv = m.devices;
  std::sort(s_.kv.begin(), s_.kv.end(),
            [](const auto& a, const auto& b) { return a.device < b.device; });
  s_.cur_running = m.running;
  s_.cur_waiting = m.waiting;
}

void Collector::OnMessage(const telemetry::ExpertLoad& m) { experts_.Add(m); }

void Collector::OnMessage(const telemetry::RequestDone& m) {
  ++s_.requests_seen;
  // A one-token answer has no time per output token; leave it out. A
  // request cancelled before its first token has no latency at all.
  const bool answered = !(m.finish == "cancelled" && m.output_tokens == 0);
  if (answered) PushBounded(ttft_, m.ttft_us, options_.request_window);
  if (m.output_tokens > 1) PushBounded(tpot_, m.tpot_us, options_.request_window);
  finished_.push_back(m);
  while (static_cast<int>(finished_.size()) > options_.finished_kept) finished_.pop_front();
}

void Collector::OnMessage(const telemetry::Requests& m) {
  // Snapshots replace each other; an older one arriving late is ignored.
  if (s_.have_requests && m.step < s_.requests.step) return;
  s_.have_requests = true;
  s_.requests = m;
}

void Collector::OnMessage(const telemetry::Event& m) {
  if (IsParallelEvent(m)) {
    // A switch is a phase breakdown, a calibration a table: worded in
    // parallel_text.cc, each line with its own level.
    ApplyParallelEvent(m, s_.latest_step, s_.parallel);
    for (LogLine& line : ParallelEventLines(m)) {
      Log(line.t_us, line.level, std::move(line.text), m.kind);
    }
    return;
  }
  if (m.kind == "rebalance") {
    // A plan is a table and a finished move a before/after summary: several
    // lines, worded in rebalance_text.cc; a failure is an error.
    ApplyRebalanceEvent(m, s_.rebalance);
    const LogLevel level = m.phase == "failed" ? LogLevel::kError : LogLevel::kInfo;
    for (std::string& line : RebalanceEventLines(m)) {
      Log(m.env.t_us, level, std::move(line), m.kind);
    }
    return;
  }
  LogLevel level = LogLevel::kInfo;
  if (m.kind == "command") level = LogLevel::kCommand;
  // A retraction means a request lost its KV pages and recomputes: worth
  // noticing, like a warning.
  if (m.kind == "warning" || m.kind == "scheduler") level = LogLevel::kWarn;
  if (m.kind == "scheduler" && m.name == "retract") ++s_.retractions;
  if (m.phase == "failed") level = LogLevel::kError;
  std::string text = m.kind + " " + m.name;
  if (!m.phase.empty()) text += " " + m.phase;
  if (!m.message.empty()) text += ": " + m.message;
  Log(m.env.t_us, level, std::move(text), m.kind);
  if (m.kind == "lifecycle" && m.name == "stop") s_.run_stopped = true;
}

void Collector::OnMessage(const telemetry::Heartbeat& m) {
  last_beat_ = options_.clock();
  if (m.interval_ms > 0) heartbeat_ms_ = m.interval_ms;
  s_.engine_state = m.state;
  s_.paused = m.state == "paused";
  s_.engine_dropped = m.dropped_total;
  s_.latest_step = std::max(s_.latest_step, m.step);
}

void Collector::Log(int64_t t_us, LogLevel level, std::string text, std::string kind) {
  log_.push_back(LogLine{t_us, level, std::move(text), std::move(kind)});
  while (log_.size() > options_.log_capacity) log_.pop_front();
}

void Collector::AddLog(LogLevel level, std::string text) {
  std::lock_guard lock(mu_);
  Log(-1, level, std::move(text));
}

void Collector::ApplyCommandResult(const std::string& cmd, const nlohmann::json& result) {
  std::lock_guard lock(mu_);
  if (!result.is_object()) return;
  if (cmd == "rebalance_auto") ApplyRebalanceAutoResult(result, s_.rebalance);
  if (cmd == "policy") ApplyPolicyJson(result, s_.parallel.policy);
  if (auto p = result.find("paused"); p != result.end() && p->is_boolean()) {
    s_.paused = p->get<bool>();
    s_.engine_state = s_.paused ? "paused" : "running";
  }
  if (auto st = result.find("state"); st != result.end() && st->is_string()) {
    s_.engine_state = st->get<std::string>();
    s_.paused = s_.engine_state == "paused";
  }
  for (const char* key : {"trace_level", "level"}) {
    if (auto l = result.find(key); l != result.end() && l->is_string()) {
      s_.trace_level = l->get<std::string>();
      break;
    }
  }
}

void Collector::SetTransportCounters(const TransportCounters& c) {
  std::lock_guard lock(mu_);
  have_transport_ = true;
  transport_ = c;
}

void Collector::SetStoreCounters(const StoreCounters& c) {
  std::lock_guard lock(mu_);
  s_.have_store = true;
  s_.store_written = c.written;
  s_.store_dropped = c.dropped;
  s_.store_error = c.error;
  s_.db_path = c.path;
}

void Collector::SetReplayClock(const ReplayClock& c) {
  std::lock_guard lock(mu_);
  replay_ = true;
  s_.replay = c;
}

void Collector::Reset() {
  std::lock_guard lock(mu_);
  ResetLocked();
  log_.clear();
  own_received_ = 0;
  own_gaps_ = 0;
}

void Collector::ResetLocked() {
  Snapshot fresh;
  fresh.have_store = s_.have_store;
  fresh.store_written = s_.store_written;
  fresh.store_dropped = s_.store_dropped;
  fresh.store_error = s_.store_error;
  fresh.db_path = s_.db_path;
  fresh.replay = s_.replay;
  s_ = std::move(fresh);
  buckets_.clear();
  ttft_.clear();
  tpot_.clear();
  finished_.clear();
  kstats_.clear();
  experts_.Reset();
  next_seq_.clear();
  heartbeat_ms_ = options_.default_heartbeat_ms;
}

Snapshot Collector::TakeSnapshot() const {
  std::lock_guard lock(mu_);
  Snapshot s = s_;
  s.received = have_transport_ ? transport_.received : own_received_;
  s.gaps = have_transport_ ? transport_.gaps : own_gaps_;
  s.malformed = have_transport_ ? transport_.malformed : 0;

  if (replay_) {
    s.conn = ConnState::kReplay;
  } else if (own_received_ == 0) {
    s.conn = ConnState::kWaiting;
  } else {
    const auto age = options_.clock() - last_beat_;
    s.heartbeat_age_s = std::chrono::duration<double>(age).count();
    const double interval_s = heartbeat_ms_ / 1000.0;
    s.conn = s.run_stopped                        ? ConnState::kEnded
             : s.heartbeat_age_s > 5 * interval_s ? ConnState::kLost
             : s.heartbeat_age_s > 2 * interval_s ? ConnState::kDegraded
                                                  : ConnState::kLive;
  }

  // Series: one point per second from the oldest bucket to the second of the
  // newest message; idle seconds are zero, queue depths carry forward.
  if (!buckets_.empty()) {
    const int64_t last_sec = std::max(buckets_.back().second, s_.latest_t_us / kUsPerS);
    const int64_t first_sec =
        std::max(buckets_.front().second, last_sec - options_.series_seconds + 1);
    s.series_end_s = last_sec;
    auto b = buckets_.begin();
    int running = 0, waiting = 0;
    for (int64_t sec = first_sec; sec <= last_sec; ++sec) {
      while (b != buckets_.end() && b->second < sec) {
        running = b->running;
        waiting = b->waiting;
        ++b;
      }
      Bucket cur;
      if (b != buckets_.end() && b->second == sec) {
        cur = *b;
        running = b->running;
        waiting = b->waiting;
      }
      // The newest second is partial: scale by its elapsed part (at least
      // a quarter second, so the first step of a second does not spike).
      double span_s = 1.0;
      if (sec == last_sec) {
        span_s =
            std::clamp(static_cast<double>(s_.latest_t_us - sec * kUsPerS) / kUsPerS, 0.25, 1.0);
      }
      s.prefill_tps.push_back(static_cast<double>(cur.prefill) / span_s);
      s.decode_tps.push_back(static_cast<double>(cur.decode) / span_s);
      s.batch.push_back(cur.steps ? static_cast<double>(cur.batch_sum) / cur.steps : 0.0);
      s.running.push_back(running);
      s.waiting.push_back(waiting);
    }
    // The headline rate is the last complete second when there is one.
    const size_t n = s.decode_tps.size();
    const size_t i = n >= 2 ? n - 2 : n - 1;
    s.cur_prefill_tps = s.prefill_tps[i];
    s.cur_decode_tps = s.decode_tps[i];
  }

  s.ttft = {Percentile({ttft_.begin(), ttft_.end()}, 50),
            Percentile({ttft_.begin(), ttft_.end()}, 99), static_cast<int>(ttft_.size())};
  s.tpot = {Percentile({tpot_.begin(), tpot_.end()}, 50),
            Percentile({tpot_.begin(), tpot_.end()}, 99), static_cast<int>(tpot_.size())};

  experts_.Fill(s, s.have_meta ? std::max(s.meta.devices, 0) : 0);

  s.finished.assign(finished_.begin(), finished_.end());
  s.log.assign(log_.begin(), log_.end());
  return s;
}

}  // namespace sy::console
