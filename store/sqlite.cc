#include "store/sqlite.h"

#include <utility>

namespace sy::store {

Status SqliteStatus(int rc, sqlite3* db, std::string_view what, const std::string& path) {
  // The connection's message is more specific than sqlite3_errstr when it is
  // about this rc (e.g. "no such table: runs").
  std::string detail = sqlite3_errstr(rc);
  if (db != nullptr && (sqlite3_errcode(db) & 0xff) == (rc & 0xff)) detail = sqlite3_errmsg(db);
  std::string where = std::string(what) + " " + path + ": " + detail;
  switch (rc & 0xff) {
    case SQLITE_FULL:
      return ResourceExhausted("disk full " + where);
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_READONLY:
    case SQLITE_PERM:
      return Unavailable(where);
    case SQLITE_NOTADB:
    case SQLITE_CORRUPT:
      return DataLoss(where);
    default:
      return Internal(where);
  }
}

Result<Db> Db::Open(const std::string& path, int flags) {
  Db db;
  db.path_ = path;
  int rc = sqlite3_open_v2(path.c_str(), &db.db_, flags, nullptr);
  if (rc != SQLITE_OK) return db.Error(rc, "opening");
  // Extended codes let SqliteStatus tell SQLITE_IOERR_* apart if it needs to.
  sqlite3_extended_result_codes(db.db_, 1);
  return db;
}

Db& Db::operator=(Db&& o) noexcept {
  if (this != &o) {
    if (db_ != nullptr) sqlite3_close_v2(db_);
    db_ = std::exchange(o.db_, nullptr);
    path_ = std::move(o.path_);
  }
  return *this;
}

Db::~Db() {
  // close_v2 defers the close until every Stmt is finalized, so member
  // destruction order in owners cannot leak the handle.
  if (db_ != nullptr) sqlite3_close_v2(db_);
}

Status Db::Exec(std::string_view sql, std::string_view what) {
  std::string s(sql);
  int rc = sqlite3_exec(db_, s.c_str(), nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return Error(rc, what);
  return Status::Ok();
}

Result<int64_t> Db::QueryInt(const std::string& sql, std::string_view what) {
  ASSIGN_OR_RETURN(Stmt st, Stmt::Prepare(*this, sql));
  ASSIGN_OR_RETURN(bool row, st.Step(what));
  if (!row) return Internal("no row from '" + sql + "' on " + path_);
  return st.Int(0);
}

Result<std::string> Db::QueryText(const std::string& sql, std::string_view what) {
  ASSIGN_OR_RETURN(Stmt st, Stmt::Prepare(*this, sql));
  ASSIGN_OR_RETURN(bool row, st.Step(what));
  if (!row) return Internal("no row from '" + sql + "' on " + path_);
  return st.Text(0);
}

Result<Stmt> Stmt::Prepare(const Db& db, std::string_view sql) {
  Stmt st;
  st.db_ = &db;
  int rc = sqlite3_prepare_v3(db.get(), sql.data(), static_cast<int>(sql.size()),
                              SQLITE_PREPARE_PERSISTENT, &st.stmt_, nullptr);
  if (rc != SQLITE_OK) return db.Error(rc, "preparing a statement on");
  return st;
}

Stmt& Stmt::operator=(Stmt&& o) noexcept {
  if (this != &o) {
    if (stmt_ != nullptr) sqlite3_finalize(stmt_);
    db_ = o.db_;
    stmt_ = std::exchange(o.stmt_, nullptr);
  }
  return *this;
}

Stmt::~Stmt() {
  if (stmt_ != nullptr) sqlite3_finalize(stmt_);
}

Stmt& Stmt::Bind(int i, int64_t v) {
  sqlite3_bind_int64(stmt_, i, v);
  return *this;
}

Stmt& Stmt::Bind(int i, double v) {
  sqlite3_bind_double(stmt_, i, v);
  return *this;
}

Stmt& Stmt::Bind(int i, std::string_view v) {
  sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  return *this;
}

Stmt& Stmt::BindBlob(int i, std::string_view bytes) {
  sqlite3_bind_blob(stmt_, i, bytes.data(), static_cast<int>(bytes.size()), SQLITE_TRANSIENT);
  return *this;
}

Stmt& Stmt::BindNull(int i) {
  sqlite3_bind_null(stmt_, i);
  return *this;
}

Result<bool> Stmt::Step(std::string_view what) {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  Status s = db_->Error(rc, what);
  sqlite3_reset(stmt_);
  return s;
}

Status Stmt::Run(std::string_view what) {
  Result<bool> r = Step(what);
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  return r.ok() ? Status::Ok() : r.status();
}

void Stmt::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

std::string Stmt::Text(int col) const {
  const unsigned char* p = sqlite3_column_text(stmt_, col);
  if (p == nullptr) return {};
  return std::string(reinterpret_cast<const char*>(p),
                     static_cast<size_t>(sqlite3_column_bytes(stmt_, col)));
}

std::string Stmt::Blob(int col) const {
  const void* p = sqlite3_column_blob(stmt_, col);
  if (p == nullptr) return {};
  return std::string(static_cast<const char*>(p),
                     static_cast<size_t>(sqlite3_column_bytes(stmt_, col)));
}

}  // namespace sy::store
