// moe-store export: Chrome Trace JSON from a real store file, checked
// against the rows the Writer stored (read with raw SQL, not the exporter).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "base/status_matchers.h"
#include "store/tool/chrome_trace.h"
#include "store/tool/store_file.h"
#include "tests/store/tool_test_util.h"

namespace sy::store::tool {
namespace {

using nlohmann::json;
using ::sy::store::testing::SqlRows;
using ::sy::store::testing::TempDir;
using ::sy::store::testing::WriteStore;
using ::testing::HasSubstr;

struct Exported {
  Status status;
  ExportStats stats;
  json trace;
  int chunks = 0;
};

Exported Export(const std::string& path, ExportOptions o) {
  Exported e;
  Result<StoreFile> f = StoreFile::Open(path, StoreFile::kRead);
  EXPECT_THAT(f, IsOk());
  if (!f.ok()) return e;
  std::string text;
  Result<ExportStats> st = ExportChromeTrace(f->db(), o, [&](std::string_view chunk) {
    text.append(chunk);
    ++e.chunks;
    return Status::Ok();
  });
  e.status = st.ok() ? Status::Ok() : st.status();
  if (!st.ok()) {
    EXPECT_TRUE(text.empty()) << "bytes written before the error";
    return e;
  }
  e.stats = *st;
  EXPECT_EQ(e.stats.bytes, static_cast<int64_t>(text.size()));
  e.trace = json::parse(text, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(e.trace.is_discarded()) << "not JSON: " << text.substr(0, 400);
  return e;
}

// (name, ts, dur) of every stored span of `run` overlapping [from, to], from SQL.
using SpanKey = std::tuple<std::string, int64_t, int64_t>;
std::multiset<SpanKey> StoredSpans(const std::string& path, const std::string& run,
                                   int64_t from = INT64_MIN, int64_t to = INT64_MAX) {
  std::multiset<SpanKey> out;
  for (const auto& r :
       SqlRows(path, "SELECT CAST(name AS BLOB), start_us, dur_us FROM spans_v WHERE run_id = '" +
                         run + "'")) {
    const int64_t start = std::stoll(r[1]), dur = std::stoll(r[2]);
    if (start <= to && start + dur >= from) {
      // The export writes invalid UTF-8 as U+FFFD.
      std::string name = json(r[0]).dump(-1, ' ', false, json::error_handler_t::replace);
      out.emplace(json::parse(name).get<std::string>(), start, dur);
    }
  }
  return out;
}

std::multiset<SpanKey> ExportedSpans(const json& trace) {
  std::multiset<SpanKey> out;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] == "X" && e["cat"] != "step") {
      out.emplace(e["name"].get<std::string>(), e["ts"].get<int64_t>(), e["dur"].get<int64_t>());
    }
  }
  return out;
}

std::map<int64_t, std::string> ThreadNames(const json& trace) {
  std::map<int64_t, std::string> out;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") out[e["tid"]] = e["args"]["name"];
  }
  return out;
}

TEST(StoreToolExport, ValidTraceEventJsonWithRequiredFields) {
  TempDir dir;
  std::string path = WriteStore(dir);
  Exported e = Export(path, {.run = "new"});
  ASSERT_THAT(e.status, IsOk());
  ASSERT_TRUE(e.trace.is_object());
  ASSERT_TRUE(e.trace["traceEvents"].is_array());
  EXPECT_EQ(e.trace["otherData"]["run"], "new");
  std::set<std::string> phases;
  std::set<int64_t> pids, used_tids;
  bool process_named = false;
  for (const json& ev : e.trace["traceEvents"]) {
    SCOPED_TRACE(ev.dump());
    ASSERT_TRUE(ev.is_object());
    ASSERT_TRUE(ev.contains("name") && ev["name"].is_string());
    ASSERT_TRUE(ev.contains("ph") && ev["ph"].is_string());
    ASSERT_TRUE(ev.contains("pid") && ev["pid"].is_number_integer());
    ASSERT_TRUE(ev.contains("tid") && ev["tid"].is_number_integer());
    const std::string ph = ev["ph"];
    phases.insert(ph);
    pids.insert(ev["pid"].get<int64_t>());
    if (ph != "M") {
      ASSERT_TRUE(ev.contains("ts") && ev["ts"].is_number_integer());
    }
    if (ph == "X") {
      ASSERT_TRUE(ev.contains("dur") && ev["dur"].is_number_integer());
      EXPECT_GE(ev["dur"].get<int64_t>(), 0);
      used_tids.insert(ev["tid"].get<int64_t>());
    } else if (ph == "i") {
      EXPECT_EQ(ev["s"], "t");
      used_tids.insert(ev["tid"].get<int64_t>());
    } else if (ph == "C") {
      ASSERT_TRUE(ev["args"].is_object());
      for (const auto& [k, v] : ev["args"].items()) EXPECT_TRUE(v.is_number()) << k;
    } else if (ph == "M") {
      ASSERT_TRUE(ev["args"].is_object());
      if (ev["name"] == "process_name") process_named = ev["args"]["name"].is_string();
    } else {
      ADD_FAILURE() << "unexpected phase " << ph;
    }
  }
  EXPECT_EQ(phases, (std::set<std::string>{"C", "M", "X", "i"}));
  EXPECT_EQ(pids.size(), 1u) << "one process per run";
  EXPECT_TRUE(process_named);
  std::map<int64_t, std::string> names = ThreadNames(e.trace);
  for (int64_t tid : used_tids) EXPECT_TRUE(names.count(tid)) << "unnamed track " << tid;
  // One track per device and stream, steps and event kinds apart.
  std::set<std::string> track_names;
  for (const auto& [tid, n] : names) track_names.insert(n);
  for (const char* want : {"steps", "device 0 compute", "device 0 comm", "device 1 compute",
                           "device 1 comm", "device 0 compute #2", "events: switch",
                           "events: rebalance", "events: command", "operator commands"}) {
    EXPECT_TRUE(track_names.count(want)) << want;
  }
  EXPECT_FALSE(track_names.count("device 1 compute #2")) << "device 1 nests on one track";
  EXPECT_EQ(e.stats.tracks, static_cast<int64_t>(names.size()));
  EXPECT_EQ(e.stats.overflow_tracks, 1);
}

