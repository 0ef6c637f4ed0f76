// File: telemetry/curve.h
//
// CURVE keys and the options that secure the telemetry and control sockets
// (ZeroMQ's built-in CurveZMQ, libsodium underneath; docs/PROTOCOL.md,
// "Security"). A key is 32 bytes, written as 40 characters of Z85.
//
//   moe-engine keygen --out keys --name engine      # keys/engine.key, keys/engine.pub
//   ASSIGN_OR_RETURN(std::string secret, LoadSecretKey("keys/engine.key"));
//
// Key files are text: comment lines starting with '#', blank lines, and one
// line holding the Z85 key. A secret key file is created mode 0600 (open()
// with that mode, never a chmod afterwards, so it is never briefly readable)
// and refused when loaded if its group or others may read it, like ssh does.
//
// Loopback rule: telemetry and control may bind without CURVE only to a
// loopback address (127.0.0.0/8, ::1, a name resolving only to those) or to
// a local transport (ipc://, inproc://); every other bind needs a
// CurveServer. Publisher::Start and ControlServer::Bind enforce it.
//
// Thread-safety: free functions; the structs are values.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "telemetry/access.h"

namespace sy::telemetry {

inline constexpr size_t kCurveKeyBytes = 32;
inline constexpr size_t kCurveKeyZ85Chars = 40;
inline constexpr std::string_view kDefaultZapDomain = "switchyard";

// Server side of CURVE, for PublisherOptions and ControlServerOptions. Each
// secured socket runs its own ZAP handler (telemetry/zap_handler.h) that
// admits exactly the keys in `allow` and gives each peer the ZAP User-Id
// UserIdFor(key) ("operator:alice"), which command handlers read back.
struct CurveServer {
  std::string secret_key;  // Z85, the server's long-term secret key
  std::string zap_domain = std::string(kDefaultZapDomain);
  // REQUIRES: non-null. Shared between the sockets; never modified.
  std::shared_ptr<const AllowList> allow = nullptr;
  // Where refused handshakes are reported; null: only counted by the handler.
  std::shared_ptr<RefusalLog> refusals = nullptr;
};

// Client side, for SubscriberOptions and ControlClient::Connect.
struct CurveClient {
  std::string secret_key;         // Z85, this client's secret key
  std::string public_key;         // Z85, its public key (must match secret_key)
  std::string server_public_key;  // Z85, the engine's public key
};

// zmq_has("curve"): false when libzmq was built without libsodium.
bool CurveAvailable();

struct CurveKeyPair {
  std::string public_key;  // Z85
  std::string secret_key;  // Z85
};

// A fresh key pair (zmq_curve_keypair). UNAVAILABLE without CURVE support.
Result<CurveKeyPair> NewCurveKeyPair();
// INVALID_ARGUMENT (naming `what`) unless `key` is 40 characters of valid Z85.
Status ValidateZ85Key(std::string_view key, std::string_view what);
// The public key belonging to a secret key (zmq_curve_public).
Result<std::string> PublicKeyOf(const std::string& secret_key);

struct KeyFiles {
  std::string secret_path;  // DIR/NAME.key, mode 0600
  std::string public_path;  // DIR/NAME.pub, mode 0644 (minus umask)
};
// Writes `pair` as DIR/NAME.key and DIR/NAME.pub, creating DIR (mode 0700)
// if missing. FAILED_PRECONDITION if either file exists (keys are never
// overwritten); INVALID_ARGUMENT for a name with '/' or an empty name;
// UNAVAILABLE for an I/O error. On error no new file is left behind.
Result<KeyFiles> WriteKeyPair(const std::string& dir, const std::string& name,
                              const CurveKeyPair& pair);
// Reads a secret key file. PERMISSION_DENIED if group or others may read
// it (the message says so and how to fix it); INVALID_ARGUMENT for a file
// that does not hold exactly one valid Z85 key; NOT_FOUND if absent.
Result<std::string> LoadSecretKey(const std::string& path);
// Reads a public key file (any mode). Errors as LoadSecretKey.
Result<std::string> LoadPublicKey(const std::string& path);
// The console's keys: its secret key file (its public key is derived from
// it) and the engine's public key file.
Result<CurveClient> LoadCurveClient(const std::string& client_secret_path,
                                    const std::string& server_public_path);

// True for ipc:// and inproc:// endpoints and for tcp:// ones whose host is a
// loopback address or a name that resolves only to loopback addresses.
// "*", 0.0.0.0, interface names and other transports are not.
bool IsLoopbackEndpoint(const std::string& endpoint);
// True when binding `endpoint` without CURVE is refused: a network transport
// (tcp, udp, pgm, epgm, norm, ws, wss, tipc, vmci) on a non-loopback address.
// An unknown scheme is left for ZeroMQ to reject.
bool NeedsCurve(const std::string& endpoint);
// OK unless NeedsCurve(endpoint) and !has_curve; then FAILED_PRECONDITION
// naming `what` ("telemetry PUB socket") and the endpoint.
Status CheckBindSecurity(std::string_view what, const std::string& endpoint, bool has_curve);

}  // namespace sy::telemetry
