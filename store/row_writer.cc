#include "store/row_writer.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "store/schema.h"

namespace sy::store {

using nlohmann::json;
namespace tel = telemetry;

std::string DumpJson(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

namespace {

// Steps a statement that returns one integer row (RETURNING / SELECT).
// Returns -1 when there is no row.
Result<int64_t> StepInt(Stmt& st) {
  Result<bool> row = st.Step();
  if (!row.ok()) return row.status();
  int64_t v = *row ? st.Int(0) : -1;
  st.Reset();
  return v;
}

}  // namespace

Result<std::unique_ptr<RowWriter>> RowWriter::Open(const std::string& path,
                                                   const WriterOptions& options) {
  std::unique_ptr<RowWriter> w(new RowWriter());
  w->session_hosts_ = options.session_hosts;
  w->session_started_unix_ms_ = NowUnixMs();
  RETURN_IF_ERROR(w->lock_.Acquire(path));
  ASSIGN_OR_RETURN(w->db_, Db::Open(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE));
  // Readers (the console's replay) may hold the file briefly; wait, don't fail.
  sqlite3_busy_timeout(w->db_.get(), 5000);
  RETURN_IF_ERROR(CheckStore(w->db_).status());
  ASSIGN_OR_RETURN(std::string mode, w->db_.QueryText("PRAGMA journal_mode = WAL", "opening"));
  if (mode != "wal")
    return Unavailable("cannot use WAL journal for " + path + " (got " + mode + ")");
  // NORMAL in WAL mode: a commit is durable against process crashes, and
  // against power loss up to the last checkpoint; no fsync per transaction.
  RETURN_IF_ERROR(w->db_.Exec("PRAGMA synchronous = NORMAL", "opening"));
  RETURN_IF_ERROR(Migrate(w->db_));
  if (options.max_file_bytes > 0) {
    ASSIGN_OR_RETURN(int64_t page, w->db_.QueryInt("PRAGMA page_size"));
    int64_t pages = std::max<int64_t>(1, options.max_file_bytes / page);
    RETURN_IF_ERROR(w->db_.QueryInt("PRAGMA max_page_count = " + std::to_string(pages)).status());
  }
  RETURN_IF_ERROR(w->Prepare());
  // Whoever left these live can no longer finish them (one Writer per file).
  RETURN_IF_ERROR(w->InTransaction([&] {
    return w->db_.Exec(
        "UPDATE runs SET status = " + std::to_string(static_cast<int>(RunStatus::kInterrupted)) +
        ", ended_unix_ms = " + std::to_string(NowUnixMs()) +
        " WHERE status = " + std::to_string(static_cast<int>(RunStatus::kLive)));
  }));
  return w;
}

RowWriter::FileLock::~FileLock() {
  if (fd_ >= 0) close(fd_);
}

Status RowWriter::FileLock::Acquire(const std::string& path) {
  fd_ = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) return Unavailable("opening " + path + ": " + std::strerror(errno));
  if (flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) {
      return FailedPrecondition(path + " is already open for writing by another Writer");
    }
    return Unavailable("locking " + path + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

Status RowWriter::Prepare() {
  struct {
    Stmt* st;
    std::string_view sql;
  } const all[] = {
      {&upsert_run_,
       "INSERT INTO runs (id, status, created_unix_ms) VALUES (?1, 0, ?2) "
       "ON CONFLICT (id) DO UPDATE SET status = 0, ended_unix_ms = NULL RETURNING rid"},
      {&find_run_, "SELECT rid FROM runs WHERE id = ?1"},
      {&insert_run_,
       "INSERT INTO runs (id, status, created_unix_ms) VALUES (?1, 0, ?2) RETURNING rid"},
      {&end_run_, "UPDATE runs SET status = ?2, ended_unix_ms = ?3 WHERE id = ?1"},
      {&update_run_,
       "UPDATE runs SET last_t_us = max(last_t_us, ?2), n_steps = n_steps + ?3, "
       "n_requests = n_requests + ?4, n_spans = n_spans + ?5 WHERE rid = ?1"},
      {&update_run_meta_,
       "UPDATE runs SET meta_json = ?2, model = ?3, devices = ?4, started_unix_ms = ?5, "
       "arch = ?6, state_slots_per_device = ?7 "
       "WHERE rid = ?1"},
      {&update_run_hb_, "UPDATE runs SET engine_sent = ?2, engine_dropped = ?3 WHERE rid = ?1"},
      {&add_dropped_, "UPDATE runs SET store_dropped = store_dropped + ?2 WHERE rid = ?1"},
      {&end_session_run_,
       "UPDATE runs SET status = 1, ended_unix_ms = ?2 WHERE rid = ?1 AND status = 0"},
      {&insert_session_,
       "INSERT INTO sessions (started_unix_ms, hosts) VALUES (?1, ?2) RETURNING id"},
      {&set_run_session_, "UPDATE runs SET session_id = ?2 WHERE rid = ?1"},
      {&find_name_, "SELECT id FROM names WHERE s = ?1"},
      {&insert_name_, "INSERT INTO names (s) VALUES (?1) RETURNING id"},
      {&ins_meta_, "INSERT INTO metas (run, seq, t_us, v, body) VALUES (?1, ?2, ?3, ?4, ?5)"},
      {&ins_step_,
       "INSERT INTO steps (run, seq, t_us, v, step, start_us, dur_us, prefill_tokens, "
       "decode_tokens, batch_requests, running, waiting, finished_total, generated_total) "
       "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)"},
      {&ins_span_batch_,
       "INSERT INTO span_batches (run, seq, t_us, v, step, n) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"},
      {&ins_span_,
       "INSERT INTO spans (batch, idx, run, step, t_us, device, layer, name, kind, start_us, "
       "dur_us, tokens, flops, bytes) "
       "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)"},
      {&ins_kstat_batch_,
       "INSERT INTO kstat_batches (run, seq, t_us, v, step, n) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"},
      {&ins_kstat_,
       "INSERT INTO kernel_stats (batch, idx, run, step, t_us, device, name, kind, count, "
       "total_us, max_us, flops, bytes) "
       "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"},
      {&ins_occ_,
       "INSERT INTO occupancy (run, seq, t_us, v, step, running, waiting, prefill_tokens, "
       "decode_tokens, n) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"},
      {&ins_occ_dev_,
       "INSERT INTO occupancy_devices (occ, idx, run, step, device, kv_pages_used, "
       "kv_pages_total, running, state_slots_used, state_slots_total, kv_bytes_used, "
       "kv_bytes_total, state_bytes_used, state_bytes_total, cache_tokens, cache_nodes, "
       "cache_slots, cache_hit_rate, cache_evicted_pages) "
       "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, "
       "?18, ?19)"},
      {&ins_experts_,
       "INSERT INTO expert_load (run, seq, t_us, v, step, layers, experts, counts, "
       "expert_device, slots, phy2log, slot_device, balancedness) "
       "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"},
      {&ins_request_,
       "INSERT INTO requests (run, seq, t_us, v, req_id, device, prompt_tokens, output_tokens, "
       "arrival_us, ttft_us, tpot_us, e2e_us, finish, cached_tokens, preemptions) "
       "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)"},
      {&ins_req_snap_,
       "INSERT INTO request_snapshots (run, seq, t_us, v, step, running_total, waiting_total, "
       "n) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"},
      {&ins_req_progress_,
       "INSERT INTO request_progress (snap, idx, run, step, waiting, req_id, device, "
       "prompt_tokens, computed, generated, max_new_tokens, cached_tokens, preemptions, "
       "arrival_us, first_token_us) "
       "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)"},
      {&ins_event_,
       "INSERT INTO events (run, seq, t_us, v, kind, name, phase, message, detail) "
       "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"},
      {&ins_heartbeat_,
       "INSERT INTO heartbeats (run, seq, t_us, v, interval_ms, state, sent_total, "
       "dropped_total, dropped, step) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"},
      {&ins_command_,
       "INSERT INTO commands (run, t_us, unix_ms, text, request, ok, reply) "
       "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"},
  };
  for (const auto& p : all) {
    ASSIGN_OR_RETURN(*p.st, Stmt::Prepare(db_, p.sql));
  }
  return Status::Ok();
}

Status RowWriter::InTransaction(const std::function<Status()>& body) {
  RETURN_IF_ERROR(db_.Exec("BEGIN IMMEDIATE"));
  Status s = body();
  if (s.ok()) s = db_.Exec("COMMIT");
  // SQLite may already have rolled back by itself (e.g. on SQLITE_FULL).
  if (!s.ok() && sqlite3_get_autocommit(db_.get()) == 0) db_.Exec("ROLLBACK").IgnoreError();
  return s;
}

Status RowWriter::Write(const std::vector<Item>& items, const DropsByRun& drops) {
  return InTransaction([&]() -> Status {
    agg_.clear();
    for (const Item& item : items) {
      RETURN_IF_ERROR(std::visit([&](const auto& x) { return Put(x); }, item));
    }
    RETURN_IF_ERROR(ApplyDrops(drops));
    return ApplyAggregates();
  });
}

Status RowWriter::Close(const DropsByRun& drops) {
  return InTransaction([&]() -> Status {
    RETURN_IF_ERROR(ApplyDrops(drops));
    int64_t now = NowUnixMs();
    for (int64_t rid : live_) {
      RETURN_IF_ERROR(end_session_run_.Bind(1, rid).Bind(2, now).Run());
    }
    return Status::Ok();
  });
}

Result<int64_t> RowWriter::RunRid(const std::string& run, bool revive) {
  auto it = rids_.find(run);
  if (it != rids_.end() && (!revive || live_.count(it->second) > 0)) return it->second;
  int64_t rid = -1;
  if (revive) {
    ASSIGN_OR_RETURN(rid, StepInt(upsert_run_.Bind(1, run).Bind(2, NowUnixMs())));
    if (rid < 0) return Internal("no rid for run '" + run + "' in " + db_.path());
    live_.insert(rid);
    RETURN_IF_ERROR(JoinSession(rid));
  } else {
    ASSIGN_OR_RETURN(rid, StepInt(find_run_.Bind(1, run)));
    if (rid < 0) {
      ASSIGN_OR_RETURN(rid, StepInt(insert_run_.Bind(1, run).Bind(2, NowUnixMs())));
      if (rid < 0) return Internal("no rid for run '" + run + "' in " + db_.path());
      live_.insert(rid);
      RETURN_IF_ERROR(JoinSession(rid));
    }
  }
  rids_[run] = rid;
  return rid;
}

Status RowWriter::JoinSession(int64_t rid) {
  if (session_ == 0) {
    // Inside the batch's transaction: should it roll back, writing stops
    // for good (Writer), so a session id that was never committed is not
    // used again.
    ASSIGN_OR_RETURN(
        session_,
        StepInt(insert_session_.Bind(1, session_started_unix_ms_).Bind(2, session_hosts_)));
    if (session_ <= 0) return Internal("no session row in " + db_.path());
  }
  return set_run_session_.Bind(1, rid).Bind(2, session_).Run();
}

Result<int64_t> RowWriter::NameId(const std::string& s) {
  auto it = names_.find(s);
  if (it != names_.end()) return it->second;
  ASSIGN_OR_RETURN(int64_t id, StepInt(find_name_.Bind(1, s)));
  if (id < 0) {
    ASSIGN_OR_RETURN(id, StepInt(insert_name_.Bind(1, s)));
  }
  names_.emplace(s, id);
  return id;
}

Status RowWriter::Put(const CommandRecord& c) {
  if (c.run.empty()) {
    ins_command_.BindNull(1);
  } else {
    ASSIGN_OR_RETURN(int64_t rid, RunRid(c.run, /*revive=*/false));
    ins_command_.Bind(1, rid);
  }
  return ins_command_.Bind(2, c.t_us)
      .Bind(3, c.unix_ms)
      .Bind(4, c.text)
      .Bind(5, c.request)
      .Bind(6, c.ok ? 1 : 0)
      .Bind(7, c.reply)
      .Run();
}

Status RowWriter::Put(const EndRunOp& e) {
  auto status = e.abnormal ? RunStatus::kAbnormal : RunStatus::kEnded;
  RETURN_IF_ERROR(
      end_run_.Bind(1, e.run).Bind(2, static_cast<int>(status)).Bind(3, e.unix_ms).Run());
  auto it = rids_.find(e.run);
  if (it != rids_.end()) live_.erase(it->second);
  return Status::Ok();
}

Status RowWriter::ApplyAggregates() {
  for (const auto& [rid, a] : agg_) {
    RETURN_IF_ERROR(update_run_.Bind(1, rid)
                        .Bind(2, a.last_t_us)
                        .Bind(3, a.steps)
                        .Bind(4, a.requests)
                        .Bind(5, a.spans)
                        .Run());
    if (a.meta) {
      RETURN_IF_ERROR(update_run_meta_.Bind(1, rid)
                          .Bind(2, DumpJson(tel::ToJson(*a.meta)))
                          .Bind(3, a.meta->model.preset)
                          .Bind(4, a.meta->devices)
                          .Bind(5, a.meta->started_unix_ms)
                          .Bind(6, a.meta->model.arch)
                          .Bind(7, a.meta->state_slots_per_device)
                          .Run());
    }
    if (a.heartbeat) {
      RETURN_IF_ERROR(update_run_hb_.Bind(1, rid)
                          .Bind(2, a.heartbeat->sent_total)
                          .Bind(3, a.heartbeat->dropped_total)
                          .Run());
    }
  }
  agg_.clear();
  return Status::Ok();
}

Status RowWriter::ApplyDrops(const DropsByRun& drops) {
  for (const auto& [run, n] : drops) {
    ASSIGN_OR_RETURN(int64_t rid, RunRid(run, /*revive=*/false));
    RETURN_IF_ERROR(add_dropped_.Bind(1, rid).Bind(2, n).Run());
  }
  return Status::Ok();
}

}  // namespace sy::store