TEST(StoreToolExport, CompleteEventsNestPerTrack) {
  TempDir dir;
  std::string path = WriteStore(dir);
  Exported e = Export(path, {.run = "new"});
  ASSERT_THAT(e.status, IsOk());
  std::map<std::pair<int64_t, int64_t>, std::vector<std::pair<int64_t, int64_t>>> tracks;
  for (const json& ev : e.trace["traceEvents"]) {
    if (ev["ph"] != "X") continue;
    tracks[{ev["pid"], ev["tid"]}].emplace_back(ev["ts"], ev["dur"]);
  }
  ASSERT_GE(tracks.size(), 6u);
  for (auto& [key, evs] : tracks) {
    std::sort(evs.begin(), evs.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first < b.first : a.second > b.second;
    });
    std::vector<int64_t> open;  // ends of the enclosing events
    for (const auto& [ts, dur] : evs) {
      while (!open.empty() && open.back() <= ts) open.pop_back();
      ASSERT_TRUE(open.empty() || ts + dur <= open.back())
          << "event [" << ts << ", +" << dur << "] crosses the end " << open.back()
          << " of its parent on tid " << key.second;
      open.push_back(ts + dur);
    }
  }
}

TEST(StoreToolExport, EveryStoredSpanExactlyOnce) {
  TempDir dir;
  std::string path = WriteStore(dir);
  for (const char* run : {"old", "mid", "new"}) {
    SCOPED_TRACE(run);
    Exported e = Export(path, {.run = run});
    ASSERT_THAT(e.status, IsOk());
    std::multiset<SpanKey> stored = StoredSpans(path, run);
    ASSERT_EQ(static_cast<int64_t>(stored.size()),
              std::stoll(SqlRows(
                  path, std::string("SELECT n_spans FROM runs WHERE id = '") + run + "'")[0][0]));
    EXPECT_EQ(ExportedSpans(e.trace), stored);
    EXPECT_EQ(e.stats.spans, static_cast<int64_t>(stored.size()));
  }
  // The name that is not UTF-8 arrived, replaced.
  Exported e = Export(path, {.run = "old"});
  EXPECT_THAT(e.trace.dump(), HasSubstr("bad\xEF\xBF\xBD name"));
}

TEST(StoreToolExport, InstantsAndCountersFromEventsOccupancyAndCommands) {
  TempDir dir;
  std::string path = WriteStore(dir);
  Exported e = Export(path, {.run = "mid"});
  ASSERT_THAT(e.status, IsOk());
  std::multiset<std::string> instants, counters;
  for (const json& ev : e.trace["traceEvents"]) {
    if (ev["ph"] == "i")
      instants.insert(ev["cat"].get<std::string>() + ":" + ev["name"].get<std::string>());
    if (ev["ph"] == "C") counters.insert(ev["name"].get<std::string>());
    if (ev["ph"] == "i" && ev["cat"] == "operator") {
      EXPECT_EQ(ev["ts"], 2 * testing::kStepUs + 7000);
      EXPECT_EQ(ev["args"]["ok"], true);
      EXPECT_EQ(ev["args"]["request"]["args"]["to"], "tp");
    }
  }
  EXPECT_EQ(instants.count("switch:switch done"), 1u);
  EXPECT_EQ(instants.count("rebalance:rebalance done"), 1u);
  EXPECT_EQ(instants.count("rebalance:rebalance planned"), 1u);
  EXPECT_EQ(instants.count("command:switch received"), 1u);
  EXPECT_EQ(instants.count("operator:switch tp"), 1u);
  EXPECT_EQ(instants.count("lifecycle:start"), 1u);
  // One sample per occupancy message (3 steps) per counter; device 1 has no
  // state pool.
  EXPECT_EQ(counters.count("requests"), 3u);
  EXPECT_EQ(counters.count("tokens"), 3u);
  EXPECT_EQ(counters.count("device 0 KV pages"), 3u);
  EXPECT_EQ(counters.count("device 1 KV pages"), 3u);
  EXPECT_EQ(counters.count("device 0 state slots"), 3u);
  EXPECT_EQ(counters.count("device 1 state slots"), 0u);
}

