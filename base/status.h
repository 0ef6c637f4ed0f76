// File: base/status.h
//
// Status and Result<T>: errors as values across every library boundary of
// Switchyard (engine/, telemetry/, store/, console/). Exceptions thrown by
// dependencies (nlohmann-json, CLI11, cppzmq) are caught at our edge and turned
// into a Status with context. A broken invariant is an assert, not a Status.
//
//   Result<Config> cfg = ParseConfig(text);
//   if (!cfg.ok()) return cfg.status();
//   RETURN_IF_ERROR(store.Open(path));
//   ASSIGN_OR_RETURN(auto reader, Reader::Open(path));
//
// Thread-safety: values; copy freely.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace sy {

// Codes borrowed from Abseil's canonical set. The names (StatusCodeName) are
// wire values used in command error replies: never rename.
enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // caller's input is wrong; retrying the same input fails again
  kNotFound,            // a named thing (command, run, preset) does not exist
  kFailedPrecondition,  // the system is not in a state that allows this now
  kResourceExhausted,   // a pool, queue or disk is full
  kUnavailable,         // transient I/O or peer problem
  kDataLoss,            // stored data is corrupt
  kInternal,            // a bug on our side
  kPermissionDenied,    // the caller is known but its role may not do this
};

// "OK", "INVALID_ARGUMENT", "NOT_FOUND", ... as used on the wire.
std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "INVALID_ARGUMENT: bad level 'x'" or "OK".
  std::string ToString() const;
  // Returns a copy whose message is "context: message" (code kept).
  Status WithContext(std::string_view context) const;
  void IgnoreError() const {}

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status FailedPrecondition(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
inline Status ResourceExhausted(std::string m) {
  return {StatusCode::kResourceExhausted, std::move(m)};
}
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status DataLoss(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status PermissionDenied(std::string m) {
  return {StatusCode::kPermissionDenied, std::move(m)};
}

// Either a T or the Status explaining why there is none.
// REQUIRES: value() only when ok().
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {  // NOLINT
    assert(!status_.ok() && "Result built from an OK status has no value");
  }
  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() & {
    assert(ok());
    return *value_;
  }
  const T& value() const& {
    assert(ok());
    return *value_;
  }
  T&& value() && {
    assert(ok());
    return std::move(*value_);
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace sy

#define SY_CONCAT_INNER(a, b) a##b
#define SY_CONCAT(a, b) SY_CONCAT_INNER(a, b)

#define RETURN_IF_ERROR(expr)                \
  do {                                       \
    ::sy::Status sy_status_ = (expr);        \
    if (!sy_status_.ok()) return sy_status_; \
  } while (0)

#define SY_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()

#define ASSIGN_OR_RETURN(lhs, expr) \
  SY_ASSIGN_OR_RETURN_IMPL(SY_CONCAT(sy_result_, __LINE__), lhs, expr)
