// store::Reader: listing runs, their Meta and commands; the messages of a
// window are rebuilt from rows by message_reader.cc.

#include <algorithm>
#include <filesystem>
#include <limits>
#include <utility>

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
  r.session_id = st.Int(16);
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

  Result<std::vector<tel::Message>> Messages(const std::string& id, int64_t from, int64_t to,
                                             bool with_spans) {
    ASSIGN_OR_RETURN(int64_t rid, Rid(id));
    // One read transaction: every table is read from the same snapshot even
    // while the Writer commits.
    RETURN_IF_ERROR(db_.Exec("BEGIN", "reading"));
    Result<std::vector<tel::Message>> out = ReadMessages(db_, id, rid, from, to, with_spans);
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

  Result<std::optional<EventMark>> NearestEvent(const std::string& id, int64_t t, bool forward,
                                                const EventMark* from) {
    ASSIGN_OR_RETURN(int64_t rid, Rid(id));
    // Marks are ordered by (t_us, table, row), table 0 for events and 1 for
    // commands. The cursor is `from` when it sits at t, else a key just past
    // every mark at t (forward) or just before them (backward), so marks at
    // t itself are skipped. The plain t_us bound keeps the (run, t_us) index.
    int64_t table = forward ? 2 : -1;
    int64_t row = 0;
    if (from != nullptr && from->t_us == t) {
      table = from->command ? 1 : 0;
      row = from->row;
    }
    const std::string cmp = forward ? ">" : "<";
    const std::string bound = forward ? "t_us >= ?2" : "t_us <= ?2";
    const std::string order =
        forward ? "ORDER BY t_us, id LIMIT 1" : "ORDER BY t_us DESC, id DESC LIMIT 1";
    std::optional<EventMark> best;
    {
      ASSIGN_OR_RETURN(
          Stmt st,
          Stmt::Prepare(
              db_, "SELECT t_us, kind, name, phase, message, id FROM events WHERE run = ?1 AND " +
                       bound + " AND (t_us, 0, id) " + cmp +
                       " (?2, ?3, ?4) AND kind NOT IN ('policy', 'scheduler', 'command') AND "
                       "NOT (kind = 'rebalance' AND phase IN ('planned', 'layer')) " +
                       order));
      st.Bind(1, rid).Bind(2, t).Bind(3, table).Bind(4, row);
      ASSIGN_OR_RETURN(bool found, st.Step("reading"));
      if (found) {
        best = EventMark{st.Int(0),  st.Text(1), st.Text(2), st.Text(3),
                         st.Text(4), true,       false,      st.Int(5)};
      }
    }
    // Commands are few (operator actions): their (run, id) index suffices.
    ASSIGN_OR_RETURN(
        Stmt st, Stmt::Prepare(db_,
                               "SELECT t_us, text, ok, reply, id FROM commands "
                               "WHERE run = ?1 AND t_us > 0 AND " +
                                   bound + " AND (t_us, 1, id) " + cmp + " (?2, ?3, ?4) " + order));
    st.Bind(1, rid).Bind(2, t).Bind(3, table).Bind(4, row);
    ASSIGN_OR_RETURN(bool found, st.Step("reading"));
    if (found) {
      const int64_t ct = st.Int(0);
      // Events come first at one time: a command wins only strictly nearer.
      if (!best || (forward ? ct < best->t_us : ct >= best->t_us)) {
        best =
            EventMark{ct, "command", st.Text(1), "", st.Text(3), st.Int(2) != 0, true, st.Int(4)};
      }
    }
    return best;
  }

  Result<int64_t> StepTime(const std::string& id, int64_t step) {
    ASSIGN_OR_RETURN(int64_t rid, Rid(id));
    // (step, t_us) of the first stored step at or after t: one index probe.
    ASSIGN_OR_RETURN(Stmt st, Stmt::Prepare(db_,
                                            "SELECT step, t_us FROM steps WHERE run = ?1 "
                                            "AND t_us >= ?2 ORDER BY t_us LIMIT 1"));
    auto first_at = [&](int64_t t) -> Result<std::optional<std::pair<int64_t, int64_t>>> {
      st.Reset();
      st.Bind(1, rid).Bind(2, t);
      ASSIGN_OR_RETURN(bool row, st.Step("reading"));
      if (!row) return std::optional<std::pair<int64_t, int64_t>>();
      return std::optional<std::pair<int64_t, int64_t>>({st.Int(0), st.Int(1)});
    };
    ASSIGN_OR_RETURN(auto first, first_at(std::numeric_limits<int64_t>::min()));
    if (!first) return NotFound("run '" + id + "' in " + db_.path() + " has no steps");
    if (first->first >= step) return first->second;
    // Invariant: the first step at or after lo is numbered < `step`, the
    // first at or after hi >= `step`; steps grow with time, so at hi = lo + 1
    // the first step at or after hi is the one sought.
    int64_t lo = first->second;
    ASSIGN_OR_RETURN(Stmt last, Stmt::Prepare(db_, "SELECT max(t_us) FROM steps WHERE run = ?1"));
    last.Bind(1, rid);
    ASSIGN_OR_RETURN(bool has_last, last.Step("reading"));
    const int64_t hi_t = has_last && !last.IsNull(0) ? last.Int(0) : lo;
    ASSIGN_OR_RETURN(auto at_hi, first_at(hi_t));
    if (!at_hi || at_hi->first < step) {
      return NotFound("run '" + id + "' in " + db_.path() + " has no step " + std::to_string(step) +
                      " (last " + std::to_string(at_hi ? at_hi->first : first->first) + ")");
    }
    int64_t hi = hi_t;
    while (hi - lo > 1) {
      const int64_t mid = lo + (hi - lo) / 2;
      ASSIGN_OR_RETURN(auto at, first_at(mid));
      if (at && at->first >= step) {
        hi = mid;
      } else {
        lo = mid;
      }
    }
    ASSIGN_OR_RETURN(auto found, first_at(hi));
    return found->second;
  }

  Result<std::optional<tel::Meta>> MetaAt(const std::string& id, int64_t t) {
    ASSIGN_OR_RETURN(int64_t rid, Rid(id));
    ASSIGN_OR_RETURN(Stmt st, Stmt::Prepare(db_,
                                            "SELECT id, body, seq, t_us, v FROM metas WHERE "
                                            "run = ?1 AND t_us <= ?2 ORDER BY t_us DESC, "
                                            "id DESC LIMIT 1"));
    st.Bind(1, rid).Bind(2, t);
    ASSIGN_OR_RETURN(bool row, st.Step("reading"));
    if (!row) return std::optional<tel::Meta>();
    json j = json::parse(st.Text(1), nullptr, false);
    if (j.is_object()) {  // the envelope lives in columns, as Messages() rebuilds it
      j["v"] = st.Int(4);
      j["run"] = id;
      j["seq"] = st.Int(2);
      j["t"] = st.Int(3);
    }
    ASSIGN_OR_RETURN(tel::Message m, ParseStored(db_, tel::kTopicMeta, j,
                                                 "metas row " + std::to_string(st.Int(0))));
    return std::optional<tel::Meta>(std::get<tel::Meta>(std::move(m)));
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
  return impl_->Messages(id, from_us, to_us, true);
}
Result<std::vector<CommandRecord>> Reader::Commands(const std::string& id) {
  return impl_->Commands(id);
}
Result<std::vector<telemetry::Message>> Reader::MessagesWithoutSpans(const std::string& id,
                                                                     int64_t from_us,
                                                                     int64_t to_us) {
  return impl_->Messages(id, from_us, to_us, false);
}
Result<std::optional<EventMark>> Reader::NearestEvent(const std::string& id, int64_t t_us,
                                                      bool forward, const EventMark* from) {
  return impl_->NearestEvent(id, t_us, forward, from);
}
Result<int64_t> Reader::StepTime(const std::string& id, int64_t step) {
  return impl_->StepTime(id, step);
}
Result<std::optional<telemetry::Meta>> Reader::MetaAt(const std::string& id, int64_t t_us) {
  return impl_->MetaAt(id, t_us);
}

}  // namespace sy::store
