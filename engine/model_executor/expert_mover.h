// File: engine/model_executor/expert_mover.h
//
// ExpertMover: the runner side of a live expert rebalance, one MoE layer at
// a time (ModelRunner::StageExpertLayer / CommitExpertLayer /
// AbortStagedExpertLayer implement their contract with it). It owns the
// "at most one layer staged" state and moves expert weights between the
// devices' UnifiedExpertBuffers:
//
//   Stage(l, row)   for each device d, each local slot k whose expert changes
//                   in the new row: copy that expert [gate_up | down] into
//                   d's staging slot k (the buffer's EP spare), from d's own
//                   live slot of layer l if d holds the expert now, else from
//                   the live slot of its first replica (a peer's memory:
//                   peer_bytes). Slots that keep their expert are neither
//                   staged nor copied again.
//   Commit(l)       each device copies its staged slots over its live slots
//                   of layer l (addresses unchanged: the EP MoE layer's views
//                   stay valid), then the map's row l is replaced.
//
// Stage only reads live slots and the map and only writes staging slots, so
// it may run on any thread while the device workers run a step (which read
// the live slots and the map, and never the staging slots). Commit writes
// live slots and the map: runner thread, between steps.
//
// Thread-safety: Stage on any one thread at a time; Commit, Abort on the
// runner thread. The state is guarded by a mutex held only briefly in Stage
// (its copies run unlocked) and for the whole of Commit. A TP/EP reshard of
// the buffers must not overlap Stage; one between Stage and Commit is
// detected (UnifiedExpertBuffer::reshards) and fails the Commit.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

#include "base/status.h"
#include "engine/model_executor/model_runner.h"
#include "engine/moe/expert_map.h"
#include "engine/parallelism/expert_buffer.h"

namespace sy::engine {

class ExpertMover {
 public:
  // `map`: the runner's live placement, changed only by Commit. `buffers`:
  // one per device, null where the device has none. Both outlive the mover.
  ExpertMover(ExpertMap* map, std::vector<UnifiedExpertBuffer*> buffers);

  // ModelRunner::StageExpertLayer.
  Result<ExpertMoveStats> Stage(int layer, const std::vector<int>& phy2log_row,
                                int64_t fail_after_bytes);
  // ModelRunner::CommitExpertLayer.
  Result<ExpertMoveStats> Commit(int layer);
  // ModelRunner::AbortStagedExpertLayer; a Stage in progress on another
  // thread stops at its next expert and returns UNAVAILABLE "... aborted".
  void Abort();

  // Runner thread: holds off live moves for a TP/EP switch (a reshard must
  // not overlap a Stage, and overwrites the staging slots). FAILED_PRECONDITION
  // "a rebalance is in progress: ..." when a layer is being staged or is
  // staged; else OK, and Stage refuses until Resume().
  Status Pause();
  void Resume();

 private:
  enum class State { kIdle, kStaging, kStaged, kPaused };
  // FAILED_PRECONDITION unless every device has a buffer in EP mode.
  Status CheckBuffers() const;

  ExpertMap* const map_;
  const std::vector<UnifiedExpertBuffer*> buffers_;
  std::atomic<bool> cancel_{false};

  std::mutex mu_;
  // Guarded by mu_.
  State state_ = State::kIdle;
  int layer_ = -1;
  std::optional<ExpertMap> next_;          // the map after the staged layer's commit
  std::vector<std::vector<int>> changed_;  // per device: staged local slots
  std::vector<uint64_t> reshards_;         // per device: buffer reshards() at staging
  ExpertMoveStats stats_;
};

}  // namespace sy::engine
