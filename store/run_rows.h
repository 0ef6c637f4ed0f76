// File: store/run_rows.h
//
// The runs table as RunInfo reads it: one column list and one row decoder,
// shared by store::Reader (reader.cc) and moe-store (store/tool), so the two
// never disagree on what a run is. Private to store/.
//
// Thread-safety: a constant and a pure function.
#pragma once

#include <string_view>

#include "store/sqlite.h"
#include "store/store.h"

namespace sy::store {

// Columns 0..14 and 16 are RunInfo's (RunFromRow), 15 the row id; append a
// WHERE / ORDER BY clause.
inline constexpr std::string_view kRunColumns =
    "SELECT id, started_unix_ms, last_t_us, status, model, devices, n_steps, n_requests, "
    "n_spans, created_unix_ms, ifnull(ended_unix_ms, 0), store_dropped, engine_dropped, arch, "
    "state_slots_per_device, rid, ifnull(session_id, 0) FROM runs ";

// RunInfo from a row of kRunColumns.
RunInfo RunFromRow(const Stmt& st);

}  // namespace sy::store
