#include "base/atomic_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace sy {

AtomicFile::AtomicFile(std::string target, std::string label)
    : target_(std::move(target)), label_(std::move(label)) {}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
}

Status AtomicFile::Error(const std::string& what, int err) const {
  std::string m = "writing " + label_ + target_ + ": " + what + ": " + std::strerror(err);
  if (err == ENOSPC || err == EDQUOT || err == EFBIG) return ResourceExhausted(m + " (disk full?)");
  return Unavailable(std::move(m));
}

Status AtomicFile::Create() {
  std::string templ = target_ + ".tmp.XXXXXX";
  fd_ = ::mkstemp(templ.data());
  if (fd_ < 0) return Error("cannot create a temporary file", errno);
  tmp_ = std::move(templ);
  return Status::Ok();
}

Status AtomicFile::Write(const void* data, size_t n, const std::string& what) {
  const char* c = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd_, c, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return Error(what, errno);
    }
    c += w;
    n -= static_cast<size_t>(w);
  }
  return Status::Ok();
}

Status AtomicFile::Commit() {
  if (::fsync(fd_) != 0) return Error("fsync", errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) return Error("close", errno);
  if (::rename(tmp_.c_str(), target_.c_str()) != 0) return Error("rename", errno);
  tmp_.clear();
  return Status::Ok();
}

}  // namespace sy
