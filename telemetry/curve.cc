#include "telemetry/curve.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

namespace sy::telemetry {

namespace {

std::string Errno(int err) { return std::strerror(err); }

std::string ModeText(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

// Closes a descriptor on every path out.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int Release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

// Creates `path` with exactly `mode` (O_EXCL: an existing file is an error)
// and writes `text`. On failure nothing is left at `path`.
Status WriteNewFile(const std::string& path, const std::string& text, mode_t mode) {
  Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode));
  if (fd.get() < 0) {
    const int err = errno;
    if (err == EEXIST) {
      return FailedPrecondition("'" + path + "' already exists; keys are never overwritten");
    }
    return Unavailable("cannot create '" + path + "': " + Errno(err));
  }
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::unlink(path.c_str());
      return Unavailable("cannot write '" + path + "': " + Errno(err));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd.get()) != 0 || ::close(fd.Release()) != 0) {
    const int err = errno;
    ::unlink(path.c_str());
    return Unavailable("cannot write '" + path + "': " + Errno(err));
  }
  return Status::Ok();
}

// Reads a key file: `secret` checks the mode first, on the open descriptor
// (no window between the check and the read).
Result<std::string> LoadKeyFile(const std::string& path, bool secret) {
  const char* kind = secret ? "secret key file" : "public key file";
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    const int err = errno;
    if (err == ENOENT) return NotFound(std::string(kind) + " '" + path + "' does not exist");
    return Unavailable(std::string("cannot open ") + kind + " '" + path + "': " + Errno(err));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return Unavailable(std::string("cannot stat ") + kind + " '" + path + "': " + Errno(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    return InvalidArgument(std::string(kind) + " '" + path + "' is not a regular file");
  }
  if (secret && (st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    return PermissionDenied("secret key file '" + path + "' has mode " + ModeText(st.st_mode) +
                            ": group or others may access it, so it is refused; run 'chmod 600 " +
                            path + "' (and consider the key leaked if others could read it)");
  }
  if (st.st_size > 64 * 1024) {
    return InvalidArgument(std::string(kind) + " '" + path + "' is too large for a key file");
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::read(fd.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Unavailable("cannot read '" + path + "': " + Errno(errno));
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  text.resize(done);
  std::string key;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + pos, end - pos);
    pos = end + 1;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) {
      line.remove_suffix(1);
    }
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    if (line.empty() || line.front() == '#') continue;
    if (!key.empty()) {
      return InvalidArgument(std::string(kind) + " '" + path + "' holds more than one key line");
    }
    key = std::string(line);
  }
  if (key.empty()) return InvalidArgument(std::string(kind) + " '" + path + "' holds no key");
  RETURN_IF_ERROR(ValidateZ85Key(key, std::string(kind) + " '" + path + "'"));
  return key;
}

bool IsLoopbackAddress(const sockaddr* sa) {
  if (sa->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
  }
  if (sa->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr)) return true;
    if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) return in6->sin6_addr.s6_addr[12] == 127;
  }
  return false;
}

// Every address `host` resolves to is loopback (and there is at least one).
bool ResolvesToLoopbackOnly(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || res == nullptr) return false;
  bool all = true;
  for (const addrinfo* a = res; a != nullptr; a = a->ai_next) {
    if (!IsLoopbackAddress(a->ai_addr)) all = false;
  }
  ::freeaddrinfo(res);
  return all;
}

}  // namespace

bool CurveAvailable() { return zmq_has("curve") != 0; }

Result<CurveKeyPair> NewCurveKeyPair() {
  if (!CurveAvailable()) {
    return Unavailable("this libzmq was built without CURVE (libsodium); cannot make keys");
  }
  std::array<char, kCurveKeyZ85Chars + 1> pub{}, sec{};
  if (zmq_curve_keypair(pub.data(), sec.data()) != 0) {
    return Unavailable(std::string("zmq_curve_keypair failed: ") + zmq_strerror(zmq_errno()));
  }
  return CurveKeyPair{.public_key = pub.data(), .secret_key = sec.data()};
}

Status ValidateZ85Key(std::string_view key, std::string_view what) {
  if (key.size() != kCurveKeyZ85Chars) {
    return InvalidArgument(std::string(what) + ": a CURVE key is " +
                           std::to_string(kCurveKeyZ85Chars) + " Z85 characters, got " +
                           std::to_string(key.size()));
  }
  std::string text(key);
  std::array<uint8_t, kCurveKeyBytes> bytes{};
  // zmq_z85_decode rejects characters outside the Z85 alphabet.
  if (zmq_z85_decode(bytes.data(), text.c_str()) == nullptr) {
    return InvalidArgument(std::string(what) + ": '" + text + "' is not valid Z85");
  }
  return Status::Ok();
}

