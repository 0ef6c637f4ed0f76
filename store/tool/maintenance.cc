// prune, vacuum and check.

#include "store/tool/maintenance.h"

#include <filesystem>

namespace sy::store::tool {
namespace {

int64_t FileBytes(const std::string& path) {
  std::error_code ec;
  int64_t n = 0;
  for (const std::string& p : {path, path + "-wal"}) {
    const auto size = std::filesystem::file_size(p, ec);
    if (!ec) n += static_cast<int64_t>(size);
  }
  return n;
}

Result<int64_t> CountRows(Db& db, const std::string& sql, int64_t bind) {
  ASSIGN_OR_RETURN(Stmt st, Stmt::Prepare(db, sql));
  if (bind >= 0) st.Bind(1, bind);
  ASSIGN_OR_RETURN(bool row, st.Step("reading"));
  return row ? st.Int(0) : 0;
}

}  // namespace

Result<PruneReport> Prune(Db& db, int64_t keep) {
  if (keep < 0) return InvalidArgument("--keep must be >= 0, got " + std::to_string(keep));
  // IMMEDIATE: the write lock from the start, so the runs listed are the runs
  // deleted.
  RETURN_IF_ERROR(db.Exec("BEGIN IMMEDIATE", "pruning"));
  auto body = [&]() -> Result<PruneReport> {
    PruneReport report;
    ASSIGN_OR_RETURN(std::vector<RunSummary> runs, ListRunSummaries(db));
    report.kept = std::min<int64_t>(keep, static_cast<int64_t>(runs.size()));
    report.deleted.assign(runs.begin() + report.kept, runs.end());
    for (const RunTable& t : RunTables()) {
      std::string sql = "DELETE FROM " + std::string(t.name) + " WHERE ";
      sql += t.parent.empty() ? std::string("run = ?1")
                              : std::string(t.link) + " IN (SELECT id FROM " +
                                    std::string(t.parent) + " WHERE run = ?1)";
      report.rows.emplace_back(std::string(t.name), 0);
      ASSIGN_OR_RETURN(Stmt st, Stmt::Prepare(db, sql));
      for (const RunSummary& r : report.deleted) {
        RETURN_IF_ERROR(st.Bind(1, r.rid).Run("pruning"));
        report.rows.back().second += sqlite3_changes(db.get());
      }
    }
    ASSIGN_OR_RETURN(Stmt st, Stmt::Prepare(db, "DELETE FROM runs WHERE rid = ?1"));
    report.rows.emplace_back("runs", 0);
    for (const RunSummary& r : report.deleted) {
      RETURN_IF_ERROR(st.Bind(1, r.rid).Run("pruning"));
      report.rows.back().second += sqlite3_changes(db.get());
    }
    // A console session whose runs are all gone goes with them.
    ASSIGN_OR_RETURN(Stmt ses, Stmt::Prepare(db,
                                             "DELETE FROM sessions WHERE id = ?1 AND NOT EXISTS "
                                             "(SELECT 1 FROM runs WHERE session_id = ?1)"));
    report.rows.emplace_back("sessions", 0);
    for (const RunSummary& r : report.deleted) {
      if (r.info.session_id == 0) continue;
      RETURN_IF_ERROR(ses.Bind(1, r.info.session_id).Run("pruning"));
      report.rows.back().second += sqlite3_changes(db.get());
    }
    RETURN_IF_ERROR(db.Exec("COMMIT", "pruning"));
    return report;
  };
  Result<PruneReport> out = body();
  if (!out.ok()) db.Exec("ROLLBACK").IgnoreError();
  return out;
}

Result<VacuumReport> Vacuum(Db& db) {
  VacuumReport r;
  r.bytes_before = FileBytes(db.path());
  RETURN_IF_ERROR(db.Exec("VACUUM", "vacuuming"));
  RETURN_IF_ERROR(db.Exec("PRAGMA wal_checkpoint(TRUNCATE)", "vacuuming"));
  r.bytes_after = FileBytes(db.path());
  return r;
}

Result<CheckReport> Check(Db& db) {
  CheckReport r;
  RETURN_IF_ERROR(db.Exec("BEGIN", "checking"));
  auto body = [&]() -> Status {
    {
      ASSIGN_OR_RETURN(Stmt st, Stmt::Prepare(db, "PRAGMA integrity_check"));
      for (;;) {
        ASSIGN_OR_RETURN(bool row, st.Step("checking"));
        if (!row) break;
        r.integrity.push_back(st.Text(0));
      }
    }
    std::vector<std::string> tables;
    {
      ASSIGN_OR_RETURN(Stmt st, Stmt::Prepare(db,
                                              "SELECT name FROM sqlite_master WHERE type = "
                                              "'table' AND name NOT LIKE 'sqlite_%' ORDER BY "
                                              "name"));
      for (;;) {
        ASSIGN_OR_RETURN(bool row, st.Step("checking"));
        if (!row) break;
        tables.push_back(st.Text(0));
      }
    }
    for (const std::string& t : tables) {
      ASSIGN_OR_RETURN(int64_t n, CountRows(db, "SELECT count(*) FROM \"" + t + "\"", -1));
      r.rows.emplace_back(t, n);
    }
    // The counters the Writer keeps on runs are updated in the same
    // transaction as the rows they count, so any difference is damage.
    struct Counter {
      const char* column;
      const char* rows_sql;
    } const counters[] = {
        {"n_steps", "SELECT count(*) FROM steps"},
        {"n_requests", "SELECT count(*) FROM requests"},
        {"n_spans", "SELECT count(*) FROM spans"},
    };
    for (const Counter& c : counters) {
      ASSIGN_OR_RETURN(
          int64_t kept,
          CountRows(db, std::string("SELECT ifnull(sum(") + c.column + "), 0) FROM runs", -1));
      ASSIGN_OR_RETURN(int64_t stored, CountRows(db, c.rows_sql, -1));
      if (kept != stored) {
        r.problems.push_back(std::string("runs.") + c.column + " adds up to " +
                             std::to_string(kept) + " but the table holds " +
                             std::to_string(stored) + " rows");
      }
    }
    return Status::Ok();
  };
  Status s = body();
  db.Exec("COMMIT", "checking").IgnoreError();
  if (!s.ok()) return s;
  return r;
}

std::string FormatPruneReport(const PruneReport& r) {
  std::string out = "kept " + std::to_string(r.kept) + " run(s), deleted " +
                    std::to_string(r.deleted.size()) + "\n";
  for (const RunSummary& s : r.deleted) {
    out +=
        "  deleted " + s.info.id + "  (" +
        FormatUnixMs(s.info.started_unix_ms > 0 ? s.info.started_unix_ms : s.info.created_unix_ms) +
        ", " + FormatDuration(s.info.duration_us) + ", " + std::to_string(s.info.spans) +
        " spans, " + s.info.status + ")\n";
  }
  if (!r.deleted.empty()) {
    out += "rows deleted:\n";
    for (const auto& [table, n] : r.rows) {
      if (n > 0) out += "  " + table + " " + std::to_string(n) + "\n";
    }
    out += "(the file keeps its size; run `moe-store vacuum` to shrink it)\n";
  }
  return out;
}

std::string FormatCheckReport(const CheckReport& r) {
  std::string out = "integrity_check:";
  for (const std::string& line : r.integrity)
    out += " " + line + (r.integrity.size() > 1 ? "\n" : "");
  if (r.integrity.size() <= 1) out += "\n";
  for (const std::string& p : r.problems) out += "problem: " + p + "\n";
  out += "rows per table:\n";
  for (const auto& [table, n] : r.rows) {
    out += "  " + table + std::string(table.size() < 20 ? 20 - table.size() : 1, ' ') +
           std::to_string(n) + "\n";
  }
  out += r.ok() ? "check: ok\n" : "check: FAILED\n";
  return out;
}

}  // namespace sy::store::tool
