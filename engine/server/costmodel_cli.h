// File: engine/server/costmodel_cli.h
//
// `moe-engine costmodel`: the analytic cost model (engine/costmodel/) on the
// command line: one step's per-kernel breakdown, or the TP <-> EP reshard.
//
//   moe-engine costmodel --hardware tpu-v7x --model ling-2.6-1t --phase prefill
//       --tokens 16384 --ep 32 --dtype fp8 [--bts 160] [--json]
//   moe-engine costmodel --hardware h200 --model qwen3-235b-a22b --phase switch --devices 8
//
// --model takes a catalogue name or a path to an HF config.json (or its
// directory); --catalog DIR replaces the source tree's data/ directory.
// Text output is a table (one row per kernel, per device and per layer, with
// the layers it runs in and its total over the step); --json prints one JSON
// object instead (docs/COSTMODEL.md lists its fields).
// Exit codes: 0 ok; 2 bad usage, unknown hardware/model (the message lists
// the known names), a bad catalogue file or an invalid combination of flags;
// 1 any other failure.
//
// Thread-safety: no shared state.
#pragma once

#include <ostream>

namespace sy::engine {

// argv[0] is the program name, then the flags. Writes the result (or --help)
// to `out` and errors to `err`; returns the exit code.
int RunCostModel(int argc, const char* const* argv, std::ostream& out, std::ostream& err);
// RunCostModel on std::cout / std::cerr.
int CostModelMain(int argc, char** argv);

}  // namespace sy::engine
