#include "store/schema.h"

#include "store/store.h"

namespace sy::store {
namespace {

// v0 -> v1: everything. Columns and units are documented in docs/STORE.md;
// t_us is always engine time (microseconds since the run started), *_unix_ms
// is wall clock. Every message table carries the envelope (run, seq, t_us, v)
// so replay rebuilds the message exactly as received.
constexpr std::string_view kV1 = R"sql(
CREATE TABLE store_info (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
INSERT INTO store_info VALUES ('app', 'switchyard-store');
INSERT INTO store_info VALUES ('created_unix_ms',
                               CAST(strftime('%s', 'now') AS INTEGER) * 1000);

CREATE TABLE runs (
  rid INTEGER PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  status INTEGER NOT NULL DEFAULT 0,
  started_unix_ms INTEGER NOT NULL DEFAULT 0,
  last_t_us INTEGER NOT NULL DEFAULT 0,
  model TEXT NOT NULL DEFAULT '',
  devices INTEGER NOT NULL DEFAULT 0,
  meta_json TEXT,
  created_unix_ms INTEGER NOT NULL,
  ended_unix_ms INTEGER,
  n_steps INTEGER NOT NULL DEFAULT 0,
  n_requests INTEGER NOT NULL DEFAULT 0,
  n_spans INTEGER NOT NULL DEFAULT 0,
  store_dropped INTEGER NOT NULL DEFAULT 0,
  engine_sent INTEGER NOT NULL DEFAULT 0,
  engine_dropped INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE names (id INTEGER PRIMARY KEY, s TEXT NOT NULL UNIQUE);

CREATE TABLE metas (
  id INTEGER PRIMARY KEY, run INTEGER NOT NULL, seq INTEGER NOT NULL,
  t_us INTEGER NOT NULL, v INTEGER NOT NULL,
  body TEXT NOT NULL
);
CREATE INDEX metas_run_t ON metas (run, t_us);

CREATE TABLE steps (
  id INTEGER PRIMARY KEY, run INTEGER NOT NULL, seq INTEGER NOT NULL,
  t_us INTEGER NOT NULL, v INTEGER NOT NULL,
  step INTEGER NOT NULL, start_us INTEGER NOT NULL, dur_us INTEGER NOT NULL,
  prefill_tokens INTEGER NOT NULL, decode_tokens INTEGER NOT NULL,
  batch_requests INTEGER NOT NULL, running INTEGER NOT NULL, waiting INTEGER NOT NULL,
  finished_total INTEGER NOT NULL, generated_total INTEGER NOT NULL
);
CREATE INDEX steps_run_t ON steps (run, t_us);

CREATE TABLE span_batches (
  id INTEGER PRIMARY KEY, run INTEGER NOT NULL, seq INTEGER NOT NULL,
  t_us INTEGER NOT NULL, v INTEGER NOT NULL,
  step INTEGER NOT NULL, n INTEGER NOT NULL
);
CREATE INDEX span_batches_run_t ON span_batches (run, t_us);

CREATE TABLE spans (
  batch INTEGER NOT NULL, idx INTEGER NOT NULL,
  run INTEGER NOT NULL, step INTEGER NOT NULL, t_us INTEGER NOT NULL,
  device INTEGER NOT NULL, layer INTEGER NOT NULL,
  name INTEGER NOT NULL, kind INTEGER NOT NULL,
  start_us INTEGER NOT NULL, dur_us INTEGER NOT NULL,
  tokens INTEGER NOT NULL, flops INTEGER NOT NULL, bytes INTEGER NOT NULL,
  PRIMARY KEY (batch, idx)
) WITHOUT ROWID;

CREATE TABLE kstat_batches (
  id INTEGER PRIMARY KEY, run INTEGER NOT NULL, seq INTEGER NOT NULL,
  t_us INTEGER NOT NULL, v INTEGER NOT NULL,
  step INTEGER NOT NULL, n INTEGER NOT NULL
);
CREATE INDEX kstat_batches_run_t ON kstat_batches (run, t_us);

CREATE TABLE kernel_stats (
  batch INTEGER NOT NULL, idx INTEGER NOT NULL,
  run INTEGER NOT NULL, step INTEGER NOT NULL, t_us INTEGER NOT NULL,
  device INTEGER NOT NULL, name INTEGER NOT NULL, kind INTEGER NOT NULL,
  count INTEGER NOT NULL, total_us INTEGER NOT NULL, max_us INTEGER NOT NULL,
  flops INTEGER NOT NULL, bytes INTEGER NOT NULL,
  PRIMARY KEY (batch, idx)
) WITHOUT ROWID;

CREATE TABLE occupancy (
  id INTEGER PRIMARY KEY, run INTEGER NOT NULL, seq INTEGER NOT NULL,
  t_us INTEGER NOT NULL, v INTEGER NOT NULL,
  step INTEGER NOT NULL, running INTEGER NOT NULL, waiting INTEGER NOT NULL,
  prefill_tokens INTEGER NOT NULL, decode_tokens INTEGER NOT NULL, n INTEGER NOT NULL
);
CREATE INDEX occupancy_run_t ON occupancy (run, t_us);

CREATE TABLE occupancy_devices (
  occ INTEGER NOT NULL, idx INTEGER NOT NULL,
  run INTEGER NOT NULL, step INTEGER NOT NULL,
  device INTEGER NOT NULL, kv_pages_used INTEGER NOT NULL,
  kv_pages_total INTEGER NOT NULL, running INTEGER NOT NULL,
  PRIMARY KEY (occ, idx)
) WITHOUT ROWID;

CREATE TABLE expert_load (
  id INTEGER PRIMARY KEY, run INTEGER NOT NULL, seq INTEGER NOT NULL,
  t_us INTEGER NOT NULL, v INTEGER NOT NULL,
  step INTEGER NOT NULL, layers INTEGER NOT NULL, experts INTEGER NOT NULL,
  counts BLOB NOT NULL, expert_device BLOB NOT NULL
);
CREATE INDEX expert_load_run_t ON expert_load (run, t_us);

CREATE TABLE requests (
  id INTEGER PRIMARY KEY, run INTEGER NOT NULL, seq INTEGER NOT NULL,
  t_us INTEGER NOT NULL, v INTEGER NOT NULL,
  req_id INTEGER NOT NULL, device INTEGER NOT NULL,
  prompt_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL,
  arrival_us INTEGER NOT NULL, ttft_us INTEGER NOT NULL, tpot_us INTEGER NOT NULL,
  e2e_us INTEGER NOT NULL, finish TEXT NOT NULL
);
CREATE INDEX requests_run_t ON requests (run, t_us);

CREATE TABLE events (
  id INTEGER PRIMARY KEY, run INTEGER NOT NULL, seq INTEGER NOT NULL,
  t_us INTEGER NOT NULL, v INTEGER NOT NULL,
  kind TEXT NOT NULL, name TEXT NOT NULL, phase TEXT NOT NULL, message TEXT NOT NULL,
  detail TEXT NOT NULL
);
CREATE INDEX events_run_t ON events (run, t_us);

CREATE TABLE heartbeats (
  id INTEGER PRIMARY KEY, run INTEGER NOT NULL, seq INTEGER NOT NULL,
  t_us INTEGER NOT NULL, v INTEGER NOT NULL,
  interval_ms INTEGER NOT NULL, state TEXT NOT NULL,
  sent_total INTEGER NOT NULL, dropped_total INTEGER NOT NULL,
  dropped TEXT NOT NULL, step INTEGER NOT NULL
);
CREATE INDEX heartbeats_run_t ON heartbeats (run, t_us);

CREATE TABLE commands (
  id INTEGER PRIMARY KEY, run INTEGER,
  t_us INTEGER NOT NULL, unix_ms INTEGER NOT NULL,
  text TEXT NOT NULL, request TEXT NOT NULL, ok INTEGER NOT NULL, reply TEXT NOT NULL
);
CREATE INDEX commands_run ON commands (run, id);

CREATE VIEW spans_v AS
  SELECT r.id AS run_id, s.step, s.t_us, s.device, s.layer, n.s AS name, k.s AS kind,
         s.start_us, s.dur_us, s.tokens, s.flops, s.bytes
  FROM spans s JOIN runs r ON r.rid = s.run
       JOIN names n ON n.id = s.name JOIN names k ON k.id = s.kind;

CREATE VIEW kernel_stats_v AS
  SELECT r.id AS run_id, s.step, s.t_us, s.device, n.s AS name, k.s AS kind,
         s.count, s.total_us, s.max_us, s.flops, s.bytes
  FROM kernel_stats s JOIN runs r ON r.rid = s.run
       JOIN names n ON n.id = s.name JOIN names k ON k.id = s.kind;
)sql";

// v1 -> v2: hybrid memory pools (docs/STORE.md "v2"). Each device now
// reports its recurrent-state pool beside the KV pool, with byte counts for
// both; Meta gained model.arch, model.attention and state_slots_per_device.
// Rows written before had neither a state pool nor a hybrid model, so the
// new columns are 0 and stored Meta JSON (metas.body, runs.meta_json) gets
// arch "moe", one "mha" per layer and 0 slots: exactly what a v1 engine
// would have sent under the v2 protocol, so the Reader stays strict.
// "mha" x n is spelled with replace(hex(zeroblob(n))): n "00" pairs become n
// ',"mha"', without a recursive query per row.
constexpr std::string_view kV2 = R"sql(
ALTER TABLE occupancy_devices ADD COLUMN state_slots_used INTEGER NOT NULL DEFAULT 0;
ALTER TABLE occupancy_devices ADD COLUMN state_slots_total INTEGER NOT NULL DEFAULT 0;
ALTER TABLE occupancy_devices ADD COLUMN kv_bytes_used INTEGER NOT NULL DEFAULT 0;
ALTER TABLE occupancy_devices ADD COLUMN kv_bytes_total INTEGER NOT NULL DEFAULT 0;
ALTER TABLE occupancy_devices ADD COLUMN state_bytes_used INTEGER NOT NULL DEFAULT 0;
ALTER TABLE occupancy_devices ADD COLUMN state_bytes_total INTEGER NOT NULL DEFAULT 0;

ALTER TABLE runs ADD COLUMN arch TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN state_slots_per_device INTEGER NOT NULL DEFAULT 0;

UPDATE metas SET body = json_set(body,
    '$.model.arch', 'moe',
    '$.model.attention',
    json('[' || substr(replace(hex(zeroblob(
        min(max(ifnull(json_extract(body, '$.model.layers'), 0), 0), 100000))),
        '00', ',"mha"'), 2) || ']'),
    '$.state_slots_per_device', 0)
  WHERE json_valid(body) AND json_type(body, '$.model') = 'object'
    AND json_type(body, '$.model.arch') IS NULL;

UPDATE runs SET meta_json = json_set(meta_json,
    '$.model.arch', 'moe',
    '$.model.attention',
    json('[' || substr(replace(hex(zeroblob(
        min(max(ifnull(json_extract(meta_json, '$.model.layers'), 0), 0), 100000))),
        '00', ',"mha"'), 2) || ']'),
    '$.state_slots_per_device', 0)
  WHERE meta_json IS NOT NULL AND json_valid(meta_json)
    AND json_type(meta_json, '$.model') = 'object'
    AND json_type(meta_json, '$.model.arch') IS NULL;
UPDATE runs SET arch = 'moe' WHERE meta_json IS NOT NULL;
)sql";

// v2 -> v3: prefix cache and request-level visibility (docs/STORE.md "v3").
// Each device reports its radix prefix cache beside its pools; a finished
// request says how much of its prompt came from the cache and how often it
// was retracted; the new `requests` stream (running and waiting requests,
// every ~200 ms) gets a parent/children pair like occupancy. Older rows had
// no cache and no retractions, so the new columns are 0: exactly what the
// protocol decodes an older engine's messages to.
constexpr std::string_view kV3 = R"sql(
ALTER TABLE occupancy_devices ADD COLUMN cache_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE occupancy_devices ADD COLUMN cache_nodes INTEGER NOT NULL DEFAULT 0;
ALTER TABLE occupancy_devices ADD COLUMN cache_slots INTEGER NOT NULL DEFAULT 0;
ALTER TABLE occupancy_devices ADD COLUMN cache_hit_rate REAL NOT NULL DEFAULT 0;
ALTER TABLE occupancy_devices ADD COLUMN cache_evicted_pages INTEGER NOT NULL DEFAULT 0;

ALTER TABLE requests ADD COLUMN cached_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE requests ADD COLUMN preemptions INTEGER NOT NULL DEFAULT 0;

CREATE TABLE request_snapshots (
  id INTEGER PRIMARY KEY, run INTEGER NOT NULL, seq INTEGER NOT NULL,
  t_us INTEGER NOT NULL, v INTEGER NOT NULL,
  step INTEGER NOT NULL, running_total INTEGER NOT NULL, waiting_total INTEGER NOT NULL,
  n INTEGER NOT NULL
);
CREATE INDEX request_snapshots_run_t ON request_snapshots (run, t_us);

CREATE TABLE request_progress (
  snap INTEGER NOT NULL, idx INTEGER NOT NULL,
  run INTEGER NOT NULL, step INTEGER NOT NULL,
  waiting INTEGER NOT NULL, req_id INTEGER NOT NULL, device INTEGER NOT NULL,
  prompt_tokens INTEGER NOT NULL, computed INTEGER NOT NULL, generated INTEGER NOT NULL,
  max_new_tokens INTEGER NOT NULL, cached_tokens INTEGER NOT NULL,
  preemptions INTEGER NOT NULL, arrival_us INTEGER NOT NULL, first_token_us INTEGER NOT NULL,
  PRIMARY KEY (snap, idx)
) WITHOUT ROWID;
)sql";

// v3 -> v4: expert placement (docs/STORE.md "v4"). An `experts` message may
// carry the live placement (phy2log per layer, slot -> device) and each
// layer's balancedness since EPLB. Rows written before had neither, which is
// what the protocol decodes their absence to: 0 slots, empty blobs (x'00' is
// the rows encoding of zero rows) and an empty JSON array.
constexpr std::string_view kV4 = R"sql(
ALTER TABLE expert_load ADD COLUMN slots INTEGER NOT NULL DEFAULT 0;
ALTER TABLE expert_load ADD COLUMN phy2log BLOB NOT NULL DEFAULT x'00';
ALTER TABLE expert_load ADD COLUMN slot_device BLOB NOT NULL DEFAULT x'00';
ALTER TABLE expert_load ADD COLUMN balancedness TEXT NOT NULL DEFAULT '[]';
)sql";

