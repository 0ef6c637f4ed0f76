// Files that are not ours, not SQLite, newer, empty or missing, and the
// migration from an empty (v0) file.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "base/status_matchers.h"
#include "store/schema.h"
#include "store/store.h"
#include "tests/store/store_test_util.h"

namespace sy::store {
namespace {

using ::testing::HasSubstr;
using namespace ::sy::store::testing;

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f << bytes;
}

TEST(StoreSchema, GarbageFileIsDataLossWithPath) {
  TempDir dir;
  std::string path = dir.File("garbage.db");
  std::string junk;
  for (int i = 0; i < 8192; ++i) junk.push_back(static_cast<char>((i * 131 + 7) % 256));
  WriteFile(path, junk);
  EXPECT_THAT(Writer::Open(path),
              StatusIs(StatusCode::kDataLoss, HasSubstr(path + " is not a SQLite database")));
  EXPECT_THAT(Reader::Open(path), StatusIs(StatusCode::kDataLoss, HasSubstr(path)));
  // Refusing did not touch the file.
  std::ifstream f(path, std::ios::binary);
  std::string after((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(after, junk);
}

TEST(StoreSchema, ShortTextFileIsDataLoss) {
  TempDir dir;
  std::string path = dir.File("notes.txt");
  WriteFile(path, "hello, I am not a database\n");
  EXPECT_THAT(Writer::Open(path), StatusIs(StatusCode::kDataLoss, HasSubstr(path)));
  EXPECT_THAT(Reader::Open(path), StatusIs(StatusCode::kDataLoss, HasSubstr(path)));
}

TEST(StoreSchema, ForeignSqliteFileIsNotASwitchyardStore) {
  TempDir dir;
  std::string path = dir.File("other.db");
  ASSERT_EQ(SqlText(path, "CREATE TABLE recipes (name TEXT)"), "");
  EXPECT_THAT(Writer::Open(path),
              StatusIs(StatusCode::kDataLoss, HasSubstr("not a Switchyard store")));
  EXPECT_THAT(Reader::Open(path),
              StatusIs(StatusCode::kDataLoss, HasSubstr("not a Switchyard store")));
  // Not migrated behind the owner's back.
  EXPECT_EQ(SqlText(path, "PRAGMA user_version"), "0");
  EXPECT_EQ(SqlText(path, "SELECT count(*) FROM sqlite_master"), "1");

  // A versioned file without our marker is refused too.
  std::string versioned = dir.File("versioned.db");
  ASSERT_EQ(SqlText(versioned, "CREATE TABLE t (x)"), "");
  ASSERT_EQ(SqlText(versioned, "PRAGMA user_version = 1"), "");
  EXPECT_THAT(Reader::Open(versioned),
              StatusIs(StatusCode::kDataLoss, HasSubstr("not a Switchyard store")));
  EXPECT_THAT(Writer::Open(versioned),
              StatusIs(StatusCode::kDataLoss, HasSubstr("not a Switchyard store")));
}

TEST(StoreSchema, NewerSchemaIsRefused) {
  TempDir dir;
  std::string path = dir.File("runs.db");
  {
    Result<std::unique_ptr<Writer>> w = Writer::Open(path);
    ASSERT_THAT(w, IsOk());
    (*w)->Enqueue(SampleMeta("r", 0, 0));
  }
  ASSERT_EQ(SqlText(path, "PRAGMA user_version = " + std::to_string(kSchemaVersion + 1)), "");
  EXPECT_THAT(Writer::Open(path),
              StatusIs(StatusCode::kFailedPrecondition,
                       HasSubstr("schema v" + std::to_string(kSchemaVersion + 1))));
  EXPECT_THAT(Reader::Open(path), StatusIs(StatusCode::kFailedPrecondition, HasSubstr(path)));
  EXPECT_EQ(SqlText(path, "PRAGMA user_version"), std::to_string(kSchemaVersion + 1));
  // The refused Writer did not mark anything.
  EXPECT_EQ(SqlText(path, "SELECT status FROM runs WHERE id = 'r'"), "1");
}

TEST(StoreSchema, MissingFile) {
  TempDir dir;
  std::string path = dir.File("absent.db");
  EXPECT_THAT(Reader::Open(path), StatusIs(StatusCode::kNotFound, HasSubstr(path)));
  EXPECT_THAT(Writer::Open(dir.File("no/such/dir/runs.db")),
              StatusIs(StatusCode::kUnavailable, HasSubstr("no/such/dir/runs.db")));
}

TEST(StoreSchema, EmptyFileIsMigratedByWriterRefusedByReader) {
  TempDir dir;
  // A zero-byte file and a SQLite file with no tables are both version 0.
  std::string zero = dir.File("zero.db");
  WriteFile(zero, "");
  std::string empty = dir.File("empty.db");
  ASSERT_EQ(SqlText(empty, "PRAGMA page_size = 4096"), "");
  ASSERT_EQ(SqlText(empty, "VACUUM"), "");
  for (const std::string& path : {zero, empty}) {
    SCOPED_TRACE(path);
    EXPECT_THAT(Reader::Open(path),
                StatusIs(StatusCode::kDataLoss, HasSubstr("not a Switchyard store")));
    {
      Result<std::unique_ptr<Writer>> w = Writer::Open(path);
      ASSERT_THAT(w, IsOk());
    }
    EXPECT_EQ(SqlText(path, "PRAGMA user_version"), std::to_string(kSchemaVersion));
    EXPECT_EQ(SqlText(path, "SELECT value FROM store_info WHERE key = 'app'"), kStoreApp);
    EXPECT_EQ(SqlText(path, "PRAGMA journal_mode"), "wal");
    EXPECT_EQ(SqlText(path, "PRAGMA integrity_check"), "ok");
    Result<std::unique_ptr<Reader>> r = Reader::Open(path);
    ASSERT_THAT(r, IsOk());
    Result<std::vector<RunInfo>> runs = (*r)->ListRuns();
    ASSERT_THAT(runs, IsOk());
    EXPECT_TRUE(runs->empty());
  }
  // Opening again does not migrate twice.
  Result<std::unique_ptr<Writer>> again = Writer::Open(zero);
  EXPECT_THAT(again, IsOk());
}

TEST(StoreSchema, CorruptRowsAreDataLossNotACrash) {
  TempDir dir;
  std::string path = dir.File("runs.db");
  {
    Result<std::unique_ptr<Writer>> w = Writer::Open(path);
    ASSERT_THAT(w, IsOk());
    for (const auto& m : SampleRun("c")) (*w)->Enqueue(m);
  }
  ASSERT_EQ(SqlText(path, "UPDATE expert_load SET counts = x'ff' WHERE id = 1"), "");
  Result<std::unique_ptr<Reader>> r = Reader::Open(path);
  ASSERT_THAT(r, IsOk());
  EXPECT_THAT((*r)->Messages("c", 0, 100000),
              StatusIs(StatusCode::kDataLoss, HasSubstr("expert_load row 1")));
  ASSERT_EQ(SqlText(path, "DELETE FROM spans WHERE batch = 1 AND idx = 2"), "");
  ASSERT_EQ(SqlText(path, "UPDATE expert_load SET counts = x'00'"), "");
  EXPECT_THAT((*r)->Messages("c", 0, 100000),
              StatusIs(StatusCode::kDataLoss, HasSubstr("span_batches row 1")));
}

// A file exactly as a v1 build left it: the v1 migration's tables, one run
// with a v1 Meta (no arch, attention or state_slots_per_device) and one
// occupancy message of two devices with only the KV page columns.
void MakeV1Store(const std::string& path) {
  ASSERT_FALSE(MigrationSql(1).empty());
  ASSERT_EQ(SqlExec(path, std::string(MigrationSql(1)) + "; PRAGMA user_version = 1;"), "");
  nlohmann::json meta = tel::ToJson(SampleMeta("old", 0, 0));
  meta["model"].erase("arch");
  meta["model"].erase("attention");
  meta.erase("state_slots_per_device");
  ASSERT_EQ(meta["model"]["layers"], 2);
  nlohmann::json body = meta;
  for (const char* f : {"v", "run", "seq", "t"}) body.erase(f);
  const std::string q = "'";
  ASSERT_EQ(SqlExec(path,
                    "INSERT INTO runs (rid, id, status, started_unix_ms, last_t_us, model, "
                    "devices, meta_json, created_unix_ms, n_steps) VALUES (1, 'old', 1, "
                    "1700000000000, 2000, 'tiny-moe', 2, " +
                        q + meta.dump() + q +
                        ", 1700000000000, 1);"
                        "INSERT INTO metas (run, seq, t_us, v, body) VALUES (1, 0, 0, 1, " +
                        q + body.dump() + q +
                        ");"
                        "INSERT INTO occupancy (id, run, seq, t_us, v, step, running, waiting, "
                        "prefill_tokens, decode_tokens, n) VALUES (7, 1, 0, 1000, 1, 3, 5, 1, 64, "
                        "5, 2);"
                        "INSERT INTO occupancy_devices VALUES (7, 0, 1, 3, 0, 10, 128, 3);"
                        "INSERT INTO occupancy_devices VALUES (7, 1, 1, 3, 1, 12, 128, 2);"),
            "");
}

TEST(StoreSchema, V1FileIsMigratedToCurrentWithZerosForTheNewColumns) {
  TempDir dir;
  std::string path = dir.File("v1.db");
  MakeV1Store(path);
  // A v2 Reader refuses to read it unmigrated (it never writes).
  EXPECT_THAT(Reader::Open(path),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("schema v1")));
  {
    Result<std::unique_ptr<Writer>> w = Writer::Open(path);
    ASSERT_THAT(w, IsOk());
    for (const auto& m : SampleRun("new")) (*w)->Enqueue(m);
  }
  EXPECT_EQ(SqlText(path, "PRAGMA user_version"), std::to_string(kSchemaVersion));
  EXPECT_EQ(SqlText(path, "PRAGMA integrity_check"), "ok");

  Result<std::unique_ptr<Reader>> r = Reader::Open(path);
  ASSERT_THAT(r, IsOk());
  Result<RunInfo> old_run = (*r)->GetRun("old");
  ASSERT_THAT(old_run, IsOk());
  EXPECT_EQ(old_run->arch, "moe");
  EXPECT_EQ(old_run->state_slots_per_device, 0);
  EXPECT_EQ(old_run->model, "tiny-moe");

  // The old Meta now reads as what a v1 engine meant: all layers MHA, no slots.
  Result<tel::Meta> meta = (*r)->GetMeta("old");
  ASSERT_THAT(meta, IsOk());
  EXPECT_EQ(meta->model.arch, "moe");
  EXPECT_EQ(meta->model.attention, (std::vector<std::string>{"mha", "mha"}));
  EXPECT_EQ(meta->state_slots_per_device, 0);
  EXPECT_EQ(meta->kv_pages_per_device, 128);
  EXPECT_EQ(meta->model.preset, "tiny-moe");

  Result<std::vector<tel::Message>> msgs = (*r)->Messages("old", 0, 100000);
  ASSERT_THAT(msgs, IsOk());
  ASSERT_EQ(msgs->size(), 2u);
  const auto& m0 = std::get<tel::Meta>((*msgs)[0]);
  EXPECT_EQ(m0.model.attention.size(), 2u);
  const auto& occ = std::get<tel::Occupancy>((*msgs)[1]);
  ASSERT_EQ(occ.devices.size(), 2u);
  EXPECT_EQ(occ.step, 3);
  EXPECT_EQ(occ.devices[0].kv_pages_used, 10);
  EXPECT_EQ(occ.devices[1].kv_pages_used, 12);
  EXPECT_EQ(occ.devices[1].running, 2);
  for (const auto& d : occ.devices) {
    EXPECT_EQ(d.kv_pages_total, 128);
    EXPECT_EQ(d.state_slots_used, 0);
    EXPECT_EQ(d.state_slots_total, 0);
    EXPECT_EQ(d.kv_bytes_used, 0);
    EXPECT_EQ(d.kv_bytes_total, 0);
    EXPECT_EQ(d.state_bytes_used, 0);
    EXPECT_EQ(d.state_bytes_total, 0);
    EXPECT_EQ(d.cache_tokens, 0);
    EXPECT_EQ(d.cache_hit_rate, 0.0);
  }

  // The run written after the migration keeps every new field.
  Result<std::vector<tel::Message>> fresh = (*r)->Messages("new", 0, 100000);
  ASSERT_THAT(fresh, IsOk());
  ExpectSameMessages(*fresh, ReplayOrder(SampleRun("new")));
  Result<RunInfo> new_run = (*r)->GetRun("new");
  ASSERT_THAT(new_run, IsOk());
  EXPECT_EQ(new_run->arch, "bailing_hybrid");
  EXPECT_EQ(new_run->state_slots_per_device, 8);
}

// A file as a v2 build left it: one run with an occupancy message (pools, no
// prefix cache) and a finished request (no cached_tokens, preemptions), and
// no request_snapshots tables.
void MakeV2Store(const std::string& path) {
  ASSERT_EQ(SqlExec(path, std::string(MigrationSql(1)) + "; PRAGMA user_version = 1;" +
                              std::string(MigrationSql(2)) + "; PRAGMA user_version = 2;"),
            "");
  ASSERT_EQ(SqlExec(path,
                    "INSERT INTO runs (rid, id, status, created_unix_ms, n_requests) "
                    "VALUES (1, 'v2run', 1, 1700000000000, 1);"
                    "INSERT INTO occupancy (id, run, seq, t_us, v, step, running, waiting, "
                    "prefill_tokens, decode_tokens, n) VALUES (4, 1, 0, 1000, 1, 3, 2, 0, 8, 2, 1);"
                    "INSERT INTO occupancy_devices (occ, idx, run, step, device, kv_pages_used, "
                    "kv_pages_total, running, state_slots_used, state_slots_total, kv_bytes_used, "
                    "kv_bytes_total, state_bytes_used, state_bytes_total) "
                    "VALUES (4, 0, 1, 3, 0, 10, 128, 2, 2, 8, 1000, 12800, 200, 800);"
                    "INSERT INTO requests (run, seq, t_us, v, req_id, device, prompt_tokens, "
                    "output_tokens, arrival_us, ttft_us, tpot_us, e2e_us, finish) "
                    "VALUES (1, 0, 1500, 1, 77, 0, 12, 5, 100, 300, 20, 400, 'eos');"),
            "");
}

TEST(StoreSchema, V2FileGainsPrefixCacheColumnsAndRequestSnapshots) {
  TempDir dir;
  std::string path = dir.File("v2.db");
  MakeV2Store(path);
  EXPECT_THAT(Reader::Open(path),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("schema v2")));
  {
    Result<std::unique_ptr<Writer>> w = Writer::Open(path);
    ASSERT_THAT(w, IsOk());
    for (const auto& m : SampleRun("v3run")) (*w)->Enqueue(m);
  }
  EXPECT_EQ(SqlText(path, "PRAGMA user_version"), std::to_string(kSchemaVersion));
  EXPECT_EQ(SqlText(path, "PRAGMA integrity_check"), "ok");
  EXPECT_EQ(SqlText(path, "SELECT typeof(cache_hit_rate) FROM occupancy_devices WHERE occ = 4"),
            "real");

  Result<std::unique_ptr<Reader>> r = Reader::Open(path);
  ASSERT_THAT(r, IsOk());
  Result<std::vector<tel::Message>> old = (*r)->Messages("v2run", 0, 100000);
  ASSERT_THAT(old, IsOk());
  ASSERT_EQ(old->size(), 2u);
  const auto& occ = std::get<tel::Occupancy>((*old)[0]);
  ASSERT_EQ(occ.devices.size(), 1u);
  const tel::DeviceOccupancy& d = occ.devices[0];
  EXPECT_EQ(d.kv_pages_used, 10);
  EXPECT_EQ(d.state_bytes_total, 800);
  EXPECT_EQ(d.cache_tokens, 0);
  EXPECT_EQ(d.cache_nodes, 0);
  EXPECT_EQ(d.cache_slots, 0);
  EXPECT_EQ(d.cache_hit_rate, 0.0);
  EXPECT_EQ(d.cache_evicted_pages, 0);
  const auto& done = std::get<tel::RequestDone>((*old)[1]);
  EXPECT_EQ(done.id, 77);
  EXPECT_EQ(done.finish, "eos");
  EXPECT_EQ(done.cached_tokens, 0);
  EXPECT_EQ(done.preemptions, 0);
  // What the migrated rows replay as still decodes on the wire.
  for (const auto& m : *old) {
    tel::WireMessage w = tel::Encode(m);
    EXPECT_THAT(tel::Decode(w.topic, w.body), IsOk()) << w.topic;
  }

  // A run written after the migration keeps every new field and message.
  Result<std::vector<tel::Message>> fresh = (*r)->Messages("v3run", 0, 100000);
  ASSERT_THAT(fresh, IsOk());
  ExpectSameMessages(*fresh, ReplayOrder(SampleRun("v3run")));
}

// A file as a v3 build left it: one run with an `experts` message from an
// engine before EPLB (counts and expert_device, no placement).
void MakeV3Store(const std::string& path) {
  std::string sql;
  for (int v = 1; v <= 3; ++v) {
    sql += std::string(MigrationSql(v)) + "; PRAGMA user_version = " + std::to_string(v) + ";";
  }
  ASSERT_EQ(SqlExec(path, sql), "");
  const std::string counts = EncodeRows({{4, 0, 7, 1}, {2, 2, 2, 2}});
  const std::string devices = EncodeRows({{0, 0, 1, 1}});
  auto hex = [](const std::string& b) {
    static const char* kDigits = "0123456789abcdef";
    std::string out = "x'";
    for (unsigned char c : b) {
      out += kDigits[c >> 4];
      out += kDigits[c & 15];
    }
    return out + "'";
  };
  ASSERT_EQ(SqlExec(path,
                    "INSERT INTO runs (rid, id, status, created_unix_ms) "
                    "VALUES (1, 'v3run', 1, 1700000000000);"
                    "INSERT INTO expert_load (id, run, seq, t_us, v, step, layers, experts, "
                    "counts, expert_device) VALUES (5, 1, 0, 1000, 1, 3, 2, 4, " +
                        hex(counts) + ", " + hex(devices) + ");"),
            "");
}

TEST(StoreSchema, V3FileGainsExpertPlacementColumns) {
  TempDir dir;
  std::string path = dir.File("v3.db");
  MakeV3Store(path);
  EXPECT_THAT(Reader::Open(path),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("schema v3")));
  {
    Result<std::unique_ptr<Writer>> w = Writer::Open(path);
    ASSERT_THAT(w, IsOk());
    for (const auto& m : SampleRun("v4run")) (*w)->Enqueue(m);
  }
  EXPECT_EQ(SqlText(path, "PRAGMA user_version"), std::to_string(kSchemaVersion));
  EXPECT_EQ(SqlText(path, "PRAGMA integrity_check"), "ok");
  // The old row got the defaults: no slots, zero-row blobs, an empty array.
  EXPECT_EQ(SqlText(path,
                    "SELECT slots || ' ' || hex(phy2log) || ' ' || hex(slot_device) || ' ' || "
                    "balancedness FROM expert_load WHERE id = 5"),
            "0 00 00 []");

