// File: engine/sim/sim_moves.cc
//
// The SimRunner's between-step operations (sim_runner_impl.h): live expert
// moves, the TP <-> EP switch and re-homed state copies. Each keeps the CPU
// runner's contract and refusals (model_runner.h, expert_mover.cc,
// parallel_switch.cc) and, instead of copying bytes, prices them with the
// cost model and advances the VirtualClock by the serving pause.
#include <algorithm>
#include <cmath>
#include <string>

#include "engine/costmodel/kernels.h"
#include "engine/model_executor/parallel_switch.h"
#include "engine/sim/sim_runner_impl.h"

namespace sy::engine {

void SimRunner::Pause(double ms) { sim_.clock->Advance(std::llround(ms * 1e3)); }

double SimRunner::PageBytes() const {
  const costmodel::AttentionTerms a =
      costmodel::AttentionTermsOf(sim_.model, sim_.model.attention, 1);
  return double(options_.page_size) * config_.full_attention_layers() * a.kv_bytes_per_token;
}

double SimRunner::SlotBytes() const {
  if (config_.linear_layers() == 0) return 0;
  return double(config_.linear_layers()) * config_.state_floats_per_layer() *
         costmodel::kRecurrentStateBytes;
}

Status SimRunner::CheckLiveMoves() const {
  const bool has_moe = map_.first_moe() < map_.layers();
  if (!map_.uniform() || !has_moe) {
    int d = 0;
    while (d + 1 < map_.devices() && map_.device_slots(d) == map_.device_slots(0)) ++d;
    return FailedPrecondition(
        "live expert moves need a unified expert buffer on every device, and device " +
        std::to_string(d) + " has none (the devices hold unequal expert slot counts: " +
        std::to_string(map_.slots()) + " slots over " + std::to_string(map_.devices()) +
        " devices, or the model has no MoE layer)");
  }
  if (mode_ != ParallelMode::kEP) {
    return FailedPrecondition(
        "live expert moves need the experts in the EP layout; device 0 holds them in " +
        std::string(ParallelModeName(mode_)));
  }
  return Status::Ok();
}

Result<ExpertMoveStats> SimRunner::StageExpertLayer(int layer, const std::vector<int>& phy2log_row,
                                                    int64_t fail_after_bytes) {
  std::lock_guard<std::mutex> lk(mu_);
  const std::string what = "cannot stage layer " + std::to_string(layer) + ": ";
  if (staging_ == Staging::kStaged) {
    return FailedPrecondition(what + "layer " + std::to_string(staged_layer_) +
                              " is staged and not committed (commit or abort it first)");
  }
  if (staging_ == Staging::kPaused) {
    return FailedPrecondition(what + "a parallelism switch is in progress");
  }
  if (layer >= 0 && layer < map_.first_moe()) {
    return FailedPrecondition("layer " + std::to_string(layer) +
                              " is a dense layer: it has no routed experts to move");
  }
  RETURN_IF_ERROR(CheckLiveMoves());
  ExpertMap next = map_;
  RETURN_IF_ERROR(next.SetLayer(layer, phy2log_row));

  // ExpertMover::Stage's copies, priced: each changed slot reads its expert
  // from this device if it holds it (HBM read + write), else from the
  // expert's first replica (over the link). Devices copy in parallel.
  const int64_t expert_bytes = std::llround(pricer_.expert_bytes());
  const costmodel::KernelRates& r = pricer_.rates();
  ExpertMoveStats stats{.layer = layer};
  std::vector<int> changed(map_.devices(), 0);
  double slowest_s = 0;
  for (int d = 0; d < map_.devices(); ++d) {
    const int first = map_.device_first_slot(d), slots = map_.device_slots(d);
    double local = 0, peer = 0;
    for (int k = 0; k < slots; ++k) {
      const int e = next.phy2log(layer, first + k);
      if (map_.phy2log(layer, first + k) == e) continue;
      bool own = false;
      for (int j = 0; j < slots && !own; ++j) own = map_.phy2log(layer, first + j) == e;
      if (fail_after_bytes >= 0 && stats.bytes_copied + expert_bytes > fail_after_bytes) {
        return Unavailable("injected failure staging layer " + std::to_string(layer) + " after " +
                           std::to_string(fail_after_bytes) + " bytes");
      }
      stats.bytes_copied += expert_bytes;
      stats.experts_moved += 1;
      changed[d] += 1;
      if (own) {
        local += double(expert_bytes);
      } else {
        stats.peer_bytes += expert_bytes;
        peer += double(expert_bytes);
      }
    }
    const double s = 2 * local / r.hbm + costmodel::LinkSeconds(r, peer, 1.0) + peer / r.hbm;
    slowest_s = std::max(slowest_s, s);
  }
  stats.stage_ms = slowest_s * 1e3;  // overlaps serving: the clock does not move
  staging_ = Staging::kStaged;
  staged_layer_ = layer;
  staged_at_reshards_ = reshards_;
  staged_map_ = std::move(next);
  staged_slots_ = std::move(changed);
  staged_stats_ = stats;
  return stats;
}

Result<ExpertMoveStats> SimRunner::CommitExpertLayer(int layer) {
  std::lock_guard<std::mutex> lk(mu_);
  const std::string what = "cannot commit layer " + std::to_string(layer) + ": ";
  if (staging_ != Staging::kStaged) return FailedPrecondition(what + "no expert layer is staged");
  if (layer != staged_layer_) {
    return FailedPrecondition(what + "layer " + std::to_string(staged_layer_) +
                              " is the one staged");
  }
  Status ready = CheckLiveMoves();
  if (ready.ok() && reshards_ != staged_at_reshards_) {
    ready = FailedPrecondition(what +
                               "the expert buffers were resharded since it was staged "
                               "(the staging is lost; stage it again)");
  }
  if (!ready.ok()) {
    staging_ = Staging::kIdle;
    staged_layer_ = -1;
    staged_map_.reset();
    return ready;
  }
  // Each device copies its staged slots over the live ones (HBM read + write).
  const int most = *std::max_element(staged_slots_.begin(), staged_slots_.end());
  ExpertMoveStats stats = staged_stats_;
  stats.commit_ms = 2 * most * pricer_.expert_bytes() / pricer_.rates().hbm * 1e3;
  map_ = std::move(*staged_map_);
  staged_map_.reset();
  staging_ = Staging::kIdle;
  staged_layer_ = -1;
  Pause(stats.commit_ms);
  return stats;
}

void SimRunner::AbortStagedExpertLayer() {
  std::lock_guard<std::mutex> lk(mu_);
  if (staging_ != Staging::kStaged) return;
  staging_ = Staging::kIdle;
  staged_layer_ = -1;
  staged_map_.reset();
}

// The CPU runner's CheckSwitch for a runner without expert buffers, with one
// deliberate difference: an MHA model whose KV heads are fewer than the
// devices may go TP when kv_heads divides P (KvHeadSplit::kRepeat), as the
// cost model prices it and real TP serving does (the CPU runner refuses: its
// pools split KV heads evenly).
Status SimRunner::CheckSwitch() const {
  RETURN_IF_ERROR(CheckSwitchLayout(config_, map_, options_.devices, KvHeadSplit::kRepeat));
  if (!map_.uniform() || map_.first_moe() >= map_.layers()) {
    return FailedPrecondition(
        "cannot switch parallelism: device 0 has no unified expert buffer (the model has no MoE "
        "layer, or the devices hold unequal expert slot counts)");
  }
  return Status::Ok();
}

int SimRunner::AttentionDevices(ParallelMode mode) const {
  return mode == ParallelMode::kTP ? options_.devices : sim_.attention_tp;
}

int SimRunner::KvSplit(ParallelMode mode) const {
  return static_cast<int>(
      costmodel::AttentionTermsOf(sim_.model, sim_.model.attention, AttentionDevices(mode))
          .cache_split);
}

int SimRunner::KvCapacity(ParallelMode mode) const {
  // Each of the T attention devices holds 1/split of every page of the T
  // homes (split = the devices the cache is split over, as the step is
  // priced), so the same bytes per device hold split/T pages per home.
  const int64_t pages = options_.kv_pages_per_device;
  return std::max(1, static_cast<int>(pages * KvSplit(mode) / AttentionDevices(mode)));
}

std::vector<int> SimRunner::LayoutOverflowPages(ParallelMode target) const {
  const int cap = KvCapacity(target);
  std::vector<int> out(options_.devices, 0);
  for (int d = 0; d < options_.devices; ++d) out[d] = std::max(0, kv_[d]->used_pages() - cap);
  return out;
}

Status SimRunner::CheckLayoutCapacity(ParallelMode target) const {
  const int cap = KvCapacity(target), p = options_.devices, split = KvSplit(target);
  const int t = AttentionDevices(target);
  const std::string layout(ParallelModeName(target));
  for (int d = 0; d < p; ++d) {
    const int used = kv_[d]->used_pages();
    if (used <= cap) continue;
    std::string why;
    if (split < t) {
      why = " (attention over " + std::to_string(t) + " devices splits the KV cache over " +
            std::to_string(split) + ", so each of them holds a copy of 1/" + std::to_string(split) +
            " of every request's KV)";
    }
    return FailedPrecondition("the " + layout + " layout cannot hold the resident KV: device " +
                              std::to_string(d) + " uses " + std::to_string(used) +
                              " KV pages and " + layout + " holds " + std::to_string(cap) +
                              " per device" + why);
  }
  return Status::Ok();
}

Result<SwitchStats> SimRunner::SwitchParallelism(ParallelMode target, const FaultPlan* fault) {
  const ParallelMode from = mode_;
  if (from == target) return SwitchStats{.from = from, .to = target};
  RETURN_IF_ERROR(CheckSwitch());
  if (Status s = CheckLayoutCapacity(target); !s.ok()) {
    return FailedPrecondition("cannot switch parallelism: " + s.message());
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (staging_ == Staging::kStaged) {
      return FailedPrecondition("cannot switch parallelism: a rebalance is in progress: layer " +
                                std::to_string(staged_layer_) +
                                " is staged and not committed (commit or abort it first)");
    }
    staging_ = Staging::kPaused;
  }
  struct Resume {
    SimRunner* r;
    ~Resume() {
      std::lock_guard<std::mutex> lk(r->mu_);
      r->staging_ = Staging::kIdle;
    }
  } resume{this};
  const int p = options_.devices;
  const int shards = target == ParallelMode::kTP ? p : 1;
  // The pools must accept the target reading (state_reshard.cc CheckShardable).
  for (int d = 0; d < p; ++d) {
    const int kv_was = kv_[d]->shards(), st_was = state_[d]->shards();
    Status s = kv_[d]->SetShards(shards).WithContext("KV pool");
    if (s.ok()) s = state_[d]->SetShards(shards).WithContext("state pool");
    (void)kv_[d]->SetShards(kv_was);
    (void)state_[d]->SetShards(st_was);
    if (!s.ok()) return FailedPrecondition(s.message());
  }

  SwitchStats st{.from = from, .to = target};
  // Weights: the cost model's reshard (seed 003 eq. 9-11) at the sim's link efficiency.
  costmodel::ReshardCost w;  // one device: nothing moves
  if (p > 1) {
    ASSIGN_OR_RETURN(w, costmodel::EstimateReshard(sim_.hardware, sim_.model,
                                                   {.devices = p,
                                                    .weight_dtype = sim_.weight_dtype,
                                                    .link_efficiency = sim_.efficiency.link}));
  }
  const double weights_ms = w.time_s * 1e3;
  // State: each used page (slot) is split into P blocks, (P-1)/P of it
  // crossing the link; a device's time is max(sent, received).
  const double page = PageBytes(), slot = SlotBytes();
  std::vector<double> own(p);
  double all = 0;
  for (int d = 0; d < p; ++d) {
    own[d] = kv_[d]->used_pages() * page + state_[d]->used_slots() * slot;
    all += own[d];
    st.kv_pages += kv_[d]->used_pages();
    st.state_slots += state_[d]->used_slots();
  }
  double slowest = 0;
  for (int d = 0; d < p; ++d) {
    const double mine = own[d] * (p - 1) / p, others = (all - own[d]) / p;
    st.state_bytes += std::llround(target == ParallelMode::kTP ? mine : others);
    slowest = std::max(slowest, std::max(mine, others));
  }
  const double hop_per_byte = p > 1 ? pricer_.all_to_all_hops() * p / (p - 1) : 0;
  const double state_ms = costmodel::LinkSeconds(pricer_.rates(), slowest, hop_per_byte) * 1e3;
  const int moe_layers = map_.layers() - map_.first_moe();

  const bool fault_here =
      fault != nullptr && fault->rank >= 0 && fault->rank < p &&
      (fault->part == SwitchPart::kState || (fault->layer >= 0 && fault->layer < moe_layers));
  if (!fault_here) {
    st.layers = moe_layers;
    st.weights_ms = st.exchange_ms = weights_ms;
    st.bytes_moved = std::llround(w.bytes_moved * p);
    st.state_ms = state_ms;
    st.total_ms = weights_ms + state_ms;
    st.gbps = weights_ms > 0 ? st.bytes_moved / (weights_ms * 1e6) : 0;
    st.state_gbps = state_ms > 0 ? st.state_bytes / (state_ms * 1e6) : 0;
    for (int d = 0; d < p; ++d) {
      (void)kv_[d]->SetShards(shards);
      (void)state_[d]->SetShards(shards);
      (void)kv_[d]->SetCapacity(KvCapacity(target));  // checked above
    }
    mode_ = target;
    ++reshards_;
    last_switch_ = st;
    Pause(st.total_ms);
    return st;
  }
  // A failure part-way: what ran, then its inverse; every device stays in `from`.
  const std::string phase(ReshardPhaseName(fault->phase));
  const double phase_share = (static_cast<int>(fault->phase) + 1) / 3.0;
  Status failure;
  if (fault->part == SwitchPart::kWeights) {
    const double per_layer = weights_ms / moe_layers;
    st.weights_ms = st.exchange_ms = per_layer * (fault->layer + phase_share);
    st.rollback_ms = per_layer * fault->layer;
    st.bytes_moved = std::llround(w.bytes_moved * p * (fault->layer + phase_share) / moe_layers);
    failure =
        Unavailable("reshard " + std::string(ParallelModeName(from)) + "->" +
                    std::string(ParallelModeName(target)) + " failed at MoE layer " +
                    std::to_string(fault->layer) + ", phase " + phase + " (rank " +
                    std::to_string(fault->rank) + "); rolled back " + std::to_string(fault->layer) +
                    " converted layers, mode stays " + std::string(ParallelModeName(from)));
  } else {
    const bool placed = fault->phase == ReshardPhase::kPlace;
    st.weights_ms = st.exchange_ms = weights_ms;
    st.bytes_moved = std::llround(w.bytes_moved * p);
    st.state_ms = state_ms * phase_share;
    st.rollback_ms = weights_ms + (placed ? state_ms / 3 : 0);
    const char* state_phase = fault->phase == ReshardPhase::kPermute ? "pack" : phase.c_str();
    failure = Unavailable("state reshard " + std::string(ParallelModeName(from)) + "->" +
                          std::string(ParallelModeName(target)) + " failed in " + state_phase +
                          " (rank " + std::to_string(fault->rank) + "): injected fault; " +
                          (placed ? "rolled back, " : "nothing placed, ") +
                          "every used page and slot as before, the pools stay in the " +
                          std::string(ParallelModeName(from)) + " reading");
  }
  st.total_ms = st.weights_ms + st.state_ms + st.rollback_ms;
  st.gbps = st.weights_ms > 0 ? st.bytes_moved / (st.weights_ms * 1e6) : 0;
  st.state_gbps = st.state_ms > 0 ? st.state_bytes / (st.state_ms * 1e6) : 0;
  st.rolled_back = true;
  last_switch_ = st;
  Pause(st.total_ms);
  return failure;
}

Status SimRunner::MoveRequestState(const std::vector<StateMove>& moves) {
  const int p = options_.devices;
  // The CPU runner's refusals (parallel_switch.h); pools are per-device equal.
  RETURN_IF_ERROR(
      CheckStateMoves(moves, p, kv_[0]->num_pages(), state_.empty() ? 0 : state_[0]->slots()));
  // EP: whole pages and slots cross the link from the old home to the new;
  // TP: every device copies its block locally (HBM read + write).
  const double page = PageBytes(), slot = SlotBytes();
  std::vector<double> sent(p, 0), received(p, 0);
  double local = 0;
  for (const StateMove& m : moves) {
    const double bytes = m.from_pages.size() * page + (m.from_slot >= 0 ? slot : 0);
    if (m.from == m.to) continue;
    sent[m.from] += bytes;
    received[m.to] += bytes;
    local += bytes / p;
  }
  double seconds = 0;
  if (mode_ == ParallelMode::kTP) {
    seconds = 2 * local / pricer_.rates().hbm;
  } else {
    for (int d = 0; d < p; ++d) {
      seconds = std::max(
          seconds, costmodel::LinkSeconds(pricer_.rates(), std::max(sent[d], received[d]), 1.0));
    }
  }
  Pause(seconds * 1e3);
  return Status::Ok();
}

}  // namespace sy::engine
