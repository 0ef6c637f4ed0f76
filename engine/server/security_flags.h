// File: engine/server/security_flags.h
//
// moe-engine's CURVE flags and `moe-engine keygen` (docs/PROTOCOL.md,
// "Security"). Telemetry and control bind to loopback by default; binding
// either anywhere else needs both flags:
//
//   moe-engine keygen --out keys --name engine       # keys/engine.key (0600), keys/engine.pub
//   moe-engine keygen --out keys --name alice
//   echo "operator $(grep -v '^#' keys/alice.pub) alice" > keys/authorized
//   moe-engine --telemetry tcp://0.0.0.0:5555 --control tcp://0.0.0.0:5556
//       --server-key keys/engine.key --authorized-keys keys/authorized
//
// Thread-safety: free functions.
#pragma once

#include <optional>
#include <string>

#include "base/status.h"
#include "telemetry/curve.h"

namespace CLI {
class App;
}  // namespace CLI

namespace sy::engine {

struct SecurityFlags {
  std::string server_key;       // --server-key FILE: the engine's secret key
  std::string authorized_keys;  // --authorized-keys FILE: the allow-list
};

// Adds --server-key and --authorized-keys (each needs the other).
void AddSecurityFlags(CLI::App* app, SecurityFlags* flags);

// OK when neither endpoint needs CURVE (telemetry::NeedsCurve: loopback,
// ipc://, inproc://) or `has_curve`; otherwise FAILED_PRECONDITION naming the first endpoint beyond
// loopback and the flags that are missing.
Status CheckEndpointSecurity(const std::string& telemetry_endpoint,
                             const std::string& control_endpoint, bool has_curve);

// Loads the flags' files into a CurveServer (nullopt when neither flag is
// given) and runs CheckEndpointSecurity. Errors: the key file's (NOT_FOUND,
// PERMISSION_DENIED for a group/world-readable secret key, INVALID_ARGUMENT
// for bad Z85), the allow-list's (INVALID_ARGUMENT with file:line),
// UNAVAILABLE when libzmq lacks CURVE, and CheckEndpointSecurity's.
Result<std::optional<telemetry::CurveServer>> LoadSecurity(const SecurityFlags& flags,
                                                           const std::string& telemetry_endpoint,
                                                           const std::string& control_endpoint);

// `moe-engine keygen --out DIR [--name NAME]`: writes DIR/NAME.key (0600)
// and DIR/NAME.pub and prints the public key. Exit 0, 1 (I/O, existing
// files) or 2 (command line).
int KeygenMain(int argc, char** argv);

}  // namespace sy::engine
