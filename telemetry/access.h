// File: telemetry/access.h
//
// Who may do what on a CURVE-secured engine (docs/PROTOCOL.md, "Security"):
// the allow-list of client public keys with their roles, the rule that maps
// a role and a command to allowed or PERMISSION_DENIED, and the queue that
// carries refused connections from the ZAP handler threads to the engine.
//
// Allow-list file (--authorized-keys): one key per line,
//
//   # role      public key (Z85, 40 chars)                  name (optional)
//   operator    rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7     alice
//   observer    Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID     dashboard
//
// '#' starts a comment line; blank lines are skipped; a key may appear once.
// A name is one word ([A-Za-z0-9._-]); a key without one is named by its
// first 8 characters.
//
// Roles: an observer may subscribe to telemetry and run the commands that
// change nothing (IsReadOnly below); an operator may run every command.
//
// Thread-safety: AllowList is immutable after Parse and may be shared;
// RefusalLog may be used from any thread.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "telemetry/protocol.h"

namespace sy::telemetry {

enum class Role { kObserver, kOperator };

// "observer" | "operator": the words of the allow-list and of the User-Id.
std::string_view RoleName(Role role);
Result<Role> ParseRole(std::string_view word);

struct AuthorizedKey {
  Role role = Role::kObserver;
  std::string public_key;  // Z85
  std::string name;
};

class AllowList {
 public:
  // INVALID_ARGUMENT naming `source` and the line for an unknown role, a bad
  // key, a bad name, extra words or a duplicate key. An empty list is valid
  // (it admits nobody).
  static Result<AllowList> Parse(std::string_view text, std::string_view source);
  // Reads and parses a file; NOT_FOUND / UNAVAILABLE with the path.
  static Result<AllowList> Load(const std::string& path);

  // The entry for a Z85 public key, or null.
  const AuthorizedKey* Find(std::string_view public_key) const;
  const std::vector<AuthorizedKey>& keys() const { return keys_; }

 private:
  std::vector<AuthorizedKey> keys_;
};

// The ZAP User-Id a peer with this key is given: "<role>:<name>".
std::string UserIdFor(const AuthorizedKey& key);
// The role in a User-Id made by UserIdFor; nullopt for anything else
// (including the empty User-Id of a socket without ZAP).
std::optional<Role> RoleOfUserId(std::string_view user_id);

// True for the requests that change nothing in the engine: describe, status,
// expert_stats without "path" (with it the engine writes a file), rebalance
// with "dry_run": true and no injected fault, and policy without arguments.
bool IsReadOnly(const CommandRequest& request);
// OK when `role` may run `request`; PERMISSION_DENIED naming the command and
// the role otherwise.
Status CheckPermission(Role role, const CommandRequest& request);
// The engine's check for a request received on a socket that has (secured)
// or has not (loopback) CURVE: without CURVE everything is allowed; with it
// the sender's role comes from request.user_id, and a request whose User-Id
// names no role is refused.
Status Authorize(bool secured, const CommandRequest& request);

// A handshake the engine refused: an unknown key (from the ZAP handler) or
// a peer that failed before ZAP (no CURVE, wrong server key).
struct AuthRefusal {
  std::string socket;        // "telemetry" | "control"
  std::string peer_address;  // IP address, or the endpoint when unknown
  std::string public_key;    // Z85; empty when the peer never presented one
  std::string mechanism;     // "CURVE", "NULL", ... as far as known
  std::string reason;
  int64_t repeats = 0;  // refusals of the same peer folded into this one
};

// Refusals handed from the ZAP handler threads to the engine loop: Push()
// never blocks on the consumer, and a peer that retries every 100 ms does not
// flood the event stream: within `fold_ms` of a reported refusal, more of the
// same (socket, address, key, reason) are only counted, and the count rides
// on the next one reported. Beyond `capacity` queued refusals the rest are
// counted in dropped().
class RefusalLog {
 public:
  explicit RefusalLog(size_t capacity = 256, int64_t fold_ms = 10000)
      : capacity_(capacity), fold_ms_(fold_ms) {}

  // `now_ms` is any monotonic clock in milliseconds. True if queued.
  bool Push(AuthRefusal refusal, int64_t now_ms);
  std::vector<AuthRefusal> Drain();
  int64_t total() const;    // every refusal pushed, folded ones included
  int64_t dropped() const;  // refusals lost to a full queue

 private:
  struct Fold {
    int64_t last_ms = 0;
    int64_t folded = 0;
  };
  const size_t capacity_;
  const int64_t fold_ms_;
  mutable std::mutex mu_;
  std::deque<AuthRefusal> queue_;     // GUARDED_BY(mu_)
  std::map<std::string, Fold> fold_;  // GUARDED_BY(mu_)
  int64_t total_ = 0;                 // GUARDED_BY(mu_)
  int64_t dropped_ = 0;               // GUARDED_BY(mu_)
};

}  // namespace sy::telemetry
