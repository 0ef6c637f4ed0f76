// moe-store: see store/tool/cli.h for the commands and docs/STORE.md for the
// export format.
//
// The default store is the console's (store/paths.h: both resolve it with
// the same code); $SWITCHYARD_DB, which scripts/run passes to the console as
// --db, comes first.

#include <cstdlib>
#include <iostream>

#include "store/paths.h"
#include "store/tool/cli.h"

int main(int argc, char** argv) {
  std::ios::sync_with_stdio(false);
  auto default_db = []() -> sy::Result<std::string> {
    const char* env = std::getenv("SWITCHYARD_DB");
    if (env != nullptr && env[0] != '\0') return std::string(env);
    return sy::store::DefaultDbPath();
  };
  const int code = sy::store::tool::RunCli(argc, argv, std::cout, std::cerr, default_db);
  std::cout.flush();
  return code;
}
