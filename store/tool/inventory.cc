// list and show: the runs row plus a few indexed queries per run.

#include "store/tool/inventory.h"

#include <algorithm>
#include <cstdio>
#include <ctime>

#include <nlohmann/json.hpp>

#include "store/run_rows.h"
#include "store/schema.h"

namespace sy::store::tool {
namespace {

// store::Reader::ListRuns's order: newest first.
constexpr std::string_view kNewestFirst =
    "ORDER BY CASE WHEN started_unix_ms > 0 THEN started_unix_ms ELSE created_unix_ms END DESC, "
    "rid DESC";

RunSummary SummaryFromRow(const Stmt& st) {
  RunSummary s;
  s.info = RunFromRow(st);
  s.rid = st.Int(15);
  return s;
}

// Layouts, switches and rebalances: from the run's metas and events, both
// read through their (run, t_us) index.
class SummaryQueries {
 public:
  static Result<SummaryQueries> Prepare(Db& db) {
    SummaryQueries q;
    ASSIGN_OR_RETURN(q.layouts_,
                     Stmt::Prepare(db,
                                   "SELECT l FROM (SELECT CASE WHEN json_valid(body) THEN "
                                   "json_extract(body, '$.layout') END AS l, min(id) AS first "
                                   "FROM metas WHERE run = ?1 GROUP BY l) "
                                   "WHERE l IS NOT NULL AND l != '' ORDER BY first"));
    ASSIGN_OR_RETURN(q.events_, Stmt::Prepare(db,
                                              "SELECT ifnull(sum(kind = 'switch'), 0), "
                                              "ifnull(sum(kind = 'rebalance' AND "
                                              "name = 'rebalance'), 0) FROM events "
                                              "WHERE run = ?1 AND phase = 'done'"));
    return q;
  }

  Status Fill(RunSummary& s) {
    layouts_.Bind(1, s.rid);
    for (;;) {
      Result<bool> row = layouts_.Step("reading");
      if (!row.ok()) return row.status();
      if (!*row) break;
      s.layouts.push_back(layouts_.Text(0));
    }
    layouts_.Reset();
    events_.Bind(1, s.rid);
    ASSIGN_OR_RETURN(bool row, events_.Step("reading"));
    if (row) {
      s.switches = events_.Int(0);
      s.rebalances = events_.Int(1);
    }
    events_.Reset();
    return Status::Ok();
  }

