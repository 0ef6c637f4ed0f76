// store::Reader: listing runs, their Meta and commands; the messages of a
// window are rebuilt from rows by message_reader.cc.

#include <algorithm>
#include <filesystem>

#include "store/message_reader.h"
#include "store/run_rows.h"
#include "store/schema.h"
#include "store/sqlite.h"
#include "store/store.h"

namespace sy::store {

using nlohmann::json;
namespace tel = telemetry;

namespace {}  // namespace

RunInfo RunFromRow(const Stmt& st) {
  RunInfo r;
  r.id = st.Text(0);
  r.started_unix_ms = st.Int(1);
  r.duration_us = st.Int(2);
  r.status = std::string(RunStatusName(st.Int(3)));
  r.model = st.Text(4);
  r.devices = static_cast<int>(st.Int(5));
  r.steps = st.Int(6);
  r.requests = st.Int(7);
  r.spans = st.Int(8);
  r.created_unix_ms = st.Int(9);
  r.ended_unix_ms = st.Int(10);
  r.store_dropped = st.Int(11);
  r.engine_dropped = st.Int(12);
  r.arch = st.Text(13);
  r.state_slots_per_device = static_cast<int>(st.Int(14));
  return r;
}

class Reader::Impl {
 public:
  explicit Impl(Db db) : db_(std::move(db)) {}

  Result<std::vector<RunInfo>> ListRuns() {
    ASSIGN_OR_RETURN(Stmt st, Stmt::Prepare(db_, std::string(kRunColumns) +
                                                     "ORDER BY CASE WHEN started_unix_ms > 0 "
                                                     "THEN started_unix_ms ELSE created_unix_ms "
                                                     "END DESC, rid DESC"));
    std::vector<RunInfo> out;
    for (;;) {
      ASSIGN_OR_RETURN(bool row, st.Step("reading"));
      if (!row) break;
      out.push_back(RunFromRow(st));
    }
    return out;
  }

  Result<RunInfo> GetRun(const std::string& id) {
    ASSIGN_OR_RETURN(Stmt st, Stmt::Prepare(db_, std::string(kRunColumns) + "WHERE id = ?1"));
    st.Bind(1, id);
    ASSIGN_OR_RETURN(bool row, st.Step("reading"));
    if (!row) return NoRun(id);
    return RunFromRow(st);
  }

  Result<tel::Meta> GetMeta(const std::string& id) {
    ASSIGN_OR_RETURN(Stmt st, Stmt::Prepare(db_, "SELECT meta_json FROM runs WHERE id = ?1"));
    st.Bind(1, id);
    ASSIGN_OR_RETURN(bool row, st.Step("reading"));
    if (!row) return NoRun(id);
    if (st.IsNull(0)) return NotFound("run '" + id + "' in " + db_.path() + " has no meta yet");
    json j = json::parse(st.Text(0), nullptr, false);
    ASSIGN_OR_RETURN(tel::Message m, ParseStored(db_, tel::kTopicMeta, j, "runs.meta_json"));
    return std::get<tel::Meta>(std::move(m));
  }

  Result<std::vector<tel::Message>> Messages(const std::string& id, int64_t from, int64_t to) {
    ASSIGN_OR_RETURN(int64_t rid, Rid(id));
    // One read transaction: every table is read from the same snapshot even
    // while the Writer commits.
    RETURN_IF_ERROR(db_.Exec("BEGIN", "reading"));
    Result<std::vector<tel::Message>> out = ReadMessages(db_, id, rid, from, to);
    db_.Exec("COMMIT", "reading").IgnoreError();
    return out;
  }

  Result<std::vector<CommandRecord>> Commands(const std::string& id) {
    const char* base =
        "SELECT ifnull(r.id, ''), c.t_us, c.unix_ms, c.text, c.request, c.ok, "
        "c.reply FROM commands c LEFT JOIN runs r ON r.rid = c.run ";
    Stmt st;
    if (id.empty()) {
      ASSIGN_OR_RETURN(st, Stmt::Prepare(db_, std::string(base) + "WHERE c.run IS NULL "
                                                                  "ORDER BY c.id"));
    } else {
      ASSIGN_OR_RETURN(int64_t rid, Rid(id));
      ASSIGN_OR_RETURN(st, Stmt::Prepare(db_, std::string(base) + "WHERE c.run = ?1 "
                                                                  "ORDER BY c.id"));
      st.Bind(1, rid);
    }
    std::vector<CommandRecord> out;
    for (;;) {
      ASSIGN_OR_RETURN(bool row, st.Step("reading"));
      if (!row) break;
      CommandRecord c;
      c.run = st.Text(0);
      c.t_us = st.Int(1);
      c.unix_ms = st.Int(2);
      c.text = st.Text(3);
      c.request = st.Text(4);
      c.ok = st.Int(5) != 0;
      c.reply = st.Text(6);
      out.push_back(std::move(c));
    }
    return out;
  }

 private:
  Status NoRun(const std::string& id) const {
    return NotFound("no run '" + id + "' in " + db_.path());
  }

  Result<int64_t> Rid(const std::string& id) {
    ASSIGN_OR_RETURN(Stmt st, Stmt::Prepare(db_, "SELECT rid FROM runs WHERE id = ?1"));
    st.Bind(1, id);
    ASSIGN_OR_RETURN(bool row, st.Step("reading"));
    if (!row) return NoRun(id);
    return st.Int(0);
  }

  Db db_;
};

Result<std::unique_ptr<Reader>> Reader::Open(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return NotFound("no store at " + path);
  ASSIGN_OR_RETURN(Db db, Db::Open(path, SQLITE_OPEN_READONLY));
  sqlite3_busy_timeout(db.get(), 5000);
  ASSIGN_OR_RETURN(int version, CheckStore(db));
  if (version == 0) return DataLoss(path + ": not a Switchyard store (empty database)");
  if (version < kSchemaVersion) {
    return FailedPrecondition(path + " has store schema v" + std::to_string(version) +
                              "; open it once for writing to migrate it to v" +
                              std::to_string(kSchemaVersion));
  }
  return std::unique_ptr<Reader>(new Reader(std::make_unique<Impl>(std::move(db))));
}

Reader::Reader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Reader::~Reader() = default;

Result<std::vector<RunInfo>> Reader::ListRuns() { return impl_->ListRuns(); }
Result<RunInfo> Reader::GetRun(const std::string& id) { return impl_->GetRun(id); }
Result<telemetry::Meta> Reader::GetMeta(const std::string& id) { return impl_->GetMeta(id); }
Result<std::vector<telemetry::Message>> Reader::Messages(const std::string& id, int64_t from_us,
                                                         int64_t to_us) {
  return impl_->Messages(id, from_us, to_us);
}
Result<std::vector<CommandRecord>> Reader::Commands(const std::string& id) {
  return impl_->Commands(id);
}

}  // namespace sy::store
