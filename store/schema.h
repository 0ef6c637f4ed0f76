// File: store/schema.h
//
// The on-disk schema of a Switchyard store (docs/STORE.md is the prose
// version): the on-disk enum values, the ordered list of migrations, and the
// checks that tell our file apart from garbage, foreign SQLite files and files
// written by a newer build.
//
// Internal to store/. Thread-safety: functions over a Db the caller owns.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "store/sqlite.h"

namespace sy::store {

// runs.status. On-disk values: never renumber, only append.
enum class RunStatus : int {
  kLive = 0,
  kEnded = 1,
  kAbnormal = 2,
  kInterrupted = 3,
};
std::string_view RunStatusName(int64_t on_disk);

// store_info['app'] of every Switchyard store; tells our files from others.
inline constexpr std::string_view kStoreApp = "switchyard-store";

// Reads PRAGMA user_version and the store_info marker.
//   DATA_LOSS  "<path> is not a SQLite database" for garbage,
//   DATA_LOSS  "<path>: not a Switchyard store" for a SQLite file with other tables,
//   FAILED_PRECONDITION for a version newer than kSchemaVersion.
// Returns the file's version; 0 means an empty SQLite file (no tables), which
// a Writer may migrate and a Reader must refuse.
Result<int> CheckStore(Db& db);

// Applies every migration after the file's version, in order, in one
// IMMEDIATE transaction (so two openers cannot both migrate).
// REQUIRES: CheckStore(db) succeeded; db opened read-write.
Status Migrate(Db& db);

// The SQL of the migration to `to_version` (1..kSchemaVersion), "" for any
// other. For tests that build a file as an older build left it.
std::string_view MigrationSql(int to_version);

// Zig-zag LEB128 encoding of int64 rows, used for expert_load.counts,
// expert_device, phy2log and slot_device: varint(rows) then per row varint(n) and n
// zig-zag varints. See docs/STORE.md "expert_load".
std::string EncodeRows(const std::vector<std::vector<int64_t>>& rows);
// DATA_LOSS on a truncated or overlong blob.
Result<std::vector<std::vector<int64_t>>> DecodeRows(std::string_view blob);

}  // namespace sy::store