Result<std::string> PublicKeyOf(const std::string& secret_key) {
  RETURN_IF_ERROR(ValidateZ85Key(secret_key, "secret key"));
  if (!CurveAvailable()) return Unavailable("this libzmq was built without CURVE (libsodium)");
  std::array<char, kCurveKeyZ85Chars + 1> pub{};
  if (zmq_curve_public(pub.data(), secret_key.c_str()) != 0) {
    return InvalidArgument(std::string("cannot derive the public key: ") +
                           zmq_strerror(zmq_errno()));
  }
  return std::string(pub.data());
}

Result<KeyFiles> WriteKeyPair(const std::string& dir, const std::string& name,
                              const CurveKeyPair& pair) {
  if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
    return InvalidArgument("key name '" + name + "' must be a non-empty file name without '/'");
  }
  RETURN_IF_ERROR(ValidateZ85Key(pair.secret_key, "secret key"));
  RETURN_IF_ERROR(ValidateZ85Key(pair.public_key, "public key"));
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return Unavailable("cannot create directory '" + dir + "': " + Errno(errno));
  }
  KeyFiles files{.secret_path = dir + "/" + name + ".key",
                 .public_path = dir + "/" + name + ".pub"};
  RETURN_IF_ERROR(WriteNewFile(files.secret_path,
                               "# Switchyard CURVE secret key '" + name +
                                   "' (moe-engine keygen). Keep it private: mode 0600.\n" +
                                   pair.secret_key + "\n",
                               0600));
  Status s = WriteNewFile(files.public_path,
                          "# Switchyard CURVE public key '" + name +
                              "' (moe-engine keygen). Give it to the engine's allow-list "
                              "or to the console.\n" +
                              pair.public_key + "\n",
                          0644);
  if (!s.ok()) {
    ::unlink(files.secret_path.c_str());
    return s;
  }
  return files;
}

Result<std::string> LoadSecretKey(const std::string& path) { return LoadKeyFile(path, true); }

Result<std::string> LoadPublicKey(const std::string& path) { return LoadKeyFile(path, false); }

Result<CurveClient> LoadCurveClient(const std::string& client_secret_path,
                                    const std::string& server_public_path) {
  CurveClient c;
  ASSIGN_OR_RETURN(c.secret_key, LoadSecretKey(client_secret_path));
  ASSIGN_OR_RETURN(c.public_key, PublicKeyOf(c.secret_key));
  ASSIGN_OR_RETURN(c.server_public_key, LoadPublicKey(server_public_path));
  return c;
}

bool IsLoopbackEndpoint(const std::string& endpoint) {
  if (endpoint.rfind("ipc://", 0) == 0 || endpoint.rfind("inproc://", 0) == 0) return true;
  if (endpoint.rfind("tcp://", 0) != 0) return false;
  const std::string rest = endpoint.substr(6);
  const size_t colon = rest.rfind(':');
  if (colon == std::string::npos) return false;
  std::string host = rest.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty() || host == "*") return false;
  in_addr v4{};
  if (::inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (::inet_pton(AF_INET6, host.c_str(), &v6) == 1) {
    return IN6_IS_ADDR_LOOPBACK(&v6) || (IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127);
  }
  return ResolvesToLoopbackOnly(host);
}

bool NeedsCurve(const std::string& endpoint) {
  const size_t sep = endpoint.find("://");
  if (sep == std::string::npos) return false;
  const std::string scheme = endpoint.substr(0, sep);
  for (const char* network : {"tcp", "udp", "pgm", "epgm", "norm", "ws", "wss", "tipc", "vmci"}) {
    if (scheme == network) return !IsLoopbackEndpoint(endpoint);
  }
  return false;
}

Status CheckBindSecurity(std::string_view what, const std::string& endpoint, bool has_curve) {
  if (has_curve || !NeedsCurve(endpoint)) return Status::Ok();
  return FailedPrecondition("refusing to bind the " + std::string(what) + " to '" + endpoint +
                            "': it is not a loopback address, and binding beyond loopback "
                            "requires CURVE keys");
}

}  // namespace sy::telemetry
