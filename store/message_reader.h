// File: store/message_reader.h
//
// Rebuilds the telemetry::Message values a run's rows came from, for
// store::Reader::Messages (docs/STORE.md section 5).
//
// Internal to store/. Thread-safety: functions over a Db the caller owns and
// uses from one thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "store/sqlite.h"
#include "telemetry/protocol.h"

namespace sy::store {

// Every stored message of run `run` (row id `rid`) with from_us <= t < to_us,
// ordered by (t, topic order = Message alternative index, seq, arrival).
// DATA_LOSS naming the table and row id for a row that cannot become its
// message. REQUIRES: the caller holds a read transaction, so every table is
// read from one snapshot. Without `with_spans` the spans tables are not read.
Result<std::vector<telemetry::Message>> ReadMessages(Db& db, const std::string& run, int64_t rid,
                                                     int64_t from_us, int64_t to_us,
                                                     bool with_spans = true);

// telemetry::FromJson of stored JSON (`where` names its column); DATA_LOSS
// when it is not JSON or not a valid message.
Result<telemetry::Message> ParseStored(const Db& db, std::string_view topic,
                                       const nlohmann::json& j, std::string_view where);

}  // namespace sy::store
