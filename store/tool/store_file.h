// File: store/tool/store_file.h
//
// Opening a Switchyard store for moe-store: the same checks as
// store::Reader::Open (docs/STORE.md "What opening finds"), read-only for the
// commands that only look (list, show, export, check) and read-write, under
// the Writer's own file lock, for the ones that change the file (prune,
// vacuum). Holding that lock means no console records into the file while it
// is pruned or vacuumed, and none can start until the tool is done.
//
//   ASSIGN_OR_RETURN(StoreFile f, StoreFile::Open(path, StoreFile::kWrite));
//   RETURN_IF_ERROR(f.db().Exec("BEGIN IMMEDIATE"));
//
// Thread-safety: one owner, one thread.
#pragma once

#include <string>

#include "base/status.h"
#include "store/sqlite.h"

namespace sy::store::tool {

class StoreFile {
 public:
  enum Mode { kRead, kWrite };

  // NOT_FOUND "no store at <path>" when the file does not exist;
  // DATA_LOSS when it is not a SQLite file or not a Switchyard store (an
  // empty database included); FAILED_PRECONDITION for a schema other than
  // this build's (newer: upgrade; older: open it once with a Writer, e.g. the
  // console, to migrate) and, for kWrite, while a Writer has the file open.
  // The file is never modified by opening it.
  static Result<StoreFile> Open(const std::string& path, Mode mode);

  StoreFile(StoreFile&& o) noexcept;
  StoreFile& operator=(StoreFile&&) = delete;
  StoreFile(const StoreFile&) = delete;
  StoreFile& operator=(const StoreFile&) = delete;
  ~StoreFile();

  Db& db() { return db_; }
  const std::string& path() const { return db_.path(); }

 private:
  StoreFile() = default;

  // flock descriptor (kWrite), -1 otherwise. Closed only after db_ closes:
  // closing any descriptor of a file drops the process's POSIX locks on it,
  // SQLite's included, so the order of the two matters (see ~StoreFile).
  int lock_fd_ = -1;
  Db db_;
};

}  // namespace sy::store::tool
