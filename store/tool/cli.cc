// Flags (CLI11) to the library calls, and Status codes to exit codes.

#include "store/tool/cli.h"

#include <CLI/CLI.hpp>
#include <cmath>
#include <optional>

#include "base/atomic_file.h"
#include "base/flag_checks.h"
#include "store/tool/chrome_trace.h"
#include "store/tool/inventory.h"
#include "store/tool/maintenance.h"
#include "store/tool/store_file.h"

namespace sy::store::tool {
namespace {

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

struct Flags {
  std::string db;
  std::string run;
  int events = 20;
  std::string format = "chrome-trace";
  double from_s = 0, to_s = 0;
  bool has_from = false, has_to = false;
  std::string out_path;
  int64_t keep = 0;
};

int Fail(std::ostream& err, const Status& s) {
  err << "moe-store: " << s.message() << "\n";
  const StatusCode c = s.code();
  return c == StatusCode::kInvalidArgument || c == StatusCode::kNotFound ? kExitUsage
                                                                         : kExitFailure;
}

Result<int64_t> SecondsToUs(double s, std::string_view flag) {
  if (!std::isfinite(s) || s < 0 || s > 9.2e12) {
    return InvalidArgument(std::string(flag) + " must be a number of seconds >= 0, got " +
                           std::to_string(s));
  }
  return static_cast<int64_t>(std::llround(s * 1e6));
}

Status Export(StoreFile& f, const Flags& fl, std::ostream& out, std::ostream& err) {
  if (fl.format != "chrome-trace") {
    return InvalidArgument("unknown export format '" + fl.format + "'; known: chrome-trace");
  }
  ExportOptions o;
  o.run = fl.run;
  if (fl.has_from) {
    ASSIGN_OR_RETURN(o.from_us, SecondsToUs(fl.from_s, "--from"));
  }
  if (fl.has_to) {
    ASSIGN_OR_RETURN(o.to_us, SecondsToUs(fl.to_s, "--to"));
  }
  if (o.from_us > o.to_us) {
    return InvalidArgument("--from " + std::to_string(fl.from_s) + " is after --to " +
                           std::to_string(fl.to_s));
  }
  // Checked here too so that a bad id never creates --out.
  RETURN_IF_ERROR(GetRunSummary(f.db(), fl.run).status());
  if (fl.out_path.empty()) {
    Sink sink = [&](std::string_view chunk) -> Status {
      out.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
      return out ? Status::Ok() : Unavailable("writing the trace to standard output failed");
    };
    return ExportChromeTrace(f.db(), o, sink).status();
  }
  // Written beside the target and renamed over it at the end: a failed
  // export leaves no half file.
  AtomicFile file(fl.out_path, "the trace to ");
  RETURN_IF_ERROR(file.Create());
  Sink sink = [&](std::string_view chunk) { return file.Write(chunk.data(), chunk.size()); };
  ASSIGN_OR_RETURN(ExportStats st, ExportChromeTrace(f.db(), o, sink));
  RETURN_IF_ERROR(file.Commit());
  err << "moe-store: wrote " << fl.out_path << ": " << st.spans << " spans, " << st.steps
      << " steps, " << st.counters << " counter samples, " << st.instants << " instants on "
      << st.tracks << " tracks (" << st.overflow_tracks << " for overlapping spans), " << st.bytes
      << " bytes\n";
  return Status::Ok();
}

}  // namespace

int RunCli(int argc, const char* const* argv, std::ostream& out, std::ostream& err,
           const DefaultDb& default_db) {
  Flags fl;
  CLI::App app{"moe-store: list, inspect, export (Perfetto) and maintain Switchyard run stores"};
  app.add_option("--db", fl.db,
                 "store file (default: the console's, $XDG_DATA_HOME/switchyard/runs.db or "
                 "~/.local/share/switchyard/runs.db; $SWITCHYARD_DB overrides it)");
  app.require_subcommand(1);
  CLI::App* list = app.add_subcommand("list", "one line per run, newest first");
  CLI::App* show = app.add_subcommand("show", "a run's metadata, rows per table and events");
  show->add_option("ID", fl.run, "run id")->required();
  show->add_option("--events", fl.events, "events and commands to print (default 20)")
      ->check(NonNegative());
  CLI::App* exp = app.add_subcommand("export", "a run as Chrome Trace JSON for ui.perfetto.dev");
  exp->add_option("ID", fl.run, "run id")->required();
  exp->add_option("--format", fl.format, "output format (only chrome-trace)");
  CLI::Option* from = exp->add_option("--from", fl.from_s, "window start, seconds since run start");
  CLI::Option* to = exp->add_option("--to", fl.to_s, "window end, seconds since run start");
  exp->add_option("--out", fl.out_path, "write here instead of standard output");
  CLI::App* prune = app.add_subcommand("prune", "delete all but the newest N runs");
  prune->add_option("--keep", fl.keep, "runs to keep")->required()->check(NonNegative());
  CLI::App* vacuum = app.add_subcommand("vacuum", "give freed space back (SQLite VACUUM)");
  CLI::App* check = app.add_subcommand("check", "integrity check and rows per table");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e, out, err);
    return code == 0 ? 0 : kExitUsage;
  }
  fl.has_from = from->count() > 0;
  fl.has_to = to->count() > 0;

  if (fl.db.empty()) {
    Result<std::string> def = default_db();
    if (!def.ok()) return Fail(err, def.status());
    fl.db = *def;
  }
  const bool writes = prune->parsed() || vacuum->parsed();
  Result<StoreFile> file = StoreFile::Open(fl.db, writes ? StoreFile::kWrite : StoreFile::kRead);
  if (!file.ok()) return Fail(err, file.status());
  StoreFile& f = *file;

  if (list->parsed()) {
    Result<std::vector<RunSummary>> runs = ListRunSummaries(f.db());
    if (!runs.ok()) return Fail(err, runs.status());
    out << FormatRunTable(*runs);
    return 0;
  }
  if (show->parsed()) {
    Result<RunDetail> d = GetRunDetail(f.db(), fl.run, fl.events);
    if (!d.ok()) return Fail(err, d.status());
    out << FormatRunDetail(*d);
    return 0;
  }
  if (exp->parsed()) {
    Status s = Export(f, fl, out, err);
    return s.ok() ? 0 : Fail(err, s);
  }
  if (prune->parsed()) {
    Result<PruneReport> r = Prune(f.db(), fl.keep);
    if (!r.ok()) return Fail(err, r.status());
    out << FormatPruneReport(*r);
    return 0;
  }
  if (vacuum->parsed()) {
    Result<VacuumReport> r = Vacuum(f.db());
    if (!r.ok()) return Fail(err, r.status());
    out << "vacuumed " << f.path() << ": " << r->bytes_before << " -> " << r->bytes_after
        << " bytes\n";
    return 0;
  }
  if (check->parsed()) {
    Result<CheckReport> r = Check(f.db());
    if (!r.ok()) {
      Fail(err, r.status());
      return kExitFailure;  // a file too damaged to check failed the check
    }
    out << FormatCheckReport(*r);
    return r->ok() ? 0 : kExitFailure;
  }
  return kExitUsage;  // unreachable: require_subcommand(1)
}

}  // namespace sy::store::tool
