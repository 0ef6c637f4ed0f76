// File: store/store.h
//
// Persisted runs in one SQLite file (WAL). The file format, tables and
// migrations are documented in docs/STORE.md.
//
// Writer: owns a writer thread and a bounded queue. Enqueue() never blocks:
// beyond `queue_capacity` messages, or when the message would take the
// queue's estimated size past `queue_max_bytes`, it is dropped and counted
// (never silent).
// The thread writes in batched transactions (up to `batch_max` messages or
// every `flush_ms`). A write error (disk full, I/O) stops writing, is kept in
// status(), and further messages are counted as dropped; what was committed
// stays intact (the failed transaction is rolled back). One Writer per file:
// a second one is refused (FAILED_PRECONDITION) while the first is open.
//
// Sessions: every run a Writer records is linked to one `sessions` row made
// for that Writer, so the runs of several engines recorded by one console
// (moe-console --connect A --connect B) can be found together. A run revived
// by a later Writer (console restarted, engine kept running) moves to the
// later session.
//
// Run status: the first message of a run makes it "live"; EndRun() sets
// "ended" or "abnormal"; the Writer's destructor ends the runs it made live;
// a Writer opening a file whose runs are still "live" (their writer died)
// marks them "interrupted".
//
// Reader: read-only access for replay and listing; several may coexist with a
// live Writer (WAL).
//
// Thread-safety: Writer methods may be called from any thread. A Reader is
// used by one thread at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "telemetry/protocol.h"

namespace sy::store {

// PRAGMA user_version of a file this build writes. Older files are migrated on
// open by the Writer; newer ones are refused (FAILED_PRECONDITION).
inline constexpr int kSchemaVersion = 5;

struct WriterOptions {
  size_t queue_capacity = 200000;  // messages
  // Second bound on the queue: an estimate of the memory of the messages
  // waiting or being written (0: none); whichever bound is reached first
  // drops. The message count alone does not bound memory: at trace level
  // full one Spans message is ~10-20 KB, so 200000 of them could hold
  // gigabytes. 64 MiB holds seconds of full tracing at the engine's rate,
  // enough to ride out a slow commit or a checkpoint; a longer stall drops
  // rather than growing without limit.
  size_t queue_max_bytes = 64 << 20;
  int batch_max = 4096;  // messages per transaction
  int flush_ms = 200;    // longest a message waits before commit
  // Cap on the database size (0: none). Reaching it behaves exactly like a
  // full disk (RESOURCE_EXHAUSTED, writing stops), so it bounds the store and
  // lets tests exercise the disk-full path deterministically.
  int64_t max_file_bytes = 0;
  // Recorded in sessions.hosts: what this console connected to (e.g. the
  // telemetry endpoints, comma-separated). Every run this Writer records
  // belongs to one session row, created with the first such run.
  std::string session_hosts;
};

struct WriterCounters {
  // Items are messages, commands and EndRun calls.
  int64_t written = 0;  // items committed
  int64_t dropped = 0;  // queue full, lost in a failed transaction, or after writing stopped
  int64_t queued = 0;   // waiting or being written now
};

// An operator command sent by the console and what came back.
struct CommandRecord {
  std::string run;      // run id it was sent to ("" if none known yet)
  int64_t t_us = 0;     // engine time when known, else 0
  int64_t unix_ms = 0;  // console wall clock when sent
  std::string text;     // as typed, e.g. "trace full"
  std::string request;  // JSON sent
  bool ok = false;
  std::string reply;  // JSON received, or the client-side error text
};

class Writer {
 public:
  // Creates or migrates the file. UNAVAILABLE if it cannot be opened or
  // written; DATA_LOSS if it is not a SQLite database or not a Switchyard
  // store; FAILED_PRECONDITION if its schema is newer than this build or
  // another Writer has it open.
  static Result<std::unique_ptr<Writer>> Open(const std::string& path,
                                              const WriterOptions& options = {});
  // Drains the queue (committing it), marks the runs this Writer saw and
  // that are still live as "ended" (EndRun's verdict stands), closes the file.
  ~Writer();

  void Enqueue(telemetry::Message m);
  // Not bounded by queue_capacity or queue_max_bytes (operator actions are
  // rare and kept).
  void RecordCommand(CommandRecord c);
  // Marks a run ended abnormally (engine lost) or ended normally.
  void EndRun(const std::string& run, bool abnormal);
  // Blocks until everything enqueued so far is committed (or writing stopped).
  void Flush();
  WriterCounters counters() const;
  // OK, or the error that stopped writing (e.g. RESOURCE_EXHAUSTED: disk full).
  Status status() const;
  const std::string& path() const;

