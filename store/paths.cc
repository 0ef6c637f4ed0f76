#include "store/paths.h"

#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace sy::store {

Result<std::string> DefaultDbPath() {
  const char* env = std::getenv("SWITCHYARD_DB");
  if (env != nullptr && env[0] != '\0') return std::string(env);
  const char* xdg = std::getenv("XDG_DATA_HOME");
  if (xdg != nullptr && xdg[0] == '/') return std::string(xdg) + "/switchyard/runs.db";
  const char* home = std::getenv("HOME");
  if (home != nullptr && home[0] != '\0') {
    return std::string(home) + "/.local/share/switchyard/runs.db";
  }
  return FailedPrecondition(
      "no default store path: set SWITCHYARD_DB, XDG_DATA_HOME or HOME, or pass --db PATH");
}

Status EnsureParentDir(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (parent.empty()) return Status::Ok();
  std::error_code ec;
  std::filesystem::create_directories(parent, ec);
  if (ec) {
    return Unavailable("cannot create folder " + parent.string() +
                       " for the store: " + ec.message());
  }
  if (!std::filesystem::is_directory(parent, ec)) {
    return Unavailable(parent.string() + " is not a folder");
  }
  return Status::Ok();
}

}  // namespace sy::store
