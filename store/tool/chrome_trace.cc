// Chrome Trace Event Format export: a chunked JSON writer, the track (thread)
// allocator that keeps complete events nested, and one pass per table.

#include "store/tool/chrome_trace.h"

#include <charconv>
#include <map>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace sy::store::tool {
namespace {

using nlohmann::json;

constexpr size_t kChunkBytes = 1 << 20;

// JSON string literal; bytes that are not UTF-8 become U+FFFD (the store
// keeps strings byte for byte as received).
std::string Quote(std::string_view s) {
  return json(std::string(s)).dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string DumpJson(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

// Stored JSON text embedded as JSON when it parses, else as a string.
std::string JsonOrString(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  return j.is_discarded() ? Quote(text) : DumpJson(j);
}

// The output: events appended to a buffer handed to the sink every ~1 MiB.
class TraceOut {
 public:
  explicit TraceOut(const Sink& sink) : sink_(sink) { buf_ = "{\"traceEvents\":[\n"; }

  // Starts an event with its common fields; the caller appends the rest
  // (",\"ts\":...") and calls End().
  void Begin(std::string_view quoted_name, std::string_view ph, int64_t pid, int64_t tid) {
    if (events_++ > 0) buf_ += ",\n";
    buf_ += "{\"name\":";
    buf_ += quoted_name;
    buf_ += ",\"ph\":\"";
    buf_ += ph;
    buf_ += "\",\"pid\":";
    Int(pid);
    buf_ += ",\"tid\":";
    Int(tid);
  }
  // ,"key":value with an integer value.
  void Field(std::string_view key, int64_t v) {
    buf_ += ",\"";
    buf_ += key;
    buf_ += "\":";
    Int(v);
  }
  // ,"key":<raw JSON>
  void Raw(std::string_view key, std::string_view raw) {
    buf_ += ",\"";
    buf_ += key;
    buf_ += "\":";
    buf_ += raw;
  }
  std::string& buf() { return buf_; }
  void Int(int64_t v) {
    char tmp[24];
    auto [end, ec] = std::to_chars(tmp, tmp + sizeof tmp, v);
    buf_.append(tmp, end);
  }
  Status End() {
    buf_ += '}';
    return buf_.size() >= kChunkBytes ? Flush() : Status::Ok();
  }
  Status Close(const json& other) {
    buf_ += "\n],\"displayTimeUnit\":\"ms\",\"otherData\":" + DumpJson(other) + "}\n";
    return Flush();
  }
  int64_t bytes() const { return bytes_; }

 private:
  Status Flush() {
    bytes_ += static_cast<int64_t>(buf_.size());
    Status s = sink_(buf_);
    buf_.clear();
    return s;
  }

  const Sink& sink_;
  std::string buf_;
  int64_t events_ = 0;
  int64_t bytes_ = 0;
};

// A stream of events shown as one track, split over more tracks ("#2", ...)
// when its complete events overlap without nesting.
struct Stream {
  std::string name;
  int64_t sort = 0;
  struct Lane {
    int64_t tid = 0;
    std::vector<int64_t> ends;  // open events, outermost first; non-increasing
  };
  std::vector<Lane> lanes;
};

class Tracks {
 public:
  Tracks(TraceOut& out, int64_t pid, ExportStats& stats) : out_(out), pid_(pid), stats_(stats) {}

  // The tid for an event [start, end] of `s`, in (start, longer first) order:
  // the first lane where it nests in what is open or starts after it ended.
  Result<int64_t> Place(Stream& s, int64_t start, int64_t end) {
    for (Stream::Lane& lane : s.lanes) {
      while (!lane.ends.empty() && lane.ends.back() <= start) lane.ends.pop_back();
      if (lane.ends.empty() || end <= lane.ends.back()) {
        lane.ends.push_back(end);
        return lane.tid;
      }
    }
    ASSIGN_OR_RETURN(int64_t tid, NewLane(s));
    s.lanes.back().ends.push_back(end);
    return tid;
  }
  // The stream's first track, for instants (they have no extent).
  Result<int64_t> First(Stream& s) {
    if (!s.lanes.empty()) return s.lanes[0].tid;
    return NewLane(s);
  }

 private:
  Result<int64_t> NewLane(Stream& s) {
    const int64_t tid = next_tid_++;
    const size_t lane = s.lanes.size();
    s.lanes.push_back({tid, {}});
    const std::string name = lane == 0 ? s.name : s.name + " #" + std::to_string(lane + 1);
    out_.Begin("\"thread_name\"", "M", pid_, tid);
    out_.Raw("args", "{\"name\":" + Quote(name) + "}");
    RETURN_IF_ERROR(out_.End());
    out_.Begin("\"thread_sort_index\"", "M", pid_, tid);
    out_.Raw("args",
             "{\"sort_index\":" + std::to_string(s.sort + static_cast<int64_t>(lane)) + "}");
    RETURN_IF_ERROR(out_.End());
    ++stats_.tracks;
    if (lane > 0) ++stats_.overflow_tracks;
    return tid;
  }

  TraceOut& out_;
  int64_t pid_;
  ExportStats& stats_;
  int64_t next_tid_ = 1;  // tid 0 carries the process's counters and metadata
};

struct RunRow {
  int64_t rid = 0;
  std::string model;
  int64_t devices = 0;
  int64_t started_unix_ms = 0;
};

class Exporter {
 public:
  Exporter(Db& db, const ExportOptions& o, const RunRow& run, TraceOut& out)
      : db_(db), o_(o), run_(run), out_(out), tracks_(out, run.rid, stats_) {}

  Result<ExportStats> Run() {
    RETURN_IF_ERROR(Process());
    RETURN_IF_ERROR(Steps());
    RETURN_IF_ERROR(Spans());
    RETURN_IF_ERROR(Counters());
    RETURN_IF_ERROR(Events());
    RETURN_IF_ERROR(Commands());
    json other = {{"exporter", "moe-store"},
                  {"run", o_.run},
                  {"model", run_.model},
                  {"devices", run_.devices},
                  {"started_unix_ms", run_.started_unix_ms},
                  {"store", db_.path()},
                  {"time_unit", "us of engine time since the run started"}};
    if (o_.from_us != std::numeric_limits<int64_t>::min()) other["from_us"] = o_.from_us;
    if (o_.to_us != std::numeric_limits<int64_t>::max()) other["to_us"] = o_.to_us;
    RETURN_IF_ERROR(out_.Close(other));
    stats_.bytes = out_.bytes();
    return stats_;
  }

 private:
  Result<Stmt> Query(std::string_view sql) {
    ASSIGN_OR_RETURN(Stmt st, Stmt::Prepare(db_, sql));
    st.Bind(1, run_.rid).Bind(2, o_.from_us).Bind(3, o_.to_us);
    return st;
  }

  Status Process() {
    std::string name = o_.run + " · " + (run_.model.empty() ? "?" : run_.model) + " · " +
                       std::to_string(run_.devices) + " devices";
    out_.Begin("\"process_name\"", "M", run_.rid, 0);
    out_.Raw("args", "{\"name\":" + Quote(name) + "}");
    RETURN_IF_ERROR(out_.End());
    out_.Begin("\"process_sort_index\"", "M", run_.rid, 0);
    out_.Raw("args", "{\"sort_index\":" + std::to_string(run_.rid) + "}");
    return out_.End();
  }

  Status Steps() {
    Stream steps{"steps", 0, {}};
    ASSIGN_OR_RETURN(Stmt st, Query("SELECT step, start_us, max(dur_us, 0), prefill_tokens, "
                                    "decode_tokens, batch_requests, running, waiting FROM steps "
                                    "WHERE run = ?1 AND start_us <= ?3 AND start_us + dur_us >= ?2 "
                                    "ORDER BY start_us, dur_us DESC, id"));
    for (;;) {
      ASSIGN_OR_RETURN(bool row, st.Step("reading"));
      if (!row) break;
      const int64_t start = st.Int(1), dur = st.Int(2);
      ASSIGN_OR_RETURN(int64_t tid, tracks_.Place(steps, start, start + dur));
      out_.Begin(Quote("step " + std::to_string(st.Int(0))), "X", run_.rid, tid);
      out_.Raw("cat", "\"step\"");
      out_.Field("ts", start);
      out_.Field("dur", dur);
      out_.buf() += ",\"args\":{\"step\":";
      out_.Int(st.Int(0));
      out_.Field("prefill_tokens", st.Int(3));
      out_.Field("decode_tokens", st.Int(4));
      out_.Field("batch_requests", st.Int(5));
      out_.Field("running", st.Int(6));
      out_.Field("waiting", st.Int(7));
      out_.buf() += '}';
      RETURN_IF_ERROR(out_.End());
      ++stats_.steps;
    }
    return Status::Ok();
  }

  Status Spans() {
    std::unordered_map<int64_t, std::string> quoted;  // names.id -> JSON string
    std::unordered_map<int64_t, std::string> plain;
    {
      ASSIGN_OR_RETURN(Stmt st, Stmt::Prepare(db_, "SELECT id, s FROM names"));
      for (;;) {
        ASSIGN_OR_RETURN(bool row, st.Step("reading"));
        if (!row) break;
        plain[st.Int(0)] = st.Text(1);
        quoted[st.Int(0)] = Quote(st.Text(1));
      }
    }
    // Kinds: compute, then comm, then others as met; their tracks sort so.
    std::unordered_map<int64_t, int64_t> kind_slot;
    for (const auto& [id, s] : plain) {
      if (s == "compute") kind_slot[id] = 0;
      if (s == "comm") kind_slot[id] = 1;
    }
    int64_t next_slot = 2;
    std::map<std::pair<int64_t, int64_t>, Stream> streams;  // (device, kind id)
    ASSIGN_OR_RETURN(
        Stmt st,
        Query("SELECT s.device, s.kind, s.name, s.start_us, max(s.dur_us, 0), s.layer, s.step, "
              "s.tokens, s.flops, s.bytes FROM span_batches b JOIN spans s ON s.batch = b.id "
              "WHERE b.run = ?1 AND s.start_us <= ?3 AND s.start_us + s.dur_us >= ?2 "
              "ORDER BY s.start_us, s.dur_us DESC, s.device, s.batch, s.idx"));
    for (;;) {
      ASSIGN_OR_RETURN(bool row, st.Step("reading"));
      if (!row) break;
      const int64_t device = st.Int(0), kind = st.Int(1), name = st.Int(2);
      const int64_t start = st.Int(3), dur = st.Int(4);
      auto [it, fresh] = streams.try_emplace({device, kind});
      Stream& s = it->second;
      if (fresh) {
        auto slot = kind_slot.try_emplace(kind, next_slot);
        if (slot.second) ++next_slot;
        s.name = "device " + std::to_string(device) + " " + plain[kind];
        s.sort = 1000 * (device + 1) + 100 * slot.first->second;
      }
      ASSIGN_OR_RETURN(int64_t tid, tracks_.Place(s, start, start + dur));
      out_.Begin(quoted[name], "X", run_.rid, tid);
      out_.Raw("cat", quoted[kind]);
      out_.Field("ts", start);
      out_.Field("dur", dur);
      out_.buf() += ",\"args\":{\"layer\":";
      out_.Int(st.Int(5));
      out_.Field("step", st.Int(6));
      out_.Field("tokens", st.Int(7));
      out_.Field("flops", st.Int(8));
      out_.Field("bytes", st.Int(9));
      out_.buf() += '}';
      RETURN_IF_ERROR(out_.End());
      ++stats_.spans;
    }
    return Status::Ok();
  }

  Status Counter(std::string_view name, int64_t t, std::string_view args) {
    out_.Begin(name, "C", run_.rid, 0);
    out_.Field("ts", t);
    out_.Raw("args", args);
    ++stats_.counters;
    return out_.End();
  }

  Status Counters() {
    ASSIGN_OR_RETURN(
        Stmt st,
        Query("SELECT o.id, o.t_us, o.running, o.waiting, o.prefill_tokens, o.decode_tokens, "
              "d.device, d.kv_pages_used, d.state_slots_used, d.state_slots_total "
              "FROM occupancy o LEFT JOIN occupancy_devices d ON d.occ = o.id "
              "WHERE o.run = ?1 AND o.t_us >= ?2 AND o.t_us <= ?3 ORDER BY o.t_us, o.id, d.idx"));
    int64_t last = -1;
    for (;;) {
      ASSIGN_OR_RETURN(bool row, st.Step("reading"));
      if (!row) break;
      const int64_t t = st.Int(1);
      if (st.Int(0) != last) {
        last = st.Int(0);
        RETURN_IF_ERROR(Counter("\"requests\"", t,
                                "{\"running\":" + std::to_string(st.Int(2)) +
                                    ",\"waiting\":" + std::to_string(st.Int(3)) + "}"));
        RETURN_IF_ERROR(Counter("\"tokens\"", t,
                                "{\"prefill\":" + std::to_string(st.Int(4)) +
                                    ",\"decode\":" + std::to_string(st.Int(5)) + "}"));
      }
      if (st.IsNull(6)) continue;  // an occupancy message without devices
      const std::string dev = "device " + std::to_string(st.Int(6));
      RETURN_IF_ERROR(
          Counter(Quote(dev + " KV pages"), t, "{\"used\":" + std::to_string(st.Int(7)) + "}"));
      if (st.Int(9) > 0) {
        RETURN_IF_ERROR(Counter(Quote(dev + " state slots"), t,
                                "{\"used\":" + std::to_string(st.Int(8)) + "}"));
      }
    }
    return Status::Ok();
  }

  Status Instant(Stream& s, const std::string& name, const std::string& cat, int64_t t,
                 const std::string& args) {
    ASSIGN_OR_RETURN(int64_t tid, tracks_.First(s));
    out_.Begin(Quote(name), "i", run_.rid, tid);
    out_.Raw("cat", Quote(cat));
    out_.Raw("s", "\"t\"");
    out_.Field("ts", t);
    out_.Raw("args", args);
    ++stats_.instants;
    return out_.End();
  }

  Status Events() {
    std::map<std::string, Stream> streams;  // by kind; few and sparse
    ASSIGN_OR_RETURN(Stmt st, Query("SELECT t_us, kind, name, phase, message, detail FROM events "
                                    "WHERE run = ?1 AND t_us >= ?2 AND t_us <= ?3 "
                                    "ORDER BY t_us, id"));
    for (;;) {
      ASSIGN_OR_RETURN(bool row, st.Step("reading"));
      if (!row) break;
      const std::string kind = st.Text(1), name = st.Text(2), phase = st.Text(3);
      auto [it, fresh] = streams.try_emplace(kind);
      if (fresh) {
        it->second.name = "events: " + kind;
        it->second.sort = 1000000 + static_cast<int64_t>(streams.size());
      }
      const std::string args = "{\"message\":" + Quote(st.Text(4)) + ",\"phase\":" + Quote(phase) +
                               ",\"detail\":" + JsonOrString(st.Text(5)) + "}";
      RETURN_IF_ERROR(
          Instant(it->second, phase.empty() ? name : name + " " + phase, kind, st.Int(0), args));
    }
    return Status::Ok();
  }

  // The console's own record of each operator command. Its engine time is
  // known when the console had seen the run; otherwise it is placed by wall
  // clock from the run's start.
  Status Commands() {
    Stream ops{"operator commands", 900000, {}};
    ASSIGN_OR_RETURN(Stmt st, Stmt::Prepare(db_,
                                            "SELECT t_us, unix_ms, text, request, ok, reply "
                                            "FROM commands WHERE run = ?1 ORDER BY id"));
    st.Bind(1, run_.rid);
    for (;;) {
      ASSIGN_OR_RETURN(bool row, st.Step("reading"));
      if (!row) break;
      int64_t t = st.Int(0);
      if (t <= 0 && run_.started_unix_ms > 0 && st.Int(1) >= run_.started_unix_ms) {
        t = (st.Int(1) - run_.started_unix_ms) * 1000;
      }
      if (t < o_.from_us || t > o_.to_us) continue;
      const std::string args = std::string("{\"ok\":") + (st.Int(4) != 0 ? "true" : "false") +
                               ",\"request\":" + JsonOrString(st.Text(3)) +
                               ",\"reply\":" + JsonOrString(st.Text(5)) + "}";
      RETURN_IF_ERROR(Instant(ops, st.Text(2), "operator", t, args));
    }
    return Status::Ok();
  }

  Db& db_;
  const ExportOptions& o_;
  RunRow run_;
  TraceOut& out_;
  ExportStats stats_;
  Tracks tracks_;
};

Result<RunRow> FindRun(Db& db, const std::string& id) {
  ASSIGN_OR_RETURN(Stmt st, Stmt::Prepare(db,
                                          "SELECT rid, model, devices, started_unix_ms FROM runs "
                                          "WHERE id = ?1"));
  st.Bind(1, id);
  ASSIGN_OR_RETURN(bool row, st.Step("reading"));
  if (!row) return NotFound("no run '" + id + "' in " + db.path());
  return RunRow{st.Int(0), st.Text(1), st.Int(2), st.Int(3)};
}

}  // namespace

Result<ExportStats> ExportChromeTrace(Db& db, const ExportOptions& options, const Sink& sink) {
  if (options.from_us > options.to_us) {
    return InvalidArgument("the window starts after it ends (from " +
                           std::to_string(options.from_us) + " us > to " +
                           std::to_string(options.to_us) + " us)");
  }
  RETURN_IF_ERROR(db.Exec("BEGIN", "reading"));
  auto body = [&]() -> Result<ExportStats> {
    ASSIGN_OR_RETURN(RunRow run, FindRun(db, options.run));
    TraceOut out(sink);
    return Exporter(db, options, run, out).Run();
  };
  Result<ExportStats> stats = body();
  db.Exec("COMMIT", "reading").IgnoreError();
  return stats;
}

}  // namespace sy::store::tool
