#include "store/tool/store_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "store/schema.h"
#include "store/store.h"

namespace sy::store::tool {

StoreFile::StoreFile(StoreFile&& o) noexcept
    : lock_fd_(std::exchange(o.lock_fd_, -1)), db_(std::move(o.db_)) {}

StoreFile::~StoreFile() {
  db_ = Db();  // closes SQLite's descriptors first
  if (lock_fd_ >= 0) close(lock_fd_);
}

Result<StoreFile> StoreFile::Open(const std::string& path, Mode mode) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return NotFound("no store at " + path);
  if (std::filesystem::is_directory(path, ec)) {
    return InvalidArgument(path + " is a folder, not a store file");
  }
  StoreFile f;
  if (mode == kWrite) {
    // The same lock store::Writer takes (row_writer.cc): a recording console
    // holds it for as long as the file is open.
    f.lock_fd_ = open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (f.lock_fd_ < 0) return Unavailable("opening " + path + ": " + std::strerror(errno));
    if (flock(f.lock_fd_, LOCK_EX | LOCK_NB) != 0) {
      if (errno == EWOULDBLOCK) {
        return FailedPrecondition(path +
                                  " is open for writing (a console is recording into it); "
                                  "stop it first");
      }
      return Unavailable("locking " + path + ": " + std::strerror(errno));
    }
  }
  ASSIGN_OR_RETURN(f.db_,
                   Db::Open(path, mode == kWrite ? SQLITE_OPEN_READWRITE : SQLITE_OPEN_READONLY));
  sqlite3_busy_timeout(f.db_.get(), 5000);
  ASSIGN_OR_RETURN(int version, CheckStore(f.db_));
  if (version == 0) return DataLoss(path + ": not a Switchyard store (empty database)");
  if (version < kSchemaVersion) {
    return FailedPrecondition(path + " has store schema v" + std::to_string(version) +
                              "; open it once for writing (e.g. with moe-console) to migrate "
                              "it to v" +
                              std::to_string(kSchemaVersion));
  }
  return f;
}

}  // namespace sy::store::tool
