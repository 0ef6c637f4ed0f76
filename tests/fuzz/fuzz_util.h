// File: tests/fuzz/fuzz_util.h
//
// What the libFuzzer targets of this folder share: a contract check that
// stops the run with a message (libFuzzer then saves the input as a crash),
// and an in-memory file for parsers that only read from a path.
//
//   SY_FUZZ_CHECK(r.ok() || r.status().code() == StatusCode::kInvalidArgument,
//                 r.status().ToString());
//   MemFile f;                           // one per process, reused
//   auto st = SafetensorsFile::Open(f.Hold(data, size));
//
// Thread-safety: none needed (libFuzzer runs one input at a time).
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

// Aborts with `what` when `cond` is false: a broken contract is a finding,
// like a crash, and the release build's NDEBUG must not hide it.
#define SY_FUZZ_CHECK(cond, what)                                                           \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      std::fprintf(stderr, "%s:%d: contract broken: %s\n  %s\n", __FILE__, __LINE__, #cond, \
                   std::string(what).c_str());                                              \
      std::abort();                                                                         \
    }                                                                                       \
  } while (0)

namespace sy::fuzz {

// An anonymous memory file (memfd) reachable by path, so that parsers which
// open a path (mmap included) read the fuzzer's bytes without touching the
// disk. Each Hold() replaces the content; every open of path() starts at 0.
class MemFile {
 public:
  MemFile() : fd_(::memfd_create("sy-fuzz", MFD_CLOEXEC)) {
    if (fd_ < 0) {
      std::perror("memfd_create");
      std::abort();
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemFile() { ::close(fd_); }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;

  // Replaces the file's bytes with [data, data + size); returns path().
  const std::string& Hold(const uint8_t* data, size_t size) {
    if (::ftruncate(fd_, 0) != 0) Die("ftruncate");
    size_t done = 0;
    while (done < size) {
      const ssize_t n = ::pwrite(fd_, data + done, size - done, static_cast<off_t>(done));
      if (n <= 0) Die("pwrite");
      done += static_cast<size_t>(n);
    }
    return path_;
  }
  const std::string& Hold(std::string_view s) {
    return Hold(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  }
  const std::string& path() const { return path_; }

 private:
  [[noreturn]] static void Die(const char* what) {
    std::perror(what);
    std::abort();
  }
  int fd_;
  std::string path_;
};

}  // namespace sy::fuzz
