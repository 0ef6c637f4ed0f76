// File: tests/store/tool_test_util.h
//
// Builds real store files for the moe-store tests with store::Writer: runs
// with nested, duplicate, zero-length and overlapping spans on several
// devices and kinds, occupancy, switch/rebalance/command events, layouts that
// change, and operator commands; plus raw SQL reads that do not go through
// the code under test.
#pragma once

#include <sqlite3.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "store/store.h"
#include "tests/store/store_test_util.h"

namespace sy::store::testing {

// All rows of `sql` as text.
inline std::vector<std::vector<std::string>> SqlRows(const std::string& path,
                                                     const std::string& sql) {
  std::vector<std::vector<std::string>> out;
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK) {
      while (sqlite3_step(st) == SQLITE_ROW) {
        std::vector<std::string> row;
        for (int i = 0; i < sqlite3_column_count(st); ++i) {
          const unsigned char* t = sqlite3_column_text(st, i);
          row.emplace_back(t ? reinterpret_cast<const char*>(t) : "");
        }
        out.push_back(std::move(row));
      }
    } else {
      ADD_FAILURE() << sqlite3_errmsg(db) << " in " << sql;
    }
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return out;
}

inline std::string FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline constexpr int64_t kStepUs = 10000;

inline tel::Span MakeSpan(int device, const std::string& name, const std::string& kind,
                          int64_t start, int64_t dur) {
  tel::Span s;
  s.device = device;
  s.layer = 1;
  s.name = name;
  s.kind = kind;
  s.start_us = start;
  s.dur_us = dur;
  s.tokens = 8;
  s.flops = 1000;
  s.bytes = 64;
  return s;
}

// Step i (from 0) runs [10000 (i+1), +8000] µs of engine time. Per device:
// attn, expert_ffn with two identical gemm inside, all_to_all (comm) that
// overlaps both compute spans, a zero-length mark at expert_ffn's end;
// device 0 also has overlap_a/overlap_b that overlap without nesting. With
// `story`: step 1 switches EP -> TP (command recorded, event, new Meta),
// step 2 rebalances. Step 0 has one span whose name is not UTF-8.
inline void WriteRun(Writer& w, const std::string& run, int64_t started_unix_ms, int steps,
                     bool story) {
  tel::Meta meta = SampleMeta(run, 0, 0);
  meta.started_unix_ms = started_unix_ms;
  meta.layout = "EP";
  meta.model.preset = "tiny-moe";
  w.Enqueue(meta);
  uint64_t seq = 1;
  for (int i = 0; i < steps; ++i) {
    const int64_t t = kStepUs * (i + 1);
    tel::Spans sp;
    sp.env = Env(run, seq++, t + 8000);
    sp.step = i;
    for (int d = 0; d < 2; ++d) {
      // Not in time order on purpose: the export sorts.
      sp.spans.push_back(MakeSpan(d, "gemm", "compute", t + 2100, 1000));
      sp.spans.push_back(MakeSpan(d, "expert_ffn", "compute", t + 2000, 3000));
      sp.spans.push_back(MakeSpan(d, "attn", "compute", t, 2000));
      sp.spans.push_back(MakeSpan(d, "gemm", "compute", t + 2100, 1000));
      sp.spans.push_back(MakeSpan(d, "all_to_all", "comm", t + 1500, 1000));
      sp.spans.push_back(MakeSpan(d, "mark", "compute", t + 5000, 0));
    }
    sp.spans.push_back(MakeSpan(0, "overlap_b", "compute", t + 6500, 1000));
    sp.spans.push_back(MakeSpan(0, "overlap_a", "compute", t + 6000, 1000));
    if (i == 0) sp.spans.push_back(MakeSpan(1, "bad\xff name", "compute", t + 7000, 10));
    w.Enqueue(sp);

    tel::Step st;
    st.env = Env(run, seq++, t + 8000);
    st.step = i;
    st.start_us = t;
    st.dur_us = 8000;
    st.prefill_tokens = 16;
    st.decode_tokens = 4;
    st.batch_requests = 3;
    st.running = 3;
    st.waiting = i;
    w.Enqueue(st);

    tel::Occupancy oc;
    oc.env = Env(run, seq++, t + 8000);
    oc.step = i;
    oc.running = 3;
    oc.waiting = i;
    oc.devices = {{0, 10 + i, 128, 2, 1, 8}, {1, 20 + i, 128, 1, 0, 0}};
    w.Enqueue(oc);

    auto event = [&](int64_t at, std::string kind, std::string name, std::string phase) {
      tel::Event ev;
      ev.env = Env(run, seq++, at);
      ev.kind = std::move(kind);
      ev.name = std::move(name);
      ev.phase = std::move(phase);
      ev.message = ev.kind + " " + ev.name + " " + ev.phase;
      ev.detail = {{"step", i}};
      w.Enqueue(ev);
    };
    if (i == 0) event(t, "lifecycle", "start", "");
    if (story && i == 1) {
      CommandRecord c;
      c.run = run;
      c.t_us = t + 7000;
      c.unix_ms = started_unix_ms + 17;
      c.text = "switch tp";
      c.request = R"({"cmd":"switch","args":{"to":"tp"}})";
      c.ok = true;
      c.reply = R"({"from":"EP","to":"TP"})";
      w.RecordCommand(c);
      event(t + 7000, "command", "switch", "received");
      event(t + 7900, "switch", "switch", "done");
      event(t + 7900, "command", "switch", "done");
      tel::Meta m2 = meta;
      m2.env = Env(run, seq++, t + 7950);
      m2.layout = "TP";
      w.Enqueue(m2);
    }
    if (story && i == 2) {
      event(t + 100, "rebalance", "rebalance", "planned");
      event(t + 7000, "rebalance", "rebalance", "done");
      event(t + 7500, "rebalance", "auto", "done");  // not a rebalance of its own
    }
  }
}

// runs.db with three runs, oldest first: "old" (2 steps, abnormal end),
// "mid" (3 steps, story) and "new" (4 steps, story), plus a command with no
// run. Returns the path.
inline std::string WriteStore(const TempDir& dir) {
  std::string path = dir.File("runs.db");
  auto w = Writer::Open(path);
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  if (!w.ok()) return path;
  WriteRun(**w, "old", 1700000000000, 2, false);
  WriteRun(**w, "mid", 1700000100000, 3, true);
  WriteRun(**w, "new", 1700000200000, 4, true);
  CommandRecord orphan;
  orphan.text = "status";
  orphan.request = R"({"cmd":"status"})";
  orphan.reply = "connection refused";
  (*w)->RecordCommand(orphan);
  (*w)->Flush();
  (*w)->EndRun("old", /*abnormal=*/true);
  return path;
}

}  // namespace sy::store::testing
