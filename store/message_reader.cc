// Rows -> telemetry::Message for store::Reader::Messages: one query per
// message table over the window, parents with children read LEFT JOINed so an
// empty list still yields its message.
#include "store/message_reader.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <type_traits>

#include "store/schema.h"

namespace sy::store {

using nlohmann::json;
namespace tel = telemetry;

namespace {

// Columns 0..2 of every message query are (seq, t_us, v).
tel::Envelope EnvFromRow(const Stmt& st, const std::string& run) {
  tel::Envelope e;
  e.run = run;
  e.seq = static_cast<uint64_t>(st.Int(0));
  e.t_us = st.Int(1);
  e.v = static_cast<int>(st.Int(2));
  return e;
}

// Whether every value fits the int32 fields of the wire (phy2log, slot_device).
bool FitsInt(const std::vector<int64_t>& row) {
  return std::all_of(row.begin(), row.end(), [](int64_t v) {
    return v >= std::numeric_limits<int>::min() && v <= std::numeric_limits<int>::max();
  });
}

// The slice Messages() reads: run `run` (row id `rid`), from <= t_us < to.
struct Window {
  const std::string& run;
  int64_t rid, from, to;
};

struct Timed {
  int64_t t_us;
  size_t topic;  // variant index: the stable topic order at equal t
  uint64_t seq;
  tel::Message m;
};

class MessageReader {
 public:
  explicit MessageReader(Db& db) : db_(db) {}

  Status ReadAll(const std::string& id, int64_t rid, int64_t from, int64_t to, bool with_spans,
                 std::vector<Timed>& all);

 private:
  Result<tel::Message> Parse(std::string_view topic, const json& j, std::string_view where) {
    return ParseStored(db_, topic, j, where);
  }

  Status Corrupt(std::string_view table, int64_t id, std::string_view what) const {
    return DataLoss(std::string(table) + " row " + std::to_string(id) + " in " + db_.path() + ": " +
                    std::string(what));
  }

  // Runs `sql` (which selects seq, t_us, v first and filters on ?1 run,
  // ?2 <= t_us < ?3) over the window and hands each row to `row`.
  template <typename F>
  Status Each(const std::string& sql, const Window& w, F&& row) {
    ASSIGN_OR_RETURN(Stmt st, Stmt::Prepare(db_, sql));
    st.Bind(1, w.rid).Bind(2, w.from).Bind(3, w.to);
    for (;;) {
      ASSIGN_OR_RETURN(bool more, st.Step("reading"));
      if (!more) return Status::Ok();
      RETURN_IF_ERROR(row(st));
    }
  }

  template <typename T>
  void Add(std::vector<Timed>& all, T m) {
    tel::Message msg(std::move(m));
    const tel::Envelope& e = tel::EnvelopeOf(msg);
    all.push_back(Timed{e.t_us, msg.index(), e.seq, std::move(msg)});
  }

  // Messages stored as a parent row plus child rows (spans, kernel_stats,
  // occupancy_devices, request_progress). `select` reads the parent `b` LEFT
  // JOINed with its children `c`, so an empty list still yields its message,
  // and selects b.seq, b.t_us, b.v, b.step, b.id, b.n, c.idx first; the
  // window filter and an order that keeps each parent's rows consecutive
  // (children by idx) are appended here. `read_parent(st, p)` reads the
  // parent's own further columns; `read_child(st)` returns the child of a row
  // whose c.idx is not NULL, which goes to the list `children` names: a
  // member pointer, or `children(parent, st)` returning the list (a message
  // with two lists). A parent holding other than n children is DATA_LOSS
  // naming `table`.
  template <typename Parent, typename Children, typename ReadParent, typename ReadChild>
  Status ReadGrouped(const std::string& select, std::string_view table, Children children,
                     std::string_view noun, const Window& w, std::vector<Timed>& all,
                     ReadParent&& read_parent, ReadChild&& read_child) {
    std::optional<Parent> cur;
    int64_t cur_id = -1, want = 0, have = 0;
    auto finish = [&]() -> Status {
      if (!cur) return Status::Ok();
      if (have != want) {
        return Corrupt(table, cur_id,
                       "holds " + std::to_string(have) + " of its " + std::to_string(want) + " " +
                           std::string(noun));
      }
      Add(all, std::move(*cur));
      cur.reset();
      return Status::Ok();
    };
    RETURN_IF_ERROR(Each(select + " WHERE b.run = ?1 AND b.t_us >= ?2 AND b.t_us < ?3 "
                                  "ORDER BY b.t_us, b.seq, b.id, c.idx",
                         w, [&](const Stmt& st) -> Status {
                           if (st.Int(4) != cur_id) {
                             RETURN_IF_ERROR(finish());
                             cur.emplace();
                             cur->env = EnvFromRow(st, w.run);
                             cur->step = st.Int(3);
                             read_parent(st, *cur);
                             cur_id = st.Int(4);
                             want = st.Int(5);
                             have = 0;
                           }
                           if (st.IsNull(6)) return Status::Ok();
                           ++have;
                           if constexpr (std::is_member_object_pointer_v<Children>) {
                             ((*cur).*children).push_back(read_child(st));
                           } else {
                             children(*cur, st).push_back(read_child(st));
                           }
                           return Status::Ok();
                         }));
    return finish();
  }

