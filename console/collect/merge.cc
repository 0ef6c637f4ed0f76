#include "console/collect/merge.h"

#include <algorithm>
#include <string>

namespace sy::console {
namespace {

// Severity order for the merged connection state: engines that ended their
// runs do not hide one still live.
int Severity(ConnState c) {
  switch (c) {
    case ConnState::kEnded:
      return 0;
    case ConnState::kLive:
      return 1;
    case ConnState::kReplay:
      return 2;
    case ConnState::kWaiting:
      return 3;
    case ConnState::kDegraded:
      return 4;
    case ConnState::kLost:
      return 5;
  }
  return 0;
}

// out[len - 1 - i] += in[in.size() - 1 - i]: aligned on the newest point.
void AddAligned(std::vector<double>& out, const std::vector<double>& in) {
  if (in.size() > out.size()) out.insert(out.begin(), in.size() - out.size(), 0.0);
  const size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) out[off + i] += in[i];
}

void JoinDistinct(std::string& joined, const std::string& s) {
  if (s.empty()) return;
  if (joined.empty()) {
    joined = s;
    return;
  }
  size_t start = 0;
  for (;;) {
    const size_t slash = joined.find('/', start);
    if (joined.compare(start, slash == std::string::npos ? std::string::npos : slash - start, s) ==
        0) {
      return;
    }
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  joined += "/" + s;
}

}  // namespace

Snapshot MergeSnapshots(const std::vector<Snapshot>& engines) {
  if (engines.empty()) return Snapshot{};
  if (engines.size() == 1) return engines[0];
  Snapshot m;
  m.conn = engines[0].conn;
  m.have_store = engines[0].have_store;
  m.store_written = engines[0].store_written;
  m.store_dropped = engines[0].store_dropped;
  m.store_error = engines[0].store_error;
  m.db_path = engines[0].db_path;
  m.replay = engines[0].replay;
  bool all_paused = true, any_running = false, any_stopping = false, all_stopped = true;
  std::string layouts, presets, levels;
  int64_t p50_weighted_ttft = 0, p50_weighted_tpot = 0;
  int device_base = 0;
  m.latest_step = -1;
  for (const Snapshot& s : engines) {
    if (Severity(s.conn) > Severity(m.conn)) m.conn = s.conn;
    m.heartbeat_age_s = std::max(m.heartbeat_age_s, s.heartbeat_age_s);
    if (s.have_meta) {
      if (!m.have_meta) {
        m.have_meta = true;
        m.meta = s.meta;
        m.meta.devices = 0;
      }
      m.meta.devices += s.meta.devices;
      JoinDistinct(layouts, s.meta.layout);
      JoinDistinct(presets, s.meta.model.preset);
    }
    all_paused = all_paused && s.paused;
    any_running = any_running || s.engine_state == "running";
    any_stopping = any_stopping || s.engine_state == "stopping";
    all_stopped = all_stopped && s.run_stopped;
    JoinDistinct(levels, s.trace_level);
    m.latest_t_us = std::max(m.latest_t_us, s.latest_t_us);
    m.latest_step = std::max(m.latest_step, s.latest_step);

    AddAligned(m.prefill_tps, s.prefill_tps);
    AddAligned(m.decode_tps, s.decode_tps);
    AddAligned(m.batch, s.batch);
    AddAligned(m.running, s.running);
    AddAligned(m.waiting, s.waiting);
    m.series_end_s = std::max(m.series_end_s, s.series_end_s);
    m.cur_prefill_tps += s.cur_prefill_tps;
    m.cur_decode_tps += s.cur_decode_tps;
    m.cur_batch += s.cur_batch;
    m.cur_running += s.cur_running;
    m.cur_waiting += s.cur_waiting;
    m.finished_total += s.finished_total;
    m.generated_total += s.generated_total;

    m.ttft.count += s.ttft.count;
    m.tpot.count += s.tpot.count;
    m.ttft.p99_us = std::max(m.ttft.p99_us, s.ttft.p99_us);
    m.tpot.p99_us = std::max(m.tpot.p99_us, s.tpot.p99_us);
    p50_weighted_ttft += s.ttft.p50_us * s.ttft.count;
    p50_weighted_tpot += s.tpot.p50_us * s.tpot.count;

    int devices = 0;
    for (telemetry::DeviceOccupancy d : s.kv) {
      devices = std::max(devices, d.device + 1);
      d.device += device_base;
      m.kv.push_back(d);
    }
    device_base += std::max(devices, s.have_meta ? s.meta.devices : 0);

    if (s.have_requests) {
      m.have_requests = true;
      m.requests.step = std::max(m.requests.step, s.requests.step);
      m.requests.running.insert(m.requests.running.end(), s.requests.running.begin(),
                                s.requests.running.end());
      m.requests.waiting.insert(m.requests.waiting.end(), s.requests.waiting.begin(),
                                s.requests.waiting.end());
      m.requests.running_total += s.requests.running_total;
      m.requests.waiting_total += s.requests.waiting_total;
    }
    m.finished.insert(m.finished.end(), s.finished.begin(), s.finished.end());
    m.retractions += s.retractions;

    m.received += s.received;
    m.gaps += s.gaps;
    m.malformed += s.malformed;
    m.steps_seen += s.steps_seen;
    m.requests_seen += s.requests_seen;
    m.spans_seen += s.spans_seen;
    m.engine_dropped += s.engine_dropped;
  }
  if (m.ttft.count > 0) m.ttft.p50_us = p50_weighted_ttft / m.ttft.count;
  if (m.tpot.count > 0) m.tpot.p50_us = p50_weighted_tpot / m.tpot.count;
  if (m.have_meta) {
    m.meta.layout = layouts;
    m.meta.model.preset = presets;
  }
  m.trace_level = levels;
  m.paused = all_paused;
  m.run_stopped = all_stopped;
  m.engine_state = any_running ? "running" : any_stopping ? "stopping" : all_paused ? "paused" : "";
  return m;
}

}  // namespace sy::console