  class Impl;

 private:
  explicit Writer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

struct RunInfo {
  std::string id;
  int64_t started_unix_ms = 0;
  int64_t duration_us = 0;         // last message time seen
  std::string status;              // "live" | "ended" | "abnormal" | "interrupted"
  std::string model;               // preset name
  std::string arch;                // "moe" | "bailing_hybrid" ("" until the run's first Meta)
  int state_slots_per_device = 0;  // recurrent-state slots (hybrid models), else 0
  int devices = 0;
  int64_t steps = 0;
  int64_t requests = 0;
  int64_t spans = 0;
  int64_t created_unix_ms = 0;  // console wall clock when the store first saw the run
  int64_t ended_unix_ms = 0;    // 0 while live
  int64_t store_dropped = 0;    // messages of this run the Writer dropped (queue full)
  int64_t engine_dropped = 0;   // engine-side drops, from the latest Heartbeat
  // sessions.id of the console session (one Writer) that last recorded the
  // run; its sibling runs share it. 0 for runs recorded before schema v5.
  int64_t session_id = 0;
};

// An event or command as replay navigation names it.
struct EventMark {
  int64_t t_us = 0;
  std::string kind;     // the event's kind, or "command" for a recorded command
  std::string name;     // the event's name, or the command text as typed
  std::string phase;    // "" for commands: see `ok`
  std::string message;  // the event's message, or the command's reply
  bool ok = true;       // commands: whether it succeeded
  // Where it is stored (events or commands table) and its row there: with
  // t_us, the order in which NearestEvent steps through marks at one time.
  bool command = false;
  int64_t row = 0;
};

class Reader {
 public:
  // NOT_FOUND if the file does not exist; DATA_LOSS if it is not a Switchyard
  // store; FAILED_PRECONDITION for a newer schema.
  static Result<std::unique_ptr<Reader>> Open(const std::string& path);
  ~Reader();

  // Newest first.
  Result<std::vector<RunInfo>> ListRuns();
  Result<RunInfo> GetRun(const std::string& id);
  // Latest Meta stored for the run. NOT_FOUND if the run has none.
  Result<telemetry::Meta> GetMeta(const std::string& id);
  // Every stored message of the run with from_us <= t < to_us, as the
  // messages that were received, ordered by (t, topic order, seq).
  Result<std::vector<telemetry::Message>> Messages(const std::string& id, int64_t from_us,
                                                   int64_t to_us);
  // As Messages without the Spans messages (whose tables are not read):
  // the largest part of a full trace, which a reader rebuilding the state
  // at a point needs only for the last few steps (replay seeks).
  Result<std::vector<telemetry::Message>> MessagesWithoutSpans(const std::string& id,
                                                               int64_t from_us, int64_t to_us);
  Result<std::vector<CommandRecord>> Commands(const std::string& id);

  // Replay navigation; each is an indexed query (events and steps by
  // (run, t_us)), so its cost does not grow with the run's length.
  //
  // The nearest event of the run strictly after `t_us` (forward) or strictly
  // before it (backward), or nullopt if none: an operator command recorded
  // by the console with an engine time, or an event other than the frequent
  // kinds a reader steps over (`policy` decisions, `scheduler` retractions, a
  // rebalance's `planned` and per-`layer` phases, and the engine's own
  // `command` mirrors, which would name each recorded command twice more).
  // Marks at one time are ordered events first, then by row. Given `from`
  // (the mark last reached) with from->t_us == t_us, the marks after (before)
  // it at that same time count too, so stepping visits every mark once.
  Result<std::optional<EventMark>> NearestEvent(const std::string& id, int64_t t_us, bool forward,
                                                const EventMark* from = nullptr);
  // Engine time of the run's first stored step numbered >= `step` (steps
  // grow with time within a run, so this is a binary search over the
  // (run, t_us) index: ~log2(duration) probes). NOT_FOUND when the run has
  // no step that far.
  Result<int64_t> StepTime(const std::string& id, int64_t step);
  // The run's latest Meta with t <= t_us (the model and layout in force
  // then), or nullopt when none is stored that early. One indexed probe.
  Result<std::optional<telemetry::Meta>> MetaAt(const std::string& id, int64_t t_us);

  class Impl;

 private:
  explicit Reader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace sy::store