  Db& db_;
};

}  // namespace

Result<tel::Message> ParseStored(const Db& db, std::string_view topic, const json& j,
                                 std::string_view where) {
  if (j.is_discarded()) return DataLoss(std::string(where) + " in " + db.path() + " is not JSON");
  Result<tel::Message> m = tel::FromJson(topic, j);
  if (!m.ok()) {
    return DataLoss(std::string(where) + " in " + db.path() + ": " + m.status().message());
  }
  return m;
}

Result<std::vector<tel::Message>> ReadMessages(Db& db, const std::string& run, int64_t rid,
                                               int64_t from_us, int64_t to_us, bool with_spans) {
  std::vector<Timed> all;
  RETURN_IF_ERROR(MessageReader(db).ReadAll(run, rid, from_us, to_us, with_spans, all));
  std::stable_sort(all.begin(), all.end(), [](const Timed& a, const Timed& b) {
    if (a.t_us != b.t_us) return a.t_us < b.t_us;
    if (a.topic != b.topic) return a.topic < b.topic;
    return a.seq < b.seq;
  });
  std::vector<tel::Message> out;
  out.reserve(all.size());
  for (Timed& t : all) out.push_back(std::move(t.m));
  return out;
}

Status MessageReader::ReadAll(const std::string& id, int64_t rid, int64_t from, int64_t to,
                              bool with_spans, std::vector<Timed>& all) {
  const Window w{id, rid, from, to};
  const std::string where = " WHERE run = ?1 AND t_us >= ?2 AND t_us < ?3 ORDER BY t_us, seq, id";

  RETURN_IF_ERROR(
      Each("SELECT seq, t_us, v, body, id FROM metas" + where, w, [&](const Stmt& st) -> Status {
        json j = json::parse(st.Text(3), nullptr, false);
        if (j.is_object()) {
          tel::Envelope e = EnvFromRow(st, id);
          j["v"] = e.v;
          j["run"] = e.run;
          j["seq"] = e.seq;
          j["t"] = e.t_us;
        }
        ASSIGN_OR_RETURN(tel::Message m, Parse(tel::kTopicMeta, j, "metas.body"));
        Add(all, std::move(std::get<tel::Meta>(m)));
        return Status::Ok();
      }));

  RETURN_IF_ERROR(
      Each("SELECT seq, t_us, v, step, start_us, dur_us, prefill_tokens, "
           "decode_tokens, batch_requests, running, waiting, finished_total, "
           "generated_total FROM steps" +
               where,
           w, [&](const Stmt& st) -> Status {
             tel::Step m;
             m.env = EnvFromRow(st, id);
             m.step = st.Int(3);
             m.start_us = st.Int(4);
             m.dur_us = st.Int(5);
             m.prefill_tokens = static_cast<int>(st.Int(6));
             m.decode_tokens = static_cast<int>(st.Int(7));
             m.batch_requests = static_cast<int>(st.Int(8));
             m.running = static_cast<int>(st.Int(9));
             m.waiting = static_cast<int>(st.Int(10));
             m.finished_total = st.Int(11);
             m.generated_total = st.Int(12);
             Add(all, std::move(m));
             return Status::Ok();
           }));

  if (with_spans) {
    RETURN_IF_ERROR(ReadGrouped<tel::Spans>(
        "SELECT b.seq, b.t_us, b.v, b.step, b.id, b.n, c.idx, c.device, c.layer, n.s, k.s, "
        "c.start_us, c.dur_us, c.tokens, c.flops, c.bytes FROM span_batches b "
        "LEFT JOIN spans c ON c.batch = b.id LEFT JOIN names n ON n.id = c.name "
        "LEFT JOIN names k ON k.id = c.kind",
        "span_batches", &tel::Spans::spans, "spans", w, all, [](const Stmt&, tel::Spans&) {},
        [](const Stmt& st) {
          tel::Span s;
          s.device = static_cast<int>(st.Int(7));
          s.layer = static_cast<int>(st.Int(8));
          s.name = st.Text(9);
          s.kind = st.Text(10);
          s.start_us = st.Int(11);
          s.dur_us = st.Int(12);
          s.tokens = st.Int(13);
          s.flops = st.Int(14);
          s.bytes = st.Int(15);
          return s;
        }));
  }

  RETURN_IF_ERROR(ReadGrouped<tel::KernelStats>(
      "SELECT b.seq, b.t_us, b.v, b.step, b.id, b.n, c.idx, c.device, n.s, k.s, c.count, "
      "c.total_us, c.max_us, c.flops, c.bytes FROM kstat_batches b "
      "LEFT JOIN kernel_stats c ON c.batch = b.id LEFT JOIN names n ON n.id = c.name "
      "LEFT JOIN names k ON k.id = c.kind",
      "kstat_batches", &tel::KernelStats::kernels, "rows", w, all,
      [](const Stmt&, tel::KernelStats&) {},
      [](const Stmt& st) {
        tel::KernelStat k;
        k.device = static_cast<int>(st.Int(7));
        k.name = st.Text(8);
        k.kind = st.Text(9);
        k.count = static_cast<int>(st.Int(10));
        k.total_us = st.Int(11);
        k.max_us = st.Int(12);
        k.flops = st.Int(13);
        k.bytes = st.Int(14);
        return k;
      }));

  RETURN_IF_ERROR(ReadGrouped<tel::Occupancy>(
      "SELECT b.seq, b.t_us, b.v, b.step, b.id, b.n, c.idx, b.running, b.waiting, "
      "b.prefill_tokens, b.decode_tokens, c.device, c.kv_pages_used, c.kv_pages_total, "
      "c.running, c.state_slots_used, c.state_slots_total, c.kv_bytes_used, c.kv_bytes_total, "
      "c.state_bytes_used, c.state_bytes_total, c.cache_tokens, c.cache_nodes, c.cache_slots, "
      "c.cache_hit_rate, c.cache_evicted_pages "
      "FROM occupancy b LEFT JOIN occupancy_devices c ON c.occ = b.id",
      "occupancy", &tel::Occupancy::devices, "devices", w, all,
      [](const Stmt& st, tel::Occupancy& o) {
        o.running = static_cast<int>(st.Int(7));
        o.waiting = static_cast<int>(st.Int(8));
        o.prefill_tokens = static_cast<int>(st.Int(9));
        o.decode_tokens = static_cast<int>(st.Int(10));
      },
      [](const Stmt& st) {
        tel::DeviceOccupancy d;
        d.device = static_cast<int>(st.Int(11));
        d.kv_pages_used = static_cast<int>(st.Int(12));
        d.kv_pages_total = static_cast<int>(st.Int(13));
        d.running = static_cast<int>(st.Int(14));
        d.state_slots_used = static_cast<int>(st.Int(15));
        d.state_slots_total = static_cast<int>(st.Int(16));
        d.kv_bytes_used = st.Int(17);
        d.kv_bytes_total = st.Int(18);
        d.state_bytes_used = st.Int(19);
        d.state_bytes_total = st.Int(20);
        d.cache_tokens = st.Int(21);
        d.cache_nodes = static_cast<int>(st.Int(22));
        d.cache_slots = static_cast<int>(st.Int(23));
        d.cache_hit_rate = st.Real(24);
        d.cache_evicted_pages = st.Int(25);
        return d;
      }));

  RETURN_IF_ERROR(Each(
      "SELECT seq, t_us, v, step, counts, expert_device, id, phy2log, slot_device, "
      "balancedness FROM expert_load" +
          where,
      w, [&](const Stmt& st) -> Status {
        tel::ExpertLoad m;
        m.env = EnvFromRow(st, id);
        m.step = st.Int(3);
        const int64_t row_id = st.Int(6);
        Result<std::vector<std::vector<int64_t>>> counts = DecodeRows(st.Blob(4));
        if (!counts.ok()) return Corrupt("expert_load", row_id, counts.status().message());
        Result<std::vector<std::vector<int64_t>>> dev = DecodeRows(st.Blob(5));
        if (!dev.ok() || dev->size() != 1) {
          return Corrupt("expert_load", row_id, "bad expert_device blob");
        }
        m.counts = std::move(*counts);
        m.expert_device.assign((*dev)[0].begin(), (*dev)[0].end());
        // Placement (v4); rows migrated from v3 hold zero rows and '[]'.
        Result<std::vector<std::vector<int64_t>>> phy2log = DecodeRows(st.Blob(7));
        if (!phy2log.ok()) return Corrupt("expert_load", row_id, "bad phy2log blob");
        for (const auto& layer : *phy2log) {
          if (!FitsInt(layer)) return Corrupt("expert_load", row_id, "phy2log out of range");
          m.phy2log.emplace_back(layer.begin(), layer.end());
        }
        Result<std::vector<std::vector<int64_t>>> slots = DecodeRows(st.Blob(8));
        if (!slots.ok() || slots->size() > 1 || (slots->size() == 1 && !FitsInt((*slots)[0]))) {
          return Corrupt("expert_load", row_id, "bad slot_device blob");
        }
        if (!slots->empty()) m.slot_device.assign((*slots)[0].begin(), (*slots)[0].end());
        const json bal = json::parse(st.Text(9), nullptr, /*allow_exceptions=*/false);
        if (!bal.is_array()) {
          return Corrupt("expert_load", row_id, "balancedness is not a JSON array");
        }
        for (const json& b : bal) {
          if (!b.is_number()) {
            return Corrupt("expert_load", row_id, "balancedness holds a non-number");
          }
          m.balancedness.push_back(b.get<double>());
        }
        Add(all, std::move(m));
        return Status::Ok();
      }));

  RETURN_IF_ERROR(
      Each("SELECT seq, t_us, v, req_id, device, prompt_tokens, output_tokens, "
           "arrival_us, ttft_us, tpot_us, e2e_us, finish, cached_tokens, preemptions "
           "FROM requests" +
               where,
           w, [&](const Stmt& st) -> Status {
             tel::RequestDone m;
             m.env = EnvFromRow(st, id);
             m.id = st.Int(3);
             m.device = static_cast<int>(st.Int(4));
             m.prompt_tokens = static_cast<int>(st.Int(5));
             m.output_tokens = static_cast<int>(st.Int(6));
             m.arrival_us = st.Int(7);
             m.ttft_us = st.Int(8);
             m.tpot_us = st.Int(9);
             m.e2e_us = st.Int(10);
             m.finish = st.Text(11);
             m.cached_tokens = static_cast<int>(st.Int(12));
             m.preemptions = static_cast<int>(st.Int(13));
             Add(all, std::move(m));
             return Status::Ok();
           }));

  // Running requests come first (idx 0..), then the waiting ones; the
  // `waiting` column says which list a child belongs to.
  RETURN_IF_ERROR(ReadGrouped<tel::Requests>(
      "SELECT b.seq, b.t_us, b.v, b.step, b.id, b.n, c.idx, b.running_total, b.waiting_total, "
      "c.waiting, c.req_id, c.device, c.prompt_tokens, c.computed, c.generated, "
      "c.max_new_tokens, c.cached_tokens, c.preemptions, c.arrival_us, c.first_token_us "
      "FROM request_snapshots b LEFT JOIN request_progress c ON c.snap = b.id",
      "request_snapshots",
      [](tel::Requests& r, const Stmt& st) -> std::vector<tel::RequestProgress>& {
        return st.Int(9) != 0 ? r.waiting : r.running;
      },
      "requests", w, all,
      [](const Stmt& st, tel::Requests& r) {
        r.running_total = static_cast<int>(st.Int(7));
        r.waiting_total = static_cast<int>(st.Int(8));
      },
      [](const Stmt& st) {
        return tel::RequestProgress{.id = st.Int(10),
                                    .device = static_cast<int>(st.Int(11)),
                                    .prompt_tokens = static_cast<int>(st.Int(12)),
                                    .computed = static_cast<int>(st.Int(13)),
                                    .generated = static_cast<int>(st.Int(14)),
                                    .max_new_tokens = static_cast<int>(st.Int(15)),
                                    .cached_tokens = static_cast<int>(st.Int(16)),
                                    .preemptions = static_cast<int>(st.Int(17)),
                                    .arrival_us = st.Int(18),
                                    .first_token_us = st.Int(19)};
      }));

  RETURN_IF_ERROR(
      Each("SELECT seq, t_us, v, kind, name, phase, message, detail, id FROM events" + where, w,
           [&](const Stmt& st) -> Status {
             tel::Event m;
             m.env = EnvFromRow(st, id);
             m.kind = st.Text(3);
             m.name = st.Text(4);
             m.phase = st.Text(5);
             m.message = st.Text(6);
             m.detail = json::parse(st.Text(7), nullptr, false);
             if (!m.detail.is_object()) {
               return Corrupt("events", st.Int(8), "detail is not a JSON object");
             }
             Add(all, std::move(m));
             return Status::Ok();
           }));

  RETURN_IF_ERROR(
      Each("SELECT seq, t_us, v, interval_ms, state, sent_total, dropped_total, "
           "dropped, step, id FROM heartbeats" +
               where,
           w, [&](const Stmt& st) -> Status {
             tel::Heartbeat m;
             m.env = EnvFromRow(st, id);
             m.interval_ms = static_cast<int>(st.Int(3));
             m.state = st.Text(4);
             m.sent_total = st.Int(5);
             m.dropped_total = st.Int(6);
             json d = json::parse(st.Text(7), nullptr, false);
             try {
               d.get_to(m.dropped);
             } catch (const std::exception& e) {
               return Corrupt("heartbeats", st.Int(9), std::string("bad dropped map: ") + e.what());
             }
             m.step = st.Int(8);
             Add(all, std::move(m));
             return Status::Ok();
           }));
  return Status::Ok();
}

}  // namespace sy::store