 private:
  Stmt layouts_, events_;
};

// Runs `body` inside one read transaction, so every query sees one snapshot
// even while a console commits; inside the caller's transaction if it has one
// (prune lists under its write lock).
template <typename F>
auto InReadTransaction(Db& db, F body) -> decltype(body()) {
  if (sqlite3_get_autocommit(db.get()) == 0) return body();
  RETURN_IF_ERROR(db.Exec("BEGIN", "reading"));
  auto out = body();
  db.Exec("COMMIT", "reading").IgnoreError();
  return out;
}

std::string Pad(std::string s, size_t w, bool right) {
  if (s.size() >= w) return s;
  return right ? std::string(w - s.size(), ' ') + s : s + std::string(w - s.size(), ' ');
}

std::string Join(const std::vector<std::string>& v, std::string_view sep) {
  std::string out;
  for (const auto& s : v) {
    if (!out.empty()) out += sep;
    out += s;
  }
  return out;
}

}  // namespace

const std::vector<RunTable>& RunTables() {
  static const std::vector<RunTable> kTables = {
      {"spans", "span_batches", "batch"},
      {"span_batches", "", ""},
      {"kernel_stats", "kstat_batches", "batch"},
      {"kstat_batches", "", ""},
      {"occupancy_devices", "occupancy", "occ"},
      {"occupancy", "", ""},
      {"request_progress", "request_snapshots", "snap"},
      {"request_snapshots", "", ""},
      {"metas", "", ""},
      {"steps", "", ""},
      {"expert_load", "", ""},
      {"requests", "", ""},
      {"events", "", ""},
      {"heartbeats", "", ""},
      {"commands", "", ""},
  };
  return kTables;
}

std::string RunRowsSql(const RunTable& t, std::string_view what) {
  std::string sql = "SELECT " + std::string(what) + " FROM " + std::string(t.name) + " WHERE ";
  if (t.parent.empty()) return sql + "run = ?1";
  return sql + std::string(t.link) + " IN (SELECT id FROM " + std::string(t.parent) +
         " WHERE run = ?1)";
}

Result<std::vector<RunSummary>> ListRunSummaries(Db& db) {
  return InReadTransaction(db, [&]() -> Result<std::vector<RunSummary>> {
    ASSIGN_OR_RETURN(Stmt st,
                     Stmt::Prepare(db, std::string(kRunColumns) + std::string(kNewestFirst)));
    ASSIGN_OR_RETURN(SummaryQueries q, SummaryQueries::Prepare(db));
    std::vector<RunSummary> out;
    for (;;) {
      ASSIGN_OR_RETURN(bool row, st.Step("reading"));
      if (!row) break;
      out.push_back(SummaryFromRow(st));
      RETURN_IF_ERROR(q.Fill(out.back()));
    }
    return out;
  });
}

Result<RunSummary> GetRunSummary(Db& db, const std::string& id) {
  ASSIGN_OR_RETURN(Stmt st, Stmt::Prepare(db, std::string(kRunColumns) + "WHERE id = ?1"));
  st.Bind(1, id);
  ASSIGN_OR_RETURN(bool row, st.Step("reading"));
  if (!row) return NotFound("no run '" + id + "' in " + db.path());
  RunSummary s = SummaryFromRow(st);
  ASSIGN_OR_RETURN(SummaryQueries q, SummaryQueries::Prepare(db));
  RETURN_IF_ERROR(q.Fill(s));
  return s;
}

Result<RunDetail> GetRunDetail(Db& db, const std::string& id, int max_events) {
  return InReadTransaction(db, [&]() -> Result<RunDetail> {
    RunDetail d;
    ASSIGN_OR_RETURN(d.summary, GetRunSummary(db, id));
    const int64_t rid = d.summary.rid;
    {
      ASSIGN_OR_RETURN(Stmt st,
                       Stmt::Prepare(db, "SELECT ifnull(meta_json, '') FROM runs WHERE rid = ?1"));
      st.Bind(1, rid);
      ASSIGN_OR_RETURN(bool row, st.Step("reading"));
      if (row) d.meta_json = st.Text(0);
    }
    for (const RunTable& t : RunTables()) {
      ASSIGN_OR_RETURN(Stmt st, Stmt::Prepare(db, RunRowsSql(t, "count(*)")));
      st.Bind(1, rid);
      ASSIGN_OR_RETURN(bool row, st.Step("reading"));
      d.rows.emplace_back(std::string(t.name), row ? st.Int(0) : 0);
      if (t.name == "events") d.events_total = d.rows.back().second;
      if (t.name == "commands") d.commands_total = d.rows.back().second;
    }
    if (d.summary.info.session_id != 0) {
      ASSIGN_OR_RETURN(Stmt ses, Stmt::Prepare(db,
                                               "SELECT started_unix_ms, hosts FROM sessions "
                                               "WHERE id = ?1"));
      ses.Bind(1, d.summary.info.session_id);
      ASSIGN_OR_RETURN(bool row, ses.Step("reading"));
      if (row) {
        d.session_started_unix_ms = ses.Int(0);
        d.session_hosts = ses.Text(1);
      }
      ASSIGN_OR_RETURN(Stmt sib, Stmt::Prepare(db, std::string(kRunColumns) +
                                                       "WHERE session_id = ?1 AND rid != ?2 " +
                                                       std::string(kNewestFirst)));
      sib.Bind(1, d.summary.info.session_id).Bind(2, rid);
      for (;;) {
        ASSIGN_OR_RETURN(bool more, sib.Step("reading"));
        if (!more) break;
        d.siblings.push_back(RunFromRow(sib));
      }
    }
    ASSIGN_OR_RETURN(Stmt ev, Stmt::Prepare(db,
                                            "SELECT t_us, kind, name, phase, message FROM events "
                                            "WHERE run = ?1 ORDER BY t_us, id LIMIT ?2"));
    ev.Bind(1, rid).Bind(2, max_events);
    for (;;) {
      ASSIGN_OR_RETURN(bool row, ev.Step("reading"));
      if (!row) break;
      d.events.push_back({ev.Int(0), ev.Text(1), ev.Text(2), ev.Text(3), ev.Text(4)});
    }
    ASSIGN_OR_RETURN(Stmt cmd, Stmt::Prepare(db,
                                             "SELECT t_us, unix_ms, text, request, ok, reply "
                                             "FROM commands WHERE run = ?1 ORDER BY id LIMIT ?2"));
    cmd.Bind(1, rid).Bind(2, max_events);
    for (;;) {
      ASSIGN_OR_RETURN(bool row, cmd.Step("reading"));
      if (!row) break;
      CommandRecord c;
      c.run = id;
      c.t_us = cmd.Int(0);
      c.unix_ms = cmd.Int(1);
      c.text = cmd.Text(2);
      c.request = cmd.Text(3);
      c.ok = cmd.Int(4) != 0;
      c.reply = cmd.Text(5);
      d.commands.push_back(std::move(c));
    }
    return d;
  });
}

std::string FormatDuration(int64_t us) {
  char buf[32];
  if (us < 1000000) {
    std::snprintf(buf, sizeof buf, "%lldms", static_cast<long long>(us / 1000));
  } else if (us < 60000000) {
    std::snprintf(buf, sizeof buf, "%.1fs", static_cast<double>(us) / 1e6);
  } else if (us < 3600LL * 1000000) {
    const long long s = us / 1000000;
    std::snprintf(buf, sizeof buf, "%lldm%02llds", s / 60, s % 60);
  } else {
    const long long m = us / 60000000;
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", m / 60, m % 60);
  }
  return buf;
}

std::string FormatUnixMs(int64_t unix_ms) {
  if (unix_ms <= 0) return "-";
  const std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

std::string FormatRunTable(const std::vector<RunSummary>& runs) {
  const std::vector<std::string> head = {"RUN",        "SESSION", "STARTED", "DURATION",
                                         "MODEL",      "DEVS",    "LAYOUTS", "SWITCHES",
                                         "REBALANCES", "SPANS",   "END"};
  const std::vector<bool> right = {false, true, false, true, false, true,
                                   false, true, true,  true, false};
  std::vector<std::vector<std::string>> rows = {head};
  for (const RunSummary& s : runs) {
    const RunInfo& r = s.info;
    rows.push_back({r.id, r.session_id == 0 ? "-" : std::to_string(r.session_id),
                    FormatUnixMs(r.started_unix_ms > 0 ? r.started_unix_ms : r.created_unix_ms),
                    FormatDuration(r.duration_us), r.model.empty() ? "-" : r.model,
                    std::to_string(r.devices), s.layouts.empty() ? "-" : Join(s.layouts, ">"),
                    std::to_string(s.switches), std::to_string(s.rebalances),
                    std::to_string(r.spans), s.ended_normally() ? "normal" : r.status});
  }
  std::vector<size_t> w(head.size(), 0);
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) w[i] = std::max(w[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      if (i > 0) line += "  ";
      line += Pad(row[i], i + 1 == row.size() ? 0 : w[i], right[i]);
    }
    out += line + "\n";
  }
  if (runs.empty()) out += "(no runs)\n";
  return out;
}

std::string FormatRunDetail(const RunDetail& d) {
  const RunInfo& r = d.summary.info;
  std::string out;
  auto field = [&](std::string_view k, const std::string& v) {
    out += Pad(std::string(k) + ":", 14, false) + v + "\n";
  };
  field("run", r.id);
  field("status", r.status + (d.summary.ended_normally() ? " (normally)" : ""));
  field("started", FormatUnixMs(r.started_unix_ms));
  field("recorded", FormatUnixMs(r.created_unix_ms) + " .. " + FormatUnixMs(r.ended_unix_ms));
  field("duration", FormatDuration(r.duration_us) + " (engine time)");
  field("model", (r.model.empty() ? "-" : r.model) + (r.arch.empty() ? "" : " (" + r.arch + ")"));
  field("devices", std::to_string(r.devices));
  field("layouts", d.summary.layouts.empty() ? "-" : Join(d.summary.layouts, " > "));
  field("switches", std::to_string(d.summary.switches));
  field("rebalances", std::to_string(d.summary.rebalances));
  nlohmann::json meta = nlohmann::json::parse(d.meta_json, nullptr, false);
  if (meta.is_object()) {
    if (meta.contains("trace_level")) field("trace", meta.value("trace_level", ""));
    if (meta.contains("workload")) field("workload", meta.value("workload", ""));
  }
  field("drops", std::to_string(r.store_dropped) + " in the store, " +
                     std::to_string(r.engine_dropped) + " in the engine");
  if (r.session_id == 0) {
    field("session", "- (recorded before sessions)");
  } else {
    field("session", std::to_string(r.session_id) + ", started " +
                         FormatUnixMs(d.session_started_unix_ms) +
                         (d.session_hosts.empty() ? "" : ", " + d.session_hosts));
    field("siblings", d.siblings.empty() ? "none" : std::to_string(d.siblings.size()));
    for (const RunInfo& sib : d.siblings) {
      out += "  " + Pad(sib.id, 24, false) + " " + (sib.model.empty() ? "-" : sib.model) + ", " +
             std::to_string(sib.devices) + " dev, " + FormatDuration(sib.duration_us) + ", " +
             sib.status + "\n";
    }
  }
  out += "\nrows per table:\n";
  for (const auto& [name, n] : d.rows)
    out += "  " + Pad(name, 20, false) + std::to_string(n) + "\n";
  out += "\nevents (" + std::to_string(d.events.size()) + " of " + std::to_string(d.events_total) +
         "):\n";
  for (const EventRow& e : d.events) {
    char t[32];
    std::snprintf(t, sizeof t, "%10.3fs", static_cast<double>(e.t_us) / 1e6);
    out += std::string("  ") + t + "  " + e.kind + " " + e.name +
           (e.phase.empty() ? "" : " " + e.phase) + ": " + e.message + "\n";
  }
  out += "\ncommands (" + std::to_string(d.commands.size()) + " of " +
         std::to_string(d.commands_total) + "):\n";
  for (const CommandRecord& c : d.commands) {
    char t[32];
    std::snprintf(t, sizeof t, "%10.3fs", static_cast<double>(c.t_us) / 1e6);
    out += std::string("  ") + t + "  " + c.text + " -> " + (c.ok ? "ok" : "failed") + "\n";
  }
  return out;
}

}  // namespace sy::store::tool
