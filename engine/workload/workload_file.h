// File: engine/workload/workload_file.h
//
// Workload traces as JSONL files: one request per line, replayed exactly by
// the `file` scenario, and written from any generated schedule so a run can be
// saved and replayed identically. docs/WORKLOADS.md documents the format:
//
//   {"arrival_s": 0.25, "prompt": "Hello", "output_len": 32}
//   {"arrival_s": 0.5, "prompt_tokens": [256, 72, 105], "output_len": 8,
//    "temperature": 0.7, "ignore_eos": true, "seed": 42}
//
// arrival_s: seconds from the start (>= 0, non-decreasing); exactly one of
// prompt (text, encoded with BOS by the workload's tokenizer at replay) and
// prompt_tokens (ids, used as they are); output_len >= 1; temperature,
// ignore_eos and seed optional (the workload's defaults, and a seed drawn
// from its stream, otherwise). Blank lines are skipped; other keys are
// errors, so a misspelt field does not pass silently.
//
//   WorkloadOptions o;
//   RETURN_IF_ERROR(LoadWorkloadFile("trace.jsonl", &o));   // kind = kFile
//   RETURN_IF_ERROR(WriteWorkloadFile(WorkloadGenerator(o).Schedule(), "copy.jsonl"));
//
// Thread-safety: free functions on values; no shared state.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "engine/workload/workload.h"

namespace sy::engine {

// The entries of `path`, in file order. NOT_FOUND when it cannot be opened;
// INVALID_ARGUMENT "PATH:LINE: FIELD: what is wrong" for a bad line, and for a
// file without a single request.
Result<std::vector<TraceEntry>> ReadWorkloadFile(const std::string& path);

// Reads `path` into `options`: kind = kFile, file = path, trace = its entries.
// The other options stay (tokenizer, temperature and ignore_eos defaults,
// limits, seed). Errors as ReadWorkloadFile; `options` is unchanged on error.
Status LoadWorkloadFile(const std::string& path, WorkloadOptions* options);

// Writes `arrivals` in the prompt_tokens form with every field spelled out,
// so reading it back replays the same requests (times, tokens, lengths,
// temperature, ignore_eos, seed) exactly. INVALID_ARGUMENT when an arrival
// could not be read back (times decreasing or negative, an empty prompt,
// max_new_tokens < 1); UNAVAILABLE when the file cannot be written.
Status WriteWorkloadFile(const std::vector<Arrival>& arrivals, const std::string& path);

}  // namespace sy::engine