  Result<std::unique_ptr<Reader>> r = Reader::Open(path);
  ASSERT_THAT(r, IsOk());
  Result<std::vector<tel::Message>> old = (*r)->Messages("v3run", 0, 100000);
  ASSERT_THAT(old, IsOk());
  ASSERT_EQ(old->size(), 1u);
  const auto& load = std::get<tel::ExpertLoad>((*old)[0]);
  EXPECT_EQ(load.step, 3);
  EXPECT_EQ(load.counts, (std::vector<std::vector<int64_t>>{{4, 0, 7, 1}, {2, 2, 2, 2}}));
  EXPECT_EQ(load.expert_device, (std::vector<int>{0, 0, 1, 1}));
  EXPECT_TRUE(load.phy2log.empty());
  EXPECT_TRUE(load.slot_device.empty());
  EXPECT_TRUE(load.balancedness.empty());
  tel::WireMessage wire = tel::Encode(load);
  EXPECT_THAT(tel::Decode(wire.topic, wire.body), IsOk());

  // Written after the migration: the placement and balancedness come back
  // exactly (steps 1 and 2 carry them, step 0 does not).
  Result<std::vector<tel::Message>> fresh = (*r)->Messages("v4run", 0, 100000);
  ASSERT_THAT(fresh, IsOk());
  ExpectSameMessages(*fresh, ReplayOrder(SampleRun("v4run")));
  int with_placement = 0;
  for (const auto& m : *fresh) {
    const auto* el = std::get_if<tel::ExpertLoad>(&m);
    if (el == nullptr || el->phy2log.empty()) continue;
    ++with_placement;
    EXPECT_EQ(el->phy2log[1], (std::vector<int>{3, 2, 1, 0, 1, 1}));
    EXPECT_EQ(el->slot_device, (std::vector<int>{0, 0, 0, 1, 1, 1}));
    EXPECT_EQ(el->balancedness[0], 1.0 / 3 + static_cast<double>(el->step));
  }
  EXPECT_EQ(with_placement, 2);
  EXPECT_EQ(SqlText(path, "SELECT max(slots) FROM expert_load"), "6");
}

