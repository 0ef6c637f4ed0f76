// File: store/paths.h
//
// Where the run store lives by default (the console records there and
// moe-store reads it), and making sure the folder
// exists: $XDG_DATA_HOME/switchyard/runs.db, else
// $HOME/.local/share/switchyard/runs.db.
#pragma once

#include <string>

#include "base/status.h"

namespace sy::store {

// FAILED_PRECONDITION when neither XDG_DATA_HOME nor HOME is set.
Result<std::string> DefaultDbPath();
// Creates the parent folders of `path`. UNAVAILABLE (with the OS reason and
// the folder) when they cannot be created or are not folders.
Status EnsureParentDir(const std::string& path);

}  // namespace sy::store
