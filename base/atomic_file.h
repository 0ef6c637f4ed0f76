// File: base/atomic_file.h
//
// AtomicFile: writes a file so that a reader sees the old one or the whole
// new one, never half of one: a temporary file beside the target (mkstemp),
// the bytes, fsync, close, rename over the target. Until Commit succeeds the
// target is untouched, and the destructor removes the temporary file.
//
//   AtomicFile f(path, "expert stats to ");   // messages: "writing expert stats to PATH: ..."
//   RETURN_IF_ERROR(f.Create());
//   RETURN_IF_ERROR(f.Write(text.data(), text.size(), "write"));
//   RETURN_IF_ERROR(f.Commit());
//
// Errors are RESOURCE_EXHAUSTED "... (disk full?)" for ENOSPC, EDQUOT and
// EFBIG, else UNAVAILABLE, each "writing <label><path>: <what>: <strerror>".
//
// Thread-safety: one owner; not copyable.
#pragma once

#include <cstddef>
#include <string>

#include "base/status.h"

namespace sy {

class AtomicFile {
 public:
  // `label` is put before the path in error messages ("" or e.g. "expert stats to ").
  explicit AtomicFile(std::string target, std::string label = "");
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  Status Create();
  // All n bytes (retrying short writes and EINTR); `what` names the part in errors.
  // REQUIRES: Create() succeeded, Commit() not yet called.
  Status Write(const void* data, size_t n, const std::string& what = "write");
  Status Commit();

 private:
  Status Error(const std::string& what, int err) const;

  std::string target_;
  std::string label_;
  std::string tmp_;
  int fd_ = -1;
};

}  // namespace sy