// v4 -> v5: console sessions (docs/STORE.md "v5"). One console (one
// Writer) may record several engines at once (`moe-console --connect` given
// more than once: data-parallel ranks, a prefill and a decode engine); each
// engine's stream stays its own run, and `sessions` ties the runs of one
// console together. Runs recorded before have no session (NULL), which is
// what they were: no console linked them.
constexpr std::string_view kV5 = R"sql(
CREATE TABLE sessions (
  id INTEGER PRIMARY KEY,
  started_unix_ms INTEGER NOT NULL,
  hosts TEXT NOT NULL DEFAULT ''
);
ALTER TABLE runs ADD COLUMN session_id INTEGER REFERENCES sessions (id);
CREATE INDEX runs_session ON runs (session_id);
)sql";

struct Migration {
  int to_version;
  std::string_view sql;
};

// Applied in order; append v6 here (and bump kSchemaVersion) without touching
// earlier entries: files in the field went through them.
constexpr Migration kMigrations[] = {
    {1, kV1}, {2, kV2}, {3, kV3}, {4, kV4}, {5, kV5},
};
static_assert(std::size(kMigrations) == kSchemaVersion, "one migration per schema version");

}  // namespace

std::string_view MigrationSql(int to_version) {
  for (const Migration& m : kMigrations) {
    if (m.to_version == to_version) return m.sql;
  }
  return {};
}

