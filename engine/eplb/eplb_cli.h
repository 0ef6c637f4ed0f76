// File: engine/eplb/eplb_cli.h
//
// `moe-engine eplb`: compute an EPLB placement offline from a JSON load
// matrix, so placements can be checked and compared without an engine.
//
//   moe-engine eplb --stats load.json --replicas 16 --groups 4 --nodes 2 --devices 8
//       [--policy auto|hierarchical|global]
//
// Input:  {"load": [[w per logical expert] per layer]}, w >= 0 (token counts
//         or any weight; integers or floats). Other top-level keys are ignored,
//         so a file written by `expert-stats dump` can carry more.
// Output: one line of JSON on stdout,
//         {"policy": "hierarchical", "phy2log": [[...N] per layer],
//          "log2phy": [[[...max replicas] per expert] per layer],
//          "logcnt": [[...E] per layer], "balancedness": [... per layer]}
//         (engine/eplb/placement.h defines each field; slots are device-major).
// Exit codes: 0 ok, 2 bad usage or bad input (the message on stderr names the
// flag or the file and what is wrong).
//
// The lead wires EplbMain into engine/server/main.cc; the other functions are
// the pieces, callable from tests and tools. Thread-safety: no shared state.
#pragma once

#include <ostream>
#include <string>
#include <string_view>

#include "base/status.h"
#include "engine/eplb/placement.h"

namespace sy::engine {

// Parses the input format above. INVALID_ARGUMENT naming `source` (e.g. the
// file name) and the offending element: not JSON, no "load" array, a row that
// is not an array, a value that is not a number, a negative value, a ragged
// or empty matrix.
Result<EplbLoad> ParseEplbLoadJson(std::string_view text, std::string_view source);
// Reads and parses a file; NOT_FOUND when it cannot be opened.
Result<EplbLoad> ReadEplbLoadFile(const std::string& path);

// The output format above, on one line (no trailing newline).
std::string EplbPlacementJson(const EplbPlacement& placement);

// The whole command: argv[0] is the program name, then the flags. Writes the
// placement (or --help) to `out` and errors to `err`; returns the exit code.
int RunEplb(int argc, const char* const* argv, std::ostream& out, std::ostream& err);
// RunEplb on std::cout / std::cerr.
int EplbMain(int argc, char** argv);

}  // namespace sy::engine