TEST(StoreToolExport, WindowKeepsExactlyTheOverlappingSpans) {
  TempDir dir;
  std::string path = WriteStore(dir);
  // Step 1 runs [20000, 28000]; its expert_ffn [22000, 25000] ends exactly
  // at 25000 and its mark sits at 25000 with no length.
  struct Window {
    int64_t from, to;
  } const windows[] = {{25000, 26000}, {0, 10000}, {20500, 20500}, {27000, 100000}, {0, 1}};
  for (const Window w : windows) {
    SCOPED_TRACE(std::to_string(w.from) + ".." + std::to_string(w.to));
    Exported e = Export(path, {.run = "new", .from_us = w.from, .to_us = w.to});
    ASSERT_THAT(e.status, IsOk());
    EXPECT_EQ(ExportedSpans(e.trace), StoredSpans(path, "new", w.from, w.to));
    for (const json& ev : e.trace["traceEvents"]) {
      const std::string ph = ev["ph"];
      if (ph == "i" || ph == "C") {
        EXPECT_GE(ev["ts"].get<int64_t>(), w.from);
        EXPECT_LE(ev["ts"].get<int64_t>(), w.to);
      }
      if (ph == "X") {
        EXPECT_LE(ev["ts"].get<int64_t>(), w.to);
        EXPECT_GE(ev["ts"].get<int64_t>() + ev["dur"].get<int64_t>(), w.from);
      }
    }
  }
  Exported edge = Export(path, {.run = "new", .from_us = 25000, .to_us = 26000});
  std::multiset<SpanKey> spans = ExportedSpans(edge.trace);
  EXPECT_EQ(spans.count({"expert_ffn", 22000, 3000}), 2u);  // both devices; ends at the start
  EXPECT_EQ(spans.count({"mark", 25000, 0}), 2u);
  EXPECT_EQ(spans.count({"attn", 20000, 2000}), 0u);
  EXPECT_TRUE(ExportedSpans(Export(path, {.run = "new", .from_us = 0, .to_us = 1}).trace).empty());
}

TEST(StoreToolExport, StreamsLargeRunsInChunks) {
  TempDir dir;
  std::string path = dir.File("big.db");
  {
    auto w = Writer::Open(path);
    ASSERT_THAT(w, IsOk());
    testing::WriteRun(**w, "big", 1700000000000, 2000, true);  // 30000 spans
  }
  Exported e = Export(path, {.run = "big"});
  ASSERT_THAT(e.status, IsOk());
  EXPECT_GT(e.chunks, 2) << "the JSON is handed over in pieces, not built whole";
  EXPECT_EQ(ExportedSpans(e.trace), StoredSpans(path, "big"));
  EXPECT_EQ(e.stats.steps, 2000);
}

TEST(StoreToolExport, UnknownRunAndReversedWindowWriteNothing) {
  TempDir dir;
  std::string path = WriteStore(dir);
  Exported e = Export(path, {.run = "nope"});
  EXPECT_THAT(e.status, StatusIs(StatusCode::kNotFound, HasSubstr("no run 'nope' in " + path)));
  e = Export(path, {.run = "new", .from_us = 5, .to_us = 4});
  EXPECT_THAT(e.status, StatusIs(StatusCode::kInvalidArgument, HasSubstr("starts after it ends")));
}

TEST(StoreToolExport, SinkErrorStopsTheExport) {
  TempDir dir;
  std::string path = WriteStore(dir);
  Result<StoreFile> f = StoreFile::Open(path, StoreFile::kRead);
  ASSERT_THAT(f, IsOk());
  Result<ExportStats> st = ExportChromeTrace(
      f->db(), {.run = "new"}, [](std::string_view) { return ResourceExhausted("disk full"); });
  EXPECT_THAT(st, StatusIs(StatusCode::kResourceExhausted, HasSubstr("disk full")));
}

}  // namespace
}  // namespace sy::store::tool
