// File: store/tool/maintenance.h
//
// The commands of moe-store that change or audit the file: prune (keep the
// newest runs), vacuum (give the freed pages back to the file system) and
// check (SQLite's integrity check plus what each table holds).
//
// prune and vacuum need a StoreFile opened kWrite (the Writer's lock held, so
// no console records meanwhile); check needs only kRead.
//
// Thread-safety: functions over a Db the caller owns and uses from one thread.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "store/sqlite.h"
#include "store/tool/inventory.h"

namespace sy::store::tool {

struct PruneReport {
  std::vector<RunSummary> deleted;  // newest first, as listed before the prune
  int64_t kept = 0;
  // Rows deleted per table (RunTables() order, then "runs").
  std::vector<std::pair<std::string, int64_t>> rows;
};

// Deletes every run but the newest `keep` (ListRunSummaries' order), with all
// their rows, in one IMMEDIATE transaction: on any error nothing is deleted.
// Commands recorded with no run and interned names are kept. The file does
// not shrink (SQLite reuses the pages); Vacuum() shrinks it.
// REQUIRES: keep >= 0; db opened read-write.
Result<PruneReport> Prune(Db& db, int64_t keep);

struct VacuumReport {
  int64_t bytes_before = 0;  // the database file plus its -wal file
  int64_t bytes_after = 0;
};
// VACUUM, then a TRUNCATE checkpoint so the WAL folds back into the file.
// REQUIRES: db opened read-write.
Result<VacuumReport> Vacuum(Db& db);

struct CheckReport {
  // PRAGMA integrity_check's lines: exactly {"ok"} for a sound file.
  std::vector<std::string> integrity;
  // Every table of the file, by name, with its row count.
  std::vector<std::pair<std::string, int64_t>> rows;
  // Problems found beyond integrity_check: the counters kept on `runs`
  // (n_steps, n_requests, n_spans) that disagree with the rows stored.
  std::vector<std::string> problems;
  bool ok() const { return integrity.size() == 1 && integrity[0] == "ok" && problems.empty(); }
};
// Fails (DATA_LOSS, ...) only when the check itself cannot run; a damaged
// file that SQLite can still walk is reported in the CheckReport.
Result<CheckReport> Check(Db& db);

std::string FormatPruneReport(const PruneReport& r);
std::string FormatCheckReport(const CheckReport& r);

}  // namespace sy::store::tool