std::string_view RunStatusName(int64_t on_disk) {
  switch (static_cast<RunStatus>(on_disk)) {
    case RunStatus::kLive:
      return "live";
    case RunStatus::kEnded:
      return "ended";
    case RunStatus::kAbnormal:
      return "abnormal";
    case RunStatus::kInterrupted:
      return "interrupted";
  }
  return "unknown";
}

Result<int> CheckStore(Db& db) {
  const std::string& path = db.path();
  // The first read of page 1 is where SQLite notices a file is not a database.
  Result<int64_t> version = db.QueryInt("PRAGMA user_version", "reading");
  if (!version.ok()) {
    if (version.status().code() == StatusCode::kDataLoss) {
      return DataLoss(path + " is not a SQLite database (" + version.status().message() + ")");
    }
    return version.status();
  }
  ASSIGN_OR_RETURN(int64_t tables, db.QueryInt("SELECT count(*) FROM sqlite_master"));
  if (*version == 0) {
    if (tables == 0) return 0;  // empty: ours to migrate
    return DataLoss(path + ": not a Switchyard store (SQLite file with other tables)");
  }
  ASSIGN_OR_RETURN(int64_t has_info,
                   db.QueryInt("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND "
                               "name = 'store_info'"));
  if (has_info == 0) return DataLoss(path + ": not a Switchyard store (no store_info table)");
  ASSIGN_OR_RETURN(int64_t is_ours,
                   db.QueryInt("SELECT count(*) FROM store_info WHERE key = 'app' AND value = '" +
                               std::string(kStoreApp) + "'"));
  if (is_ours == 0) return DataLoss(path + ": not a Switchyard store (store_info.app differs)");
  if (*version > kSchemaVersion) {
    return FailedPrecondition(path + " has store schema v" + std::to_string(*version) +
                              "; this build understands up to v" + std::to_string(kSchemaVersion) +
                              " (upgrade switchyard)");
  }
  return static_cast<int>(*version);
}

