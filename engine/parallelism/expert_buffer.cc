#include "engine/parallelism/expert_buffer.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <chrono>
#include <cstring>
#include <limits>
#include <new>
#include <string>

#include "base/stopwatch.h"

namespace sy::engine {

namespace {

using Clock = SteadyClock;
constexpr std::align_val_t kAlign{64};

void Copy(float* dst, const float* src, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void Poison(float* dst, int64_t n) {
  std::fill(dst, dst + n, std::numeric_limits<float>::quiet_NaN());
}

}  // namespace

std::string_view ParallelModeName(ParallelMode mode) {
  return mode == ParallelMode::kEP ? "EP" : "TP";
}

std::string_view SwitchPartName(SwitchPart part) {
  return part == SwitchPart::kWeights ? "weights" : "state";
}

std::string_view ReshardPhaseName(ReshardPhase phase) {
  switch (phase) {
    case ReshardPhase::kPermute:
      return "permute";
    case ReshardPhase::kExchange:
      return "exchange";
    case ReshardPhase::kPlace:
      return "place";
  }
  return "?";
}

void UnifiedExpertBuffer::AlignedFree::operator()(float* p) const {
  ::operator delete[](p, kAlign);
}

Status UnifiedExpertBuffer::CheckShape(int experts, int inter, int hidden, int devices) {
  if (experts < 1 || inter < 1 || hidden < 1 || devices < 1) {
    return InvalidArgument("unified expert buffer: experts (" + std::to_string(experts) +
                           "), expert_inter (" + std::to_string(inter) + "), hidden (" +
                           std::to_string(hidden) + ") and devices (" + std::to_string(devices) +
                           ") must all be >= 1");
  }
  if (experts % devices != 0) {
    return InvalidArgument("unified expert buffer: devices (P=" + std::to_string(devices) +
                           ") must divide experts (E=" + std::to_string(experts) + ")");
  }
  if (inter % devices != 0) {
    return InvalidArgument("unified expert buffer: devices (P=" + std::to_string(devices) +
                           ") must divide expert_inter (I=" + std::to_string(inter) + ")");
  }
  return Status::Ok();
}

Status UnifiedExpertBuffer::CheckMap(const ExpertMap& map, int inter, int hidden) {
  if (inter < 1 || hidden < 1) {
    return InvalidArgument("unified expert buffer: expert_inter (" + std::to_string(inter) +
                           ") and hidden (" + std::to_string(hidden) + ") must be >= 1");
  }
  for (int d = 0; d < map.devices(); ++d) {
    if (map.device_slots(d) != map.device_slots(0) || map.device_slots(d) < 1) {
      return InvalidArgument("unified expert buffer: device " + std::to_string(d) + " holds " +
                             std::to_string(map.device_slots(d)) + " expert slots, device 0 " +
                             std::to_string(map.device_slots(0)) +
                             " (every device needs the same number, at least one)");
    }
  }
  return Status::Ok();
}

UnifiedExpertBuffer::UnifiedExpertBuffer(int rank, const ExpertMap& map, int inter, int hidden,
                                         int layers)
    : rank_(rank),
      devices_(map.devices()),
      experts_(map.experts()),
      inter_(inter),
      hidden_(hidden),
      layers_(layers),
      slots_(map.device_slots(rank)),
      shard_(inter % map.devices() == 0 ? inter / map.devices() : 0),
      ep_expert_(3LL * inter * hidden),
      chunk_(3LL * shard_ * hidden),
      slot_floats_(static_cast<int64_t>(slots_) * ep_expert_) {
  if (Status s = CheckShape(experts_, inter, hidden, devices_); !s.ok()) {
    tp_refusal_ = s.message();
  } else if (map.slots() != experts_) {
    tp_refusal_ =
        "unified expert buffer: the TP layout needs one slot per expert, but the map has " +
        std::to_string(map.slots()) + " slots for " + std::to_string(experts_) +
        " experts (redundant experts)";
  }
  owned_.resize(layers_);
  for (int i = 0; i < layers_; ++i) {
    for (int d = 0; d < devices_; ++d)
      owned_[i].push_back(map.LocalExperts(map.first_moe() + i, d));
  }
  const size_t total = static_cast<size_t>(layers_ + 1) * static_cast<size_t>(slot_floats_);
  storage_.reset(static_cast<float*>(::operator new[](total * sizeof(float), kAlign)));
  std::fill(storage_.get(), storage_.get() + total, 0.0f);
  // Every peer pair moves exactly E/P chunks per layer in either direction.
  const size_t per_peer = tp_refusal_.empty() ? static_cast<size_t>(slot_floats_ / devices_) : 0;
  send_.resize(devices_);
  recv_.resize(devices_);
  for (int d = 0; d < devices_; ++d) {
    send_[d].reserve(per_peer);
    recv_[d].reserve(per_peer);
  }
  vote_.reserve(devices_);
}

Result<std::unique_ptr<UnifiedExpertBuffer>> UnifiedExpertBuffer::Create(
    int rank, const ExpertMap& map, int inter, int hidden, std::span<LayerWeights> moe_layers) {
  const int p = map.devices(), e_count = map.experts();
  RETURN_IF_ERROR(CheckMap(map, inter, hidden));
  if (rank < 0 || rank >= p) {
    return InvalidArgument("unified expert buffer: rank " + std::to_string(rank) + " outside [0, " +
                           std::to_string(p) + ")");
  }
  const int first = map.first_moe();
  if (static_cast<int>(moe_layers.size()) != map.layers() - first) {
    return InvalidArgument("unified expert buffer: " + std::to_string(moe_layers.size()) +
                           " MoE layers given, the map has " +
                           std::to_string(map.layers() - first));
  }
  const size_t gu = static_cast<size_t>(hidden) * 2 * inter,
               dn = static_cast<size_t>(inter) * hidden;
  for (size_t i = 0; i < moe_layers.size(); ++i) {
    const LayerWeights& w = moe_layers[i];
    if (static_cast<int>(w.experts.size()) != e_count) {
      return InvalidArgument("unified expert buffer: MoE layer " + std::to_string(i) + " has " +
                             std::to_string(w.experts.size()) + " experts, the map has " +
                             std::to_string(e_count));
    }
    for (int e : map.LocalExperts(first + static_cast<int>(i), rank)) {
      const SwigluWeights& x = w.experts[e];
      if (x.inter != inter || x.in != hidden || x.gate_up.size() != gu || x.down.size() != dn) {
        return InvalidArgument("unified expert buffer: MoE layer " + std::to_string(i) +
                               " local expert " + std::to_string(e) +
                               " is missing or not [H x 2I | I x H] with H=" +
                               std::to_string(hidden) + ", I=" + std::to_string(inter));
      }
    }
  }
  std::unique_ptr<UnifiedExpertBuffer> buf(
      new UnifiedExpertBuffer(rank, map, inter, hidden, static_cast<int>(moe_layers.size())));
  for (size_t i = 0; i < moe_layers.size(); ++i) {
    float* s = buf->slot(static_cast<int>(i) + 1);
    const std::vector<int>& local = buf->owned_[i][rank];
    for (size_t k = 0; k < local.size(); ++k) {
      const SwigluWeights& x = moe_layers[i].experts[local[k]];
      float* dst = s + static_cast<int64_t>(k) * buf->ep_expert_;
      Copy(dst, x.gate_up.data(), static_cast<int64_t>(gu));
      Copy(dst + gu, x.down.data(), static_cast<int64_t>(dn));
    }
    // Free now, layer by layer: the weights live only in the buffer from
    // here on (also experts built for this device's slots of other layers).
    for (SwigluWeights& x : moe_layers[i].experts) {
      std::vector<float>().swap(x.gate_up);
      std::vector<float>().swap(x.down);
      x.inter = 0;
    }
  }
  return buf;
}

float* UnifiedExpertBuffer::StagingExpert(int local_index) {
  assert(mode_ == ParallelMode::kEP && local_index >= 0 && local_index < slots_);
  return slot(0) + local_index * ep_expert_;
}

void UnifiedExpertBuffer::CommitStaged(int layer, std::span<const int> local_indices,
                                       const ExpertMap& map) {
  assert(mode_ == ParallelMode::kEP && layer >= 0 && layer < layers_);
  float* live = slot(layer + 1);
  for (int k : local_indices) {
    assert(k >= 0 && k < slots_);
    Copy(live + k * ep_expert_, slot(0) + k * ep_expert_, ep_expert_);
  }
  for (int d = 0; d < devices_; ++d)
    owned_[layer][d] = map.LocalExperts(map.first_moe() + layer, d);
}

int64_t UnifiedExpertBuffer::scratch_bytes() const {
  int64_t n = 0;
  for (const auto& v : send_) n += static_cast<int64_t>(v.capacity());
  for (const auto& v : recv_) n += static_cast<int64_t>(v.capacity());
  n += static_cast<int64_t>(vote_.capacity());
  return n * static_cast<int64_t>(sizeof(float));
}

EpExpertView UnifiedExpertBuffer::EpExpert(int layer, int local_index) const {
  assert(mode_ == ParallelMode::kEP && layer >= 0 && layer < layers_);
  assert(local_index >= 0 && local_index < slots_);
  const float* e = slot(layer + 1) + local_index * ep_expert_;
  return {.gate_up = e, .down = e + 2LL * hidden_ * inter_};
}

TpExpertView UnifiedExpertBuffer::TpExpert(int layer, int expert) const {
  assert(mode_ == ParallelMode::kTP && layer >= 0 && layer < layers_);
  assert(expert >= 0 && expert < experts_);
  const float* e = slot(layer) + expert * chunk_;
  return {.gate_up = e, .down = e + 2LL * hidden_ * shard_, .inter_shard = shard_};
}

uint64_t UnifiedExpertBuffer::Checksum(ParallelMode layout) const {
  const int first = layout == ParallelMode::kEP ? 1 : 0;
  const float* p = slot(first);
  const int64_t n = static_cast<int64_t>(layers_) * slot_floats_;
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a offset basis, one 32-bit word per step
  for (int64_t i = 0; i < n; ++i) {
    h ^= std::bit_cast<uint32_t>(p[i]);
    h *= 0x100000001b3ULL;
  }
  return h;
}

// EP->TP: for each peer p, each local expert's shard p in TP expert format.
// TP->EP: for each peer p, the TP chunks of the experts p owns, in its order.
void UnifiedExpertBuffer::Permute(Direction dir, int layer, bool fail_halfway) {
  const int peers = fail_halfway ? devices_ / 2 : devices_;
  const int64_t s = shard_, two_i = 2LL * inter_, h = hidden_;
  for (int p = 0; p < devices_; ++p) send_[p].clear();
  for (int p = 0; p < peers; ++p) {
    if (dir == Direction::kEpToTp) {
      const float* src = slot(layer + 1);
      const std::vector<int>& mine = owned_[layer][rank_];
      send_[p].resize(mine.size() * chunk_);
      for (size_t k = 0; k < mine.size(); ++k) {
        const float* gu = src + k * ep_expert_;
        const float* dn = gu + h * two_i;
        float* dst = send_[p].data() + k * chunk_;
        for (int64_t r = 0; r < h; ++r) {
          Copy(dst + r * 2 * s, gu + r * two_i + p * s, s);               // gate columns
          Copy(dst + r * 2 * s + s, gu + r * two_i + inter_ + p * s, s);  // up columns
        }
        Copy(dst + h * 2 * s, dn + p * s * h, s * h);  // down rows
      }
    } else {
      const float* src = slot(layer);
      const std::vector<int>& theirs = owned_[layer][p];
      send_[p].resize(theirs.size() * chunk_);
      for (size_t k = 0; k < theirs.size(); ++k) {
        Copy(send_[p].data() + k * chunk_, src + theirs[k] * chunk_, chunk_);
      }
    }
  }
}

// Returns false when a received payload has the wrong size (nothing written).
bool UnifiedExpertBuffer::Place(Direction dir, int layer, bool torn) {
  for (int q = 0; q < devices_; ++q) {
    const size_t want =
        (dir == Direction::kEpToTp ? owned_[layer][q] : owned_[layer][rank_]).size() * chunk_;
    if (recv_[q].size() != want) return false;
  }
  const int64_t s = shard_, two_i = 2LL * inter_, h = hidden_;
  float* dst_slot = slot(dir == Direction::kEpToTp ? layer : layer + 1);
  const int sources = torn ? devices_ / 2 : devices_;
  for (int q = 0; q < sources; ++q) {
    if (dir == Direction::kEpToTp) {
      // Direct placement: chunk k from rank q is expert owned_[q][k]'s shard, already TP-shaped.
      const std::vector<int>& ids = owned_[layer][q];
      for (size_t k = 0; k < ids.size(); ++k) {
        Copy(dst_slot + ids[k] * chunk_, recv_[q].data() + k * chunk_, chunk_);
      }
    } else {
      // Local interleave: rank q's chunk of local expert k is intermediate shard q.
      for (size_t k = 0; k < owned_[layer][rank_].size(); ++k) {
        const float* c = recv_[q].data() + k * chunk_;
        float* gu = dst_slot + k * ep_expert_;
        float* dn = gu + h * two_i;
        for (int64_t r = 0; r < h; ++r) {
          Copy(gu + r * two_i + q * s, c + r * 2 * s, s);
          Copy(gu + r * two_i + inter_ + q * s, c + r * 2 * s + s, s);
        }
        Copy(dn + q * s * h, c + h * 2 * s, s * h);
      }
    }
  }
  if (torn) {
    // The rest of the destination is torn; only a rollback can make it whole.
    if (dir == Direction::kEpToTp) {
      for (int q = sources; q < devices_; ++q) {
        for (int id : owned_[layer][q]) Poison(dst_slot + id * chunk_, chunk_);
      }
    } else {
      for (size_t k = 0; k < owned_[layer][rank_].size(); ++k) {
        for (int q = sources; q < devices_; ++q) {
          float* gu = dst_slot + k * ep_expert_;
          for (int64_t r = 0; r < h; ++r) Poison(gu + r * two_i + q * s, s);
          Poison(gu + h * two_i + q * s * h, s * h);
        }
      }
    }
  }
  return true;
}

int UnifiedExpertBuffer::Vote(Communicator* comm, bool failed, SpanRecorder* rec, int layer,
                              ReshardStats* stats) {
  const Clock::time_point t0 = Clock::now();
  vote_.assign(devices_, 0.0f);
  vote_[rank_] = failed ? 1.0f : 0.0f;
  comm->AllReduceSum(rank_, &vote_, rec, "reshard_vote", layer);
  stats->vote_ms += MsSince(t0);
  for (int d = 0; d < devices_; ++d) {
    if (vote_[d] != 0.0f) return d;
  }
  return -1;
}

bool UnifiedExpertBuffer::ConvertLayer(Direction dir, int layer, Communicator* comm,
                                       const FaultPlan* fault, SpanRecorder* rec,
                                       ReshardStats* stats, Failure* failure) {
  auto fails_at = [&](ReshardPhase ph) {
    return fault != nullptr && fault->part == SwitchPart::kWeights && fault->rank == rank_ &&
           fault->layer == layer && fault->phase == ph;
  };
  auto voted_ok = [&](bool failed, ReshardPhase ph) {
    const int who = Vote(comm, failed, rec, layer, stats);
    if (who < 0) return true;
    *failure = {.layer = layer, .phase = ph, .rank = who};
    return false;
  };

  Clock::time_point t0 = Clock::now();
  {
    SpanRecorder::Scope span(rec, "reshard_permute", layer, 0, 0, 2 * slot_bytes());
    Permute(dir, layer, fails_at(ReshardPhase::kPermute));
  }
  stats->permute_ms += MsSince(t0);
  if (!voted_ok(fails_at(ReshardPhase::kPermute), ReshardPhase::kPermute)) return false;

  t0 = Clock::now();
  comm->AllToAll(rank_, send_, &recv_, rec, "reshard_exchange", layer);
  for (int p = 0; p < devices_; ++p) {
    if (p != rank_) stats->bytes_sent += static_cast<int64_t>(send_[p].size() * sizeof(float));
  }
  bool failed = fails_at(ReshardPhase::kExchange);
  if (failed) {
    for (auto& v : recv_) Poison(v.data(), static_cast<int64_t>(v.size()));
  }
  stats->exchange_ms += MsSince(t0);
  if (!voted_ok(failed, ReshardPhase::kExchange)) return false;

  t0 = Clock::now();
  {
    SpanRecorder::Scope span(rec, "reshard_place", layer, 0, 0, 2 * slot_bytes());
    const bool torn = fails_at(ReshardPhase::kPlace);
    failed = !Place(dir, layer, torn) || torn;
  }
  stats->place_ms += MsSince(t0);
  return voted_ok(failed, ReshardPhase::kPlace);
}

Result<ReshardStats> UnifiedExpertBuffer::Reshard(ParallelMode target, Communicator* comm,
                                                  const FaultPlan* fault, SpanRecorder* rec) {
  assert(comm->size() == devices_);
  const Clock::time_point start = Clock::now();
  ReshardStats stats{.from = mode_, .to = target};
  last_ = stats;
  // The same answer on every rank (one map), so no rank waits in a collective.
  if (!tp_refusal_.empty()) {
    return FailedPrecondition("reshard to " + std::string(ParallelModeName(target)) + ": " +
                              tp_refusal_ + "; the buffer serves EP only");
  }
  // Agreement first: each rank contributes (mode, target) as one small integer.
  vote_.assign(devices_, 0.0f);
  vote_[rank_] = static_cast<float>(1 + 2 * static_cast<int>(mode_) + static_cast<int>(target));
  comm->AllReduceSum(rank_, &vote_, rec, "reshard_vote", -1);
  for (int d = 0; d < devices_; ++d) {
    if (vote_[d] != vote_[rank_]) {
      return FailedPrecondition("reshard to " + std::string(ParallelModeName(target)) +
                                ": ranks disagree on the current or target mode (rank " +
                                std::to_string(d) + " differs from rank " + std::to_string(rank_) +
                                "); nothing moved");
    }
  }
  if (target == mode_) {
    stats.total_ms = MsSince(start);
    last_ = stats;
    return stats;
  }

  ++reshards_;  // from here on the spare is overwritten
  const Direction dir = target == ParallelMode::kTP ? Direction::kEpToTp : Direction::kTpToEp;
  const Direction inverse = dir == Direction::kEpToTp ? Direction::kTpToEp : Direction::kEpToTp;
  Failure failure;
  int done = 0;
  // EP->TP ascends (slot i+1 -> i), TP->EP descends (slot i -> i+1): each
  // destination is the slot the previous layer just vacated, or the spare.
  for (int n = 0; n < layers_; ++n) {
    const int layer = dir == Direction::kEpToTp ? n : layers_ - 1 - n;
    if (!ConvertLayer(dir, layer, comm, fault, rec, &stats, &failure)) break;
    ++done;
  }
  if (done == layers_) {
    mode_ = target;
    stats.layers = done;
    stats.total_ms = MsSince(start);
    last_ = stats;
    return stats;
  }

  // Roll back the converted layers, newest first, with the inverse transform.
  const Clock::time_point t0 = Clock::now();
  for (int n = done - 1; n >= 0; --n) {
    const int layer = dir == Direction::kEpToTp ? n : layers_ - 1 - n;
    Failure unused;
    const bool ok = ConvertLayer(inverse, layer, comm, nullptr, rec, &stats, &unused);
    assert(ok && "a rollback without injected faults cannot fail in process");
    (void)ok;
  }
  stats.rollback_ms = MsSince(t0);
  stats.total_ms = MsSince(start);
  last_ = stats;
  return Unavailable("reshard " + std::string(ParallelModeName(stats.from)) + "->" +
                     std::string(ParallelModeName(target)) + " failed at MoE layer " +
                     std::to_string(failure.layer) + ", phase " +
                     std::string(ReshardPhaseName(failure.phase)) + " (rank " +
                     std::to_string(failure.rank) + "); rolled back " + std::to_string(done) +
                     " converted layers, mode stays " + std::string(ParallelModeName(mode_)));
}

}  // namespace sy::engine
