// File: store/paths.h
//
// Where the run store lives by default (the console records there and
// replays from it, moe-store reads it), and making sure the folder exists:
// $SWITCHYARD_DB, else $XDG_DATA_HOME/switchyard/runs.db, else
// $HOME/.local/share/switchyard/runs.db. Both programs resolve it here, so
// an operator who sets SWITCHYARD_DB (as scripts/run honours it) finds the
// console and moe-store on the same file.
#pragma once

#include <string>

#include "base/status.h"

namespace sy::store {

// FAILED_PRECONDITION when none of SWITCHYARD_DB, XDG_DATA_HOME (absolute)
// and HOME is set.
Result<std::string> DefaultDbPath();
// Creates the parent folders of `path`. UNAVAILABLE (with the OS reason and
// the folder) when they cannot be created or are not folders.
Status EnsureParentDir(const std::string& path);

}  // namespace sy::store
