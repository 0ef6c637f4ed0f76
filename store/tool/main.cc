// moe-store: see store/tool/cli.h for the commands and docs/STORE.md for the
// export format.
//
// The default store is the console's (store/paths.h: both resolve it with
// the same code, $SWITCHYARD_DB first).

#include <iostream>

#include "store/paths.h"
#include "store/tool/cli.h"

int main(int argc, char** argv) {
  std::ios::sync_with_stdio(false);
  const int code =
      sy::store::tool::RunCli(argc, argv, std::cout, std::cerr, sy::store::DefaultDbPath);
  std::cout.flush();
  return code;
}
