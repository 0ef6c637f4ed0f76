// File: store/sqlite.h
//
// Thin RAII wrappers over the SQLite C API for store/: Db owns a sqlite3*,
// Stmt owns a prepared sqlite3_stmt* and is reused (Reset) between rows. Every
// SQLite result code is turned into a Status with the file path and SQLite's
// own message (SqliteStatus), so callers never see raw codes.
//
// Internal to store/; not part of the public store API.
// Thread-safety: a Db and its Stmts are used by one thread at a time.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"

namespace sy::store {

// Maps a SQLite result code to our codes:
//   SQLITE_FULL                  -> RESOURCE_EXHAUSTED "disk full writing <path>: ..."
//   SQLITE_IOERR*, CANTOPEN, BUSY, LOCKED, READONLY, PERM -> UNAVAILABLE
//   SQLITE_NOTADB, SQLITE_CORRUPT -> DATA_LOSS
//   anything else                -> INTERNAL
// `what` says what was being done ("writing", "reading", "opening").
Status SqliteStatus(int rc, sqlite3* db, std::string_view what, const std::string& path);

class Db {
 public:
  // REQUIRES: flags contain SQLITE_OPEN_READONLY or SQLITE_OPEN_READWRITE.
  static Result<Db> Open(const std::string& path, int flags);

  Db() = default;
  Db(Db&& o) noexcept : db_(o.db_), path_(std::move(o.path_)) { o.db_ = nullptr; }
  Db& operator=(Db&& o) noexcept;
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;
  ~Db();

  sqlite3* get() const { return db_; }
  const std::string& path() const { return path_; }

  // Runs one or more statements that return no rows we need.
  Status Exec(std::string_view sql, std::string_view what = "writing");
  // First column of the first row of `sql` as an integer (e.g. a PRAGMA).
  Result<int64_t> QueryInt(const std::string& sql, std::string_view what = "reading");
  Result<std::string> QueryText(const std::string& sql, std::string_view what = "reading");
  Status Error(int rc, std::string_view what) const { return SqliteStatus(rc, db_, what, path_); }

 private:
  sqlite3* db_ = nullptr;
  std::string path_;
};

class Stmt {
 public:
  static Result<Stmt> Prepare(const Db& db, std::string_view sql);

  Stmt() = default;
  Stmt(Stmt&& o) noexcept : db_(o.db_), stmt_(o.stmt_) { o.stmt_ = nullptr; }
  Stmt& operator=(Stmt&& o) noexcept;
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  ~Stmt();

  // Parameters are 1-based, as in SQLite. Text and blobs are copied
  // (SQLITE_TRANSIENT) so the caller's buffers may die before Step().
  Stmt& Bind(int i, int64_t v);
  Stmt& Bind(int i, int v) { return Bind(i, static_cast<int64_t>(v)); }
  Stmt& Bind(int i, double v);  // REAL
  Stmt& Bind(int i, std::string_view v);
  Stmt& BindBlob(int i, std::string_view bytes);
  Stmt& BindNull(int i);

  // true: a row is ready; false: done. Errors carry `what` and the path.
  Result<bool> Step(std::string_view what = "writing");
  // Steps a statement that returns no rows, then resets it.
  Status Run(std::string_view what = "writing");
  // Ready for new bindings; also releases the statement's read snapshot.
  void Reset();

  int64_t Int(int col) const { return sqlite3_column_int64(stmt_, col); }
  double Real(int col) const { return sqlite3_column_double(stmt_, col); }
  std::string Text(int col) const;
  std::string Blob(int col) const;
  bool IsNull(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }

 private:
  const Db* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
};

}  // namespace sy::store
