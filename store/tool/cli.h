// File: store/tool/cli.h
//
// The moe-store command line (docs/STORE.md "moe-store"):
//
//   moe-store [--db FILE] list
//   moe-store [--db FILE] show ID [--events N]
//   moe-store [--db FILE] export ID [--format chrome-trace] [--from S] [--to S] [--out FILE]
//   moe-store [--db FILE] prune --keep N
//   moe-store [--db FILE] vacuum
//   moe-store [--db FILE] check
//
// Exit codes: 0 success; 2 the request cannot be served as given (bad flags,
// no store at the path, unknown run id, unknown format, --from after --to),
// and nothing was changed or written; 1 anything else (check found damage,
// the file is corrupt, locked by a recording console, I/O errors).
//
// Thread-safety: RunCli touches no global state; the streams are the caller's.
#pragma once

#include <functional>
#include <ostream>
#include <string>

#include "base/status.h"

namespace sy::store::tool {

// The store used without --db. main.cc resolves it like the console does.
using DefaultDb = std::function<Result<std::string>()>;

// Runs one moe-store command. Results go to `out` (export without --out
// streams the JSON there), messages "moe-store: ..." to `err`.
int RunCli(int argc, const char* const* argv, std::ostream& out, std::ostream& err,
           const DefaultDb& default_db);

}  // namespace sy::store::tool
