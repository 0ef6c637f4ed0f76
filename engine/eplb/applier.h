// File: engine/eplb/applier.h
//
// RebalanceApplier: moves expert weights to a planned placement while the
// engine keeps serving (issue 6 "Live rebalance"; SGLang's expert location
// updater, made incremental). A background stager thread copies one layer's
// new expert weights into every device's staging slot
// (ModelRunner::StageExpertLayer) while steps run; the engine loop calls
// Poll() at each step boundary, which commits at most one staged layer
// (ModelRunner::CommitExpertLayer: one layer's copy, the only pause serving
// sees) and then lets the stager go on to the next layer.
//
//   RebalanceApplier applier(runner);             // runner outlives the applier
//   RETURN_IF_ERROR(applier.Start(plan));         // FAILED_PRECONDITION while busy
//   loop: ... runner->Step(...) ...
//         for (const ApplierEvent& ev : applier.Poll()) publish(ev);
//
// Failure (seed 003 §11 W5's rule, applied to rebalancing): when staging a
// layer fails (or a commit does), the layers already committed are moved
// back to their old rows the same way (stage, commit, last first), so the
// placement ends as it began and outputs never depend on the attempt. A
// failure of the rollback itself is reported and leaves a valid (mixed)
// placement: every row is a complete placement of its own.
//
// Outputs never change: replicas are exact copies and a row swap happens
// between steps.
//
// Thread-safety: Start, Poll, busy and the destructor on the runner thread
// (the one that calls Step); the stager thread is private. The destructor
// stops the stager and drops a staged, uncommitted layer.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "engine/eplb/rebalance_plan.h"
#include "engine/model_executor/model_runner.h"

namespace sy::engine::eplb {

// Test hook: staging `layer` fails after copying `after_bytes` bytes.
struct ApplierFault {
  int layer = 0;
  int64_t after_bytes = 0;
};

struct ApplierEvent {
  enum class Kind { kLayer, kDone, kFailed };
  Kind kind = Kind::kLayer;
  ExpertMoveStats layer = {};  // kLayer: the committed layer
  // kDone / kFailed: totals over the layers committed toward the plan.
  int layers = 0;
  int experts_moved = 0;
  int64_t bytes = 0;
  double longest_pause_ms = 0;  // the longest single commit
  double total_ms = 0;          // Start to the last commit
  // kFailed: where and why, and whether the old placement is back.
  int failed_layer = -1;
  std::string error = {};
  bool rolled_back = false;
  bool rollback = false;  // kLayer: this commit restored an old row
};

class RebalanceApplier {
 public:
  explicit RebalanceApplier(ModelRunner* runner);
  ~RebalanceApplier();
  RebalanceApplier(const RebalanceApplier&) = delete;
  RebalanceApplier& operator=(const RebalanceApplier&) = delete;

  // Starts moving to plan.phy2log, the changed layers in ascending order.
  // FAILED_PRECONDITION while a rebalance is in progress; OK and an
  // immediate kDone from the next Poll when no layer changes.
  Status Start(const RebalancePlan& plan, std::optional<ApplierFault> fault = std::nullopt);
  // Commits the staged layer if there is one and reports what finished
  // since the last call. Cheap when idle.
  std::vector<ApplierEvent> Poll();
  bool busy() const { return active_; }

 private:
  struct Move {
    int layer = 0;
    std::vector<int> row;
    bool rollback = false;
  };
  void StagerLoop();
  // Stages one move and waits until Poll committed it; false on failure.
  bool StageAndWait(const Move& m, int64_t fail_after_bytes, std::string* error);
  void Finish(ApplierEvent ev);

  ModelRunner* const runner_;
  bool active_ = false;  // runner thread only
  std::vector<Move> moves_;
  std::vector<std::vector<int>> old_rows_;  // [layer]: rows before Start
  std::optional<ApplierFault> fault_;
  std::thread stager_;

  std::mutex mu_;
  std::condition_variable cv_;
  // Guarded by mu_.
  bool staged_ = false;     // a layer is staged and waits for Poll
  bool committed_ = false;  // Poll committed it (the stager may go on)
  bool commit_failed_ = false;
  std::string commit_error_;
  bool abort_ = false;
  std::vector<ApplierEvent> events_;
  ExpertMoveStats staged_stats_;
  int staged_layer_ = -1;
  bool staged_rollback_ = false;
  double longest_pause_ms_ = 0;
  int layers_done_ = 0;
  int experts_moved_ = 0;
  int64_t bytes_ = 0;
  int64_t start_us_ = 0;
  bool finished_ = false;
};

}  // namespace sy::engine::eplb
