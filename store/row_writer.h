// File: store/row_writer.h
//
// The SQL half of store::Writer: turns queued items into rows, one
// transaction per batch, with prepared statements reused across batches. The
// thread and queue half lives in writer.cc; the insert of each message kind
// (RowWriter::Put(const telemetry::Message&)) in message_rows.cc.
//
// Run lifecycle owned here: the first item naming a run this session creates
// its row (or sets an existing row back to "live": a console restarted while
// the engine kept running); EndRun sets "ended"/"abnormal"; Close() sets the
// runs this session made live and nobody ended to "ended". Open() marks runs
// left "live" by a writer that died as "interrupted". Each run this RowWriter
// makes live is linked to its `sessions` row (created with the first one).
//
// Internal to store/. Thread-safety: one thread at a time (the writer thread).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <variant>
#include <vector>

#include "base/status.h"
#include "store/sqlite.h"
#include "store/store.h"
#include "telemetry/protocol.h"

namespace sy::store {

struct EndRunOp {
  std::string run;
  bool abnormal = false;
  int64_t unix_ms = 0;
};

using Item = std::variant<telemetry::Message, CommandRecord, EndRunOp>;
using DropsByRun = std::unordered_map<std::string, int64_t>;

int64_t NowUnixMs();
// JSON text for a TEXT column. Strings inside messages are not guaranteed
// UTF-8: invalid bytes become U+FFFD instead of throwing.
std::string DumpJson(const nlohmann::json& j);

class RowWriter {
 public:
  // Opens, checks, migrates; marks runs left live as interrupted; prepares.
  static Result<std::unique_ptr<RowWriter>> Open(const std::string& path,
                                                 const WriterOptions& options);

  // Writes `items` (in order) and adds `drops` to runs.store_dropped, in one
  // transaction. On error the transaction is rolled back: nothing of the batch
  // is stored and earlier batches are untouched.
  Status Write(const std::vector<Item>& items, const DropsByRun& drops);
  // Last transaction: remaining drops, live runs of this session -> ended.
  Status Close(const DropsByRun& drops);

 private:
  struct RunAgg {
    int64_t last_t_us = 0;
    int64_t steps = 0, requests = 0, spans = 0, dropped = 0;
    std::optional<telemetry::Meta> meta;
    std::optional<telemetry::Heartbeat> heartbeat;
  };

  // flock(2) on the database file, held for the Writer's life, so a second
  // Writer (another console on the same --store path) is refused instead of
  // marking this one's runs interrupted. Declared before db_ so it is released
  // only after SQLite closed the file (closing any descriptor of a file drops
  // the process's POSIX locks on it, SQLite's included).
  class FileLock {
   public:
    FileLock() = default;
    FileLock(const FileLock&) = delete;
    FileLock& operator=(const FileLock&) = delete;
    ~FileLock();
    Status Acquire(const std::string& path);

   private:
    int fd_ = -1;
  };

  RowWriter() = default;
  Status Prepare();
  Status InTransaction(const std::function<Status()>& body);
  // rid of `run`; creates the row, or makes it live again, unless `revive`
  // is false (then an existing row's status is left alone).
  Result<int64_t> RunRid(const std::string& run, bool revive);
  Result<int64_t> NameId(const std::string& s);
  // Links `rid` to this RowWriter's session, creating the sessions row first.
  Status JoinSession(int64_t rid);
  Status Put(const telemetry::Message& m);
  Status Put(const CommandRecord& c);
  Status Put(const EndRunOp& e);
  Status ApplyAggregates();
  Status ApplyDrops(const DropsByRun& drops);

  FileLock lock_;
  Db db_;
  Stmt upsert_run_, find_run_, insert_run_, end_run_, update_run_, update_run_meta_, update_run_hb_,
      add_dropped_, end_session_run_, insert_session_, set_run_session_;
  Stmt find_name_, insert_name_;
  Stmt ins_meta_, ins_step_, ins_span_batch_, ins_span_, ins_kstat_batch_, ins_kstat_, ins_occ_,
      ins_occ_dev_, ins_experts_, ins_request_, ins_event_, ins_heartbeat_, ins_command_,
      ins_req_snap_, ins_req_progress_;

  std::unordered_map<std::string, int64_t> rids_;
  std::unordered_set<int64_t> live_;  // runs this session made live and nobody ended
  std::unordered_map<std::string, int64_t> names_;
  std::unordered_map<int64_t, RunAgg> agg_;  // this batch
  std::string session_hosts_;
  int64_t session_started_unix_ms_ = 0;
  int64_t session_ = 0;  // sessions.id; 0 until the first run is made live
};

}  // namespace sy::store
