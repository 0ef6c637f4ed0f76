// File: tests/store/store_test_util.h
//
// Helpers shared by the store tests: a temp directory that cleans up after
// itself, sample messages of every type, raw SQL on a store file, and message
// comparison through the wire JSON (the messages have no operator==).
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <vector>

#include "store/store.h"
#include "telemetry/protocol.h"

namespace sy::store::testing {

namespace tel = ::sy::telemetry;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "sy_store_XXXXXX").string();
    char* p = mkdtemp(tmpl.data());
    EXPECT_NE(p, nullptr);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string File(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

inline tel::Envelope Env(const std::string& run, uint64_t seq, int64_t t_us) {
  tel::Envelope e;
  e.run = run;
  e.seq = seq;
  e.t_us = t_us;
  return e;
}

inline tel::Meta SampleMeta(const std::string& run, uint64_t seq, int64_t t_us) {
  tel::Meta m;
  m.env = Env(run, seq, t_us);
  m.model.preset = "tiny-moe";
  m.model.vocab = 512;
  m.model.hidden = 64;
  m.model.layers = 2;
  m.model.heads = 4;
  m.model.head_dim = 16;
  m.model.experts = 4;
  m.model.top_k = 2;
  m.model.expert_inter = 128;
  m.model.shared_inter = 64;
  m.model.max_seq = 256;
  m.model.page_size = 16;
  m.model.params = 1234567;
  m.model.arch = "bailing_hybrid";
  m.model.attention = {"kda", "mla"};
  m.devices = 2;
  m.layout = "EP";
  m.trace_level = "full";
  m.started_unix_ms = 1700000000000;
  m.workload = "poisson 20 rps, prompts 16..64 — ünïcode";
  m.expert_device = {0, 0, 1, 1};
  m.kv_pages_per_device = 128;
  m.state_slots_per_device = 8;
  return m;
}

inline tel::Spans SampleSpans(const std::string& run, uint64_t seq, int64_t t_us, int64_t step,
                              int n) {
  tel::Spans m;
  m.env = Env(run, seq, t_us);
  m.step = step;
  for (int i = 0; i < n; ++i) {
    tel::Span s;
    s.device = i % 2;
    s.layer = (i % 5) - 1;  // includes -1: outside the layer stack
    s.name = (i % 3 == 0) ? "attn" : (i % 3 == 1 ? "expert_ffn" : "all_to_all");
    s.kind = (i % 3 == 2) ? "comm" : "compute";
    s.start_us = t_us + i * 10;
    s.dur_us = 7 + i;
    s.tokens = 32 + i;
    s.flops = (int64_t{1} << 40) | i;
    s.bytes = 4096L * i;
    m.spans.push_back(s);
  }
  return m;
}

inline tel::RequestProgress SampleProgress(int64_t id, int device, int computed,
                                           int64_t first_token_us) {
  return tel::RequestProgress{.id = id,
                              .device = device,
                              .prompt_tokens = 48,
                              .computed = computed,
                              .generated = computed > 48 ? computed - 48 : 0,
                              .max_new_tokens = 64,
                              .cached_tokens = device >= 0 ? 16 : 0,
                              .preemptions = static_cast<int>(id % 3),
                              .arrival_us = 100 * id,
                              .first_token_us = first_token_us};
}

// Running and waiting requests as the engine lists them: a running one in
// prefill (no first token yet) and one decoding; waiting ones on no device.
// `shape` 0: both lists, 1: both empty, 2: only waiting, lists capped.
inline tel::Requests SampleRequests(const std::string& run, uint64_t seq, int64_t t_us, int shape) {
  tel::Requests m;
  m.env = Env(run, seq, t_us);
  m.step = static_cast<int64_t>(seq);
  if (shape == 0) {
    m.running = {SampleProgress(7, 1, 30, -1), SampleProgress(5, 0, 60, t_us - 300)};
    m.waiting = {SampleProgress(9, -1, 0, -1)};
  } else if (shape == 2) {
    m.waiting = {SampleProgress(11, -1, 0, -1), SampleProgress(12, -1, 0, -1)};
  }
  m.running_total = static_cast<int>(m.running.size());
  m.waiting_total = static_cast<int>(m.waiting.size()) + (shape == 2 ? 300 : 0);
  return m;
}

// One run with every message type, some sharing a t_us, in arrival order.
inline std::vector<tel::Message> SampleRun(const std::string& run) {
  std::vector<tel::Message> out;
  out.push_back(SampleMeta(run, 0, 0));
  for (int i = 0; i < 3; ++i) {
    int64_t t = 1000 + 1000 * i;
    // Arrive in reverse topic order at equal t; replay sorts them.
    out.push_back(SampleRequests(run, i, t, i));

    tel::Heartbeat hb;
    hb.env = Env(run, i, t);
    hb.interval_ms = 1000;
    hb.state = i == 2 ? "stopping" : "running";
    hb.sent_total = 100 * (i + 1);
    hb.dropped_total = i;
    hb.dropped = {{"spans", i}, {"kstats", 0}};
    hb.step = i;
    out.push_back(hb);

    tel::Event ev;
    ev.env = Env(run, i, t);
    ev.kind = "command";
    ev.name = "trace";
    ev.phase = i == 0 ? "received" : "done";
    ev.message = "trace level set to full";
    ev.detail = {{"level", "full"}, {"nested", {{"a", {1, 2, 3}}, {"b", nullptr}}}};
    out.push_back(ev);

    tel::RequestDone rq;
    rq.env = Env(run, i, t);
    rq.id = 40 + i;
    rq.device = i % 2;
    rq.prompt_tokens = 17;
    rq.output_tokens = 33;
    rq.arrival_us = t - 900;
    rq.ttft_us = 120;
    rq.tpot_us = 15;
    rq.e2e_us = 600;
    rq.finish = i == 1 ? "length" : (i == 2 ? "cancelled" : "eos");
    rq.cached_tokens = 16 * i;
    rq.preemptions = i;
    out.push_back(rq);

    tel::ExpertLoad el;
    el.env = Env(run, i, t);
    el.step = i;
    el.counts = {{1, 0, 5, 1000000}, {0, 0, 0, int64_t{1} << 50}, {3}};  // ragged on purpose
    el.expert_device = {0, 0, 1, 1};
    if (i > 0) {
      // From step 1 on the engine reports its placement (EPLB, store v4);
      // step 0 leaves it out like an engine before it. A balancedness that
      // is not a round number must survive exactly.
      el.phy2log = {{0, 1, 2, 3, 2, 0}, {3, 2, 1, 0, 1, 1}, {0, 0, 0, 0, 0, 0}};
      el.slot_device = {0, 0, 0, 1, 1, 1};
      el.balancedness = {1.0 / 3 + i, 0.5, 1.0};
    }
    out.push_back(el);

    tel::Occupancy oc;
    oc.env = Env(run, i, t);
    oc.step = i;
    // Both pools and the prefix cache; byte counts beyond 32 bits must
    // survive, and a hit rate that is not a round number.
    oc.devices = {
        {0, 10 + i, 128, 3, 3, 8, (10 + i) * (int64_t{1} << 27), int64_t{128} << 27, 3 * 74752,
         8 * 74752, 160 + i, 9, 1, 0.1 * i + 1.0 / 3, 40 * i},
        {1, 12, 128, 2, 2, 8, 12 * 20480, 128 * 20480, 2 * 74752, 8 * 74752, 0, 0, 0, 0, 0}};
    oc.running = 5;
    oc.waiting = i;
    oc.prefill_tokens = 64;
    oc.decode_tokens = 5;
    out.push_back(oc);

    tel::KernelStats ks;
    ks.env = Env(run, i, t);
    ks.step = i;
    ks.kernels = {{0, "attn", "compute", 2, 30, 20, 1000, 2000},
                  {1, "all_to_all", "comm", 1, 9, 9, 0, 65536}};
    out.push_back(ks);

    out.push_back(SampleSpans(run, i, t, i, i == 1 ? 0 : 6));  // one empty spans message

    tel::Step st;
    st.env = Env(run, i, t);
    st.step = i;
    st.start_us = t - 500;
    st.dur_us = 480;
    st.prefill_tokens = 64;
    st.decode_tokens = 5;
    st.batch_requests = 6;
    st.running = 5;
    st.waiting = 1;
    st.finished_total = i;
    st.generated_total = 10 * i;
    out.push_back(st);
  }
  out.push_back(SampleMeta(run, 1, 2500));
  return out;
}

// Sorted as Reader::Messages promises: (t, topic order, seq), stable.
inline std::vector<tel::Message> ReplayOrder(std::vector<tel::Message> v) {
  std::stable_sort(v.begin(), v.end(), [](const tel::Message& a, const tel::Message& b) {
    const auto& ea = tel::EnvelopeOf(a);
    const auto& eb = tel::EnvelopeOf(b);
    if (ea.t_us != eb.t_us) return ea.t_us < eb.t_us;
    if (a.index() != b.index()) return a.index() < b.index();
    return ea.seq < eb.seq;
  });
  return v;
}

inline std::string Show(const tel::Message& m) {
  return std::string(tel::TopicOf(m)) + " " + tel::ToJson(m).dump();
}

inline void ExpectSameMessages(const std::vector<tel::Message>& got,
                               const std::vector<tel::Message>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(Show(got[i]), Show(want[i])) << "message " << i;
  }
}

// Raw SQL on a store file, outside the store API, for checks and sabotage.
inline std::string SqlText(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  std::string out = "<error>";
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) ==
      SQLITE_OK) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK) {
      int rc = sqlite3_step(st);
      if (rc == SQLITE_ROW) {
        const unsigned char* t = sqlite3_column_text(st, 0);
        out = t ? reinterpret_cast<const char*>(t) : "";
      } else if (rc == SQLITE_DONE) {
        out = "";
      } else {
        out = std::string("<error: ") + sqlite3_errmsg(db) + ">";
      }
    } else {
      out = std::string("<error: ") + sqlite3_errmsg(db) + ">";
    }
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return out;
}

// Runs every statement of `sql`; "" on success, else the error text.
inline std::string SqlExec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  std::string out;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) !=
      SQLITE_OK) {
    out = std::string("<error: ") + sqlite3_errmsg(db) + ">";
  } else {
    char* err = nullptr;
    if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      out = std::string("<error: ") + (err ? err : "?") + ">";
    }
    sqlite3_free(err);
  }
  sqlite3_close(db);
  return out;
}

}  // namespace sy::store::testing
