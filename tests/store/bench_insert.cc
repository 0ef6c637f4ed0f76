// store_bench_insert: the raw SQLite floor under the console's ingest
// (issue 7: "next to a raw SQLite prepared-insert rate measured in the same
// run"). One prepared INSERT into the store's own `spans` table (a fresh file
// migrated to the current schema, so the same columns, key and indexes), the
// Writer's pragmas (WAL, synchronous=NORMAL), `--rows` rows bound as integers
// in transactions of `--batch` rows. No JSON, no queue, no other table: what
// SQLite alone sustains on this disk, for scripts/bench to set beside the
// console's end-to-end rate.
//
//   store_bench_insert [--rows N] [--batch N] [--db PATH]
//
// Prints "raw sqlite insert: N rows in T ms: R rows/s"; exit 1 on any error.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "store/schema.h"
#include "store/sqlite.h"

namespace sy::store {
namespace {

Status Run(int64_t rows, int64_t batch, const std::string& path) {
  ASSIGN_OR_RETURN(Db db, Db::Open(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE));
  RETURN_IF_ERROR(db.QueryText("PRAGMA journal_mode = WAL", "opening").status());
  RETURN_IF_ERROR(db.Exec("PRAGMA synchronous = NORMAL", "opening"));
  RETURN_IF_ERROR(CheckStore(db).status());
  RETURN_IF_ERROR(Migrate(db));
  ASSIGN_OR_RETURN(Stmt ins,
                   Stmt::Prepare(db,
                                 "INSERT INTO spans (batch, idx, run, step, t_us, device, layer, "
                                 "name, kind, start_us, dur_us, tokens, flops, bytes) VALUES "
                                 "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)"));
  // Rows shaped like a full trace: 8 devices x 94 layers x 4 kernels a step.
  constexpr int64_t kPerStep = 8 * 94 * 4;
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < rows;) {
    RETURN_IF_ERROR(db.Exec("BEGIN IMMEDIATE"));
    for (const int64_t end = std::min(rows, i + batch); i < end; ++i) {
      const int64_t step = i / kPerStep, k = i % kPerStep, t = step * 20'000;
      ins.Bind(1, step).Bind(2, k).Bind(3, int64_t{1}).Bind(4, step).Bind(5, t);
      ins.Bind(6, k % 8).Bind(7, (k / 8) % 94).Bind(8, k % 4).Bind(9, k % 4 == 3 ? 1 : 0);
      ins.Bind(10, t + k * 5).Bind(11, int64_t{5}).Bind(12, int64_t{256});
      ins.Bind(13, int64_t{1} << 30).Bind(14, int64_t{1} << 24);
      RETURN_IF_ERROR(ins.Run());
    }
    RETURN_IF_ERROR(db.Exec("COMMIT"));
  }
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("raw sqlite insert: %lld rows in %.0f ms (transactions of %lld): %.0f rows/s\n",
              static_cast<long long>(rows), ms, static_cast<long long>(batch),
              static_cast<double>(rows) / (ms / 1e3));
  return Status::Ok();
}

}  // namespace
}  // namespace sy::store

int main(int argc, char** argv) {
  int64_t rows = 2'000'000, batch = 65'536;
  std::string db;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--rows") == 0) {
      rows = std::atoll(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--batch") == 0) {
      batch = std::atoll(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--db") == 0) {
      db = argv[i + 1];
    } else {
      std::fprintf(stderr, "usage: store_bench_insert [--rows N] [--batch N] [--db PATH]\n");
      return 2;
    }
  }
  if (rows <= 0 || batch <= 0) {
    std::fprintf(stderr, "store_bench_insert: --rows and --batch must be positive\n");
    return 2;
  }
  const bool temp = db.empty();
  if (temp) {
    db = (std::filesystem::temp_directory_path() /
          ("sy_bench_insert_" + std::to_string(getpid()) + ".db"))
             .string();
  }
  const sy::Status s = sy::store::Run(rows, batch, db);
  if (temp) {
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(db + suffix);
  }
  if (!s.ok()) {
    std::fprintf(stderr, "store_bench_insert: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