Status Migrate(Db& db) {
  RETURN_IF_ERROR(db.Exec("BEGIN IMMEDIATE", "migrating"));
  auto body = [&]() -> Status {
    // Re-read under the write lock: another process may have migrated since.
    ASSIGN_OR_RETURN(int from, CheckStore(db));
    for (const Migration& m : kMigrations) {
      if (m.to_version <= from) continue;
      RETURN_IF_ERROR(db.Exec(m.sql, "migrating"));
      RETURN_IF_ERROR(
          db.Exec("PRAGMA user_version = " + std::to_string(m.to_version), "migrating"));
    }
    return db.Exec("COMMIT", "migrating");
  };
  Status s = body();
  if (!s.ok()) db.Exec("ROLLBACK").IgnoreError();
  return s;
}

namespace {

void PutVarint(std::string& out, uint64_t x) {
  while (x >= 0x80) {
    out.push_back(static_cast<char>((x & 0x7f) | 0x80));
    x >>= 7;
  }
  out.push_back(static_cast<char>(x));
}

bool GetVarint(std::string_view& in, uint64_t& x) {
  x = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (in.empty()) return false;
    auto b = static_cast<uint8_t>(in.front());
    in.remove_prefix(1);
    x |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

uint64_t ZigZag(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}
int64_t UnZigZag(uint64_t u) { return static_cast<int64_t>(u >> 1) ^ -static_cast<int64_t>(u & 1); }

}  // namespace

std::string EncodeRows(const std::vector<std::vector<int64_t>>& rows) {
  std::string out;
  PutVarint(out, rows.size());
  for (const auto& row : rows) {
    PutVarint(out, row.size());
    for (int64_t v : row) PutVarint(out, ZigZag(v));
  }
  return out;
}

Result<std::vector<std::vector<int64_t>>> DecodeRows(std::string_view blob) {
  std::vector<std::vector<int64_t>> rows;
  uint64_t n = 0;
  // Each element takes at least one byte, so sizes beyond the blob are corrupt
  // (and must not drive a huge allocation).
  if (!GetVarint(blob, n) || n > blob.size()) return DataLoss("bad row count in counts blob");
  rows.resize(n);
  for (auto& row : rows) {
    uint64_t m = 0;
    if (!GetVarint(blob, m) || m > blob.size()) return DataLoss("bad row length in counts blob");
    row.resize(m);
    for (int64_t& v : row) {
      uint64_t u = 0;
      if (!GetVarint(blob, u)) return DataLoss("truncated counts blob");
      v = UnZigZag(u);
    }
  }
  if (!blob.empty()) return DataLoss("trailing bytes in counts blob");
  return rows;
}

}  // namespace sy::store