TEST(StoreSchema, CorruptPlacementIsDataLoss) {
  TempDir dir;
  std::string path = dir.File("runs.db");
  {
    Result<std::unique_ptr<Writer>> w = Writer::Open(path);
    ASSERT_THAT(w, IsOk());
    for (const auto& m : SampleRun("c")) (*w)->Enqueue(m);
  }
  Result<std::unique_ptr<Reader>> r = Reader::Open(path);
  ASSERT_THAT(r, IsOk());
  const std::string last = "(SELECT max(id) FROM expert_load)";
  ASSERT_EQ(SqlText(path, "UPDATE expert_load SET balancedness = '{}' WHERE id = " + last), "");
  EXPECT_THAT((*r)->Messages("c", 0, 100000),
              StatusIs(StatusCode::kDataLoss, HasSubstr("balancedness is not a JSON array")));
  ASSERT_EQ(SqlText(path, "UPDATE expert_load SET balancedness = '[1, \"x\"]' WHERE id = " + last),
            "");
  EXPECT_THAT((*r)->Messages("c", 0, 100000),
              StatusIs(StatusCode::kDataLoss, HasSubstr("non-number")));
  ASSERT_EQ(SqlText(path,
                    "UPDATE expert_load SET balancedness = '[]', phy2log = x'0102' WHERE "
                    "id = " +
                        last),
            "");
  EXPECT_THAT((*r)->Messages("c", 0, 100000),
              StatusIs(StatusCode::kDataLoss, HasSubstr("bad phy2log blob")));
  // Two rows of slot devices: the message has one list.
  ASSERT_EQ(SqlText(path,
                    "UPDATE expert_load SET phy2log = x'00', slot_device = x'0201000100' "
                    "WHERE id = " +
                        last),
            "");
  EXPECT_THAT((*r)->Messages("c", 0, 100000),
              StatusIs(StatusCode::kDataLoss, HasSubstr("bad slot_device blob")));
}

TEST(StoreSchema, RowsCodecRoundTripsAndRejectsTruncation) {
  std::vector<std::vector<int64_t>> rows = {
      {}, {0, 1, -1, 127, 128, -129}, {INT64_MAX, INT64_MIN}, {42}};
  std::string blob = EncodeRows(rows);
  Result<std::vector<std::vector<int64_t>>> back = DecodeRows(blob);
  ASSERT_THAT(back, IsOk());
  EXPECT_EQ(*back, rows);
  for (size_t cut = 0; cut < blob.size(); ++cut) {
    EXPECT_THAT(DecodeRows(blob.substr(0, cut)), StatusIs(StatusCode::kDataLoss)) << cut;
  }
  EXPECT_THAT(DecodeRows(blob + "x"), StatusIs(StatusCode::kDataLoss));
  // A huge claimed row count must not allocate.
  EXPECT_THAT(DecodeRows(std::string("\xff\xff\xff\xff\xff\xff\xff\xff\x7f", 9)),
              StatusIs(StatusCode::kDataLoss));
}

}  // namespace
}  // namespace sy::store
