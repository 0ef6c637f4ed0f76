// File: store/tool/inventory.h
//
// What a store holds, run by run, for `moe-store list` and `moe-store show`:
// the runs row (store::RunInfo) plus what only the message tables know (the
// layouts the run used, its TP <-> EP switches and expert rebalances), the
// rows each table holds for a run, and its first events and commands. Also
// the list of per-run tables that prune (maintenance.h) deletes from.
//
//   ASSIGN_OR_RETURN(StoreFile f, StoreFile::Open(path, StoreFile::kRead));
//   ASSIGN_OR_RETURN(std::vector<RunSummary> runs, ListRunSummaries(f.db()));
//   std::cout << FormatRunTable(runs);
//
// Thread-safety: functions over a Db the caller owns and uses from one thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "store/sqlite.h"
#include "store/store.h"

namespace sy::store::tool {

struct RunSummary {
  RunInfo info;  // the runs row, as store::Reader::ListRuns gives it
  int64_t rid = 0;
  // Distinct Meta.layout values ("EP", "TP"), in the order the run first
  // used them (every Meta is stored; a switch sends a new one).
  std::vector<std::string> layouts;
  int64_t switches = 0;    // events kind "switch", phase "done"
  int64_t rebalances = 0;  // events kind "rebalance", name "rebalance", phase "done"
  bool ended_normally() const { return info.status == "ended"; }
};

// Every run, newest first (the order of store::Reader::ListRuns).
Result<std::vector<RunSummary>> ListRunSummaries(Db& db);
// NOT_FOUND "no run '<id>' in <path>" for an unknown id.
Result<RunSummary> GetRunSummary(Db& db, const std::string& id);

// A table that holds rows of runs. Child tables (spans, kernel_stats,
// occupancy_devices, request_progress) reach their run through their parent:
// `parent`.id = `link`, which uses primary keys instead of scanning.
struct RunTable {
  std::string_view name;
  std::string_view parent;  // "" for a table with its own `run` column
  std::string_view link;    // the child's column naming the parent row
};
// Every table with per-run rows, children before their parents (the order
// rows must be deleted in), `commands` last; `runs` itself is not included.
const std::vector<RunTable>& RunTables();
// "SELECT <what> FROM <table> WHERE <rows of run ?1>", for RunTables() entries.
std::string RunRowsSql(const RunTable& t, std::string_view what);

struct EventRow {
  int64_t t_us = 0;
  std::string kind, name, phase, message;
};

struct RunDetail {
  RunSummary summary;
  std::string meta_json;                              // runs.meta_json, "" before any Meta
  std::vector<std::pair<std::string, int64_t>> rows;  // per RunTables() entry
  int64_t events_total = 0;
  std::vector<EventRow> events;         // the first `max_events`, in time order
  std::vector<CommandRecord> commands;  // the first `max_events`, in recorded order
  int64_t commands_total = 0;
  // The console session that recorded the run (summary.info.session_id;
  // none for runs before schema v5) and the other runs it recorded, e.g.
  // the other data-parallel ranks, or the decode engine of a prefill one.
  int64_t session_started_unix_ms = 0;
  std::string session_hosts;
  std::vector<RunInfo> siblings;  // newest first, the run itself excluded
};
// NOT_FOUND for an unknown id. Runs in one read transaction.
Result<RunDetail> GetRunDetail(Db& db, const std::string& id, int max_events);

// Human text. Times are local wall clock, durations engine time.
std::string FormatRunTable(const std::vector<RunSummary>& runs);
std::string FormatRunDetail(const RunDetail& d);
std::string FormatDuration(int64_t us);     // "850ms", "12.4s", "3m05s", "2h01m"
std::string FormatUnixMs(int64_t unix_ms);  // "2026-01-02 10:11:12", "-" for 0

}  // namespace sy::store::tool
