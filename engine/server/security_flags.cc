#include "engine/server/security_flags.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <memory>
#include <utility>

#include "telemetry/access.h"

namespace sy::engine {

void AddSecurityFlags(CLI::App* app, SecurityFlags* flags) {
  auto* key = app->add_option("--server-key", flags->server_key,
                              "CURVE secret key FILE of the engine (moe-engine keygen); "
                              "required to bind telemetry or control beyond loopback");
  auto* allow = app->add_option("--authorized-keys", flags->authorized_keys,
                                "allow-list FILE: lines 'observer|operator PUBLIC-KEY [NAME]'");
  key->needs(allow);
  allow->needs(key);
}

Status CheckEndpointSecurity(const std::string& telemetry_endpoint,
                             const std::string& control_endpoint, bool has_curve) {
  if (has_curve) return Status::Ok();
  for (const auto& [flag, endpoint] :
       {std::pair{"--telemetry", &telemetry_endpoint}, std::pair{"--control", &control_endpoint}}) {
    if (!telemetry::NeedsCurve(*endpoint)) continue;
    return FailedPrecondition(
        std::string(flag) + " endpoint '" + *endpoint +
        "' is not a loopback address; binding beyond loopback requires CURVE authentication: "
        "give --server-key FILE and --authorized-keys FILE (make keys with `moe-engine keygen "
        "--out DIR`), or bind to tcp://127.0.0.1");
  }
  return Status::Ok();
}

Result<std::optional<telemetry::CurveServer>> LoadSecurity(const SecurityFlags& flags,
                                                           const std::string& telemetry_endpoint,
                                                           const std::string& control_endpoint) {
  std::optional<telemetry::CurveServer> curve;
  if (!flags.server_key.empty() || !flags.authorized_keys.empty()) {
    if (flags.server_key.empty() || flags.authorized_keys.empty()) {
      return InvalidArgument("--server-key and --authorized-keys go together");
    }
    if (!telemetry::CurveAvailable()) {
      return Unavailable("this libzmq was built without CURVE (libsodium); cannot use keys");
    }
    telemetry::CurveServer c;
    ASSIGN_OR_RETURN(c.secret_key, telemetry::LoadSecretKey(flags.server_key));
    ASSIGN_OR_RETURN(telemetry::AllowList allow, telemetry::AllowList::Load(flags.authorized_keys));
    c.allow = std::make_shared<const telemetry::AllowList>(std::move(allow));
    curve = std::move(c);
  }
  RETURN_IF_ERROR(CheckEndpointSecurity(telemetry_endpoint, control_endpoint, curve.has_value()));
  return curve;
}

int KeygenMain(int argc, char** argv) {
  CLI::App app{
      "moe-engine keygen: write a CURVE key pair, DIR/NAME.key (secret, mode 0600) and "
      "DIR/NAME.pub, for --server-key, --authorized-keys and the console's --client-key",
      "moe-engine keygen"};
  std::string out, name = "engine";
  app.add_option("--out", out, "directory (created 0700 if missing)")->required();
  app.add_option("--name", name, "file name stem")->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  Result<telemetry::CurveKeyPair> pair = telemetry::NewCurveKeyPair();
  if (!pair.ok()) {
    std::cerr << "moe-engine keygen: " << pair.status().ToString() << "\n";
    return 1;
  }
  Result<telemetry::KeyFiles> files = telemetry::WriteKeyPair(out, name, *pair);
  if (!files.ok()) {
    std::cerr << "moe-engine keygen: " << files.status().ToString() << "\n";
    return files.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  std::printf("wrote %s (secret, 0600) and %s\npublic key: %s\n", files->secret_path.c_str(),
              files->public_path.c_str(), pair->public_key.c_str());
  return 0;
}

}  // namespace sy::engine
