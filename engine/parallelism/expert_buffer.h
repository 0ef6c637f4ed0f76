// File: engine/parallelism/expert_buffer.h
//
// UnifiedExpertBuffer: one device's routed-expert weights of every MoE layer
// in ONE fixed allocation that is read either as the expert-parallel (EP) or
// the tensor-parallel (TP) layout, and resharded between the two in place
// (Moebius, seed 003 §2, §3 Algorithms 1 and 2, §5 offset-by-one aliasing).
//
//   slots:   [ 0 ] [ 1 ] [ 2 ] ... [ L ]          L = MoE layers, each slot
//   EP:      spare  l0    l1   ...  l(L-1)        slot_floats = (E/P)*3*I*H
//   TP:      l0     l1    l2   ...  spare         (volume invariant, eq. 6)
//
// EP alias, slot i+1 = MoE layer i: this device's local experts (ExpertLayout
// order, ascending ids), each [gate_up H x 2I | down I x H] exactly as
// SwigluWeights stores them, so EpMoeLayer reads them in place (EpExpert).
// TP alias, slot i = MoE layer i: all E experts in id order, each rank r's
// intermediate shard (s = I/P): [gate_up_r H x 2s: per row the gate columns
// [r*s, (r+1)*s) then the up columns I + [r*s, (r+1)*s) | down_r s x H: down
// rows [r*s, (r+1)*s)] (TpExpert). Both aliases are pointer arithmetic into
// the same allocation: addresses never change, so whatever captured them
// (a CUDA graph on real hardware) stays valid across switches.
//
// Reshard EP->TP runs layer i = 0..L-1 from slot i+1 into slot i (the slot
// layer i-1 has just vacated, or the EP spare); TP->EP runs i = L-1..0 from
// slot i into slot i+1. Per layer: permute (EP: pack each local expert's
// shard p for peer p; TP: pack the chunks of the experts peer p owns),
// exchange (Communicator::AllToAll), place (EP->TP: each received chunk is a
// TP expert, copied to its id's place; TP->EP: interleave the P shards back
// into full experts). Every rank votes after every phase (an AllReduceSum of
// one flag per rank), so a failure on one rank stops all of them at the same
// point; each then runs the inverse transformation over the layers it has
// already converted, restoring the active slots bit for bit (seed §11 W5),
// and returns UNAVAILABLE naming the layer, the phase and the failed rank.
// The spare slot's contents are unspecified at all times.
//
// Memory: bytes() = (L + 1) * slot_bytes(), i.e. exactly one slot more than
// the weights. The AllToAll payloads are separate: Communicator takes
// std::vector buffers, so the in-process transport needs its own send/recv
// scratch (as NCCL owns its channel buffers), one layer's worth each way,
// reserved at creation and never grown (scratch_bytes()).
//
//   auto buf = UnifiedExpertBuffer::Create(rank, layout, I, H, moe_layers);
//   // on every rank's thread, together:
//   Result<ReshardStats> s = (*buf)->Reshard(ParallelMode::kTP, &comm);
//
// Thread-safety: one instance per rank. Reshard is a collective: all P ranks
// call it together, each on its own thread, and nothing may read the expert
// weights of that rank while it runs. Accessors are const and may be called
// from the rank's thread between reshards.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "engine/distributed/communicator.h"
#include "engine/model/weights.h"
#include "engine/moe/layout.h"
#include "engine/trace/span_recorder.h"

namespace sy::engine {

enum class ParallelMode { kEP, kTP };
// "EP" | "TP".
std::string_view ParallelModeName(ParallelMode mode);

enum class ReshardPhase { kPermute, kExchange, kPlace };
// "permute" | "exchange" | "place".
std::string_view ReshardPhaseName(ReshardPhase phase);

// A simulated failure for tests of failure atomicity: rank `rank` fails in
// `phase` of MoE layer `layer` of the reshard it is passed to. permute: the
// rank stops packing halfway; exchange: the rank's AllToAll returns (it
// joined the rendezvous) but its payload is reported corrupt and poisoned
// with NaN; place: the rank writes half of its chunks, poisons the rest of
// the destination slot with NaN (a torn write) and stops.
struct FaultPlan {
  int rank = 0;
  int layer = 0;  // MoE layer index in [0, L)
  ReshardPhase phase = ReshardPhase::kPermute;
};

// One switch event on one rank. Times are wall clock, summed over layers.
struct ReshardStats {
  ParallelMode from = ParallelMode::kEP;
  ParallelMode to = ParallelMode::kEP;
  int layers = 0;          // layers converted (0: already in `to`, or rolled back)
  double permute_ms = 0;   // local permute / partition by owner
  double exchange_ms = 0;  // the AllToAll
  double place_ms = 0;     // direct placement / local interleave
  double vote_ms = 0;      // agreement all-reduces after each phase
  double rollback_ms = 0;  // the inverse transformation after a failure
  double total_ms = 0;
  int64_t bytes_sent = 0;  // reshard payload bytes this rank sent to other ranks
};

// Views into the buffer; valid until the next Reshard.
struct EpExpertView {
  const float* gate_up = nullptr;  // [H x 2I]
  const float* down = nullptr;     // [I x H]
};
struct TpExpertView {
  const float* gate_up = nullptr;  // [H x 2s]: gate shard columns, then up shard columns
  const float* down = nullptr;     // [s x H]
  int inter_shard = 0;             // s = I / P
};

class UnifiedExpertBuffer {
 public:
  // OK iff a unified buffer can hold E experts of intermediate size I over P
  // devices: INVALID_ARGUMENT naming the condition when P does not divide E
  // ("experts") or I ("expert_inter"), or any size is < 1.
  static Status CheckShape(int experts, int inter, int hidden, int devices);
  // CheckShape for the layout's E and P, and every device owning exactly E/P
  // experts under it (INVALID_ARGUMENT "device d owns n experts ...").
  static Status CheckLayout(const ExpertLayout& layout, int inter, int hidden);

  // Builds rank `rank`'s buffer in EP mode from `moe_layers` (the model's MoE
  // layers in order; L = moe_layers.size()): each local expert's gate_up and
  // down are copied into its EP slot and the vectors are freed (capacity 0,
  // inter = 0: the weights now exist only here). INVALID_ARGUMENT (nothing
  // freed) for a bad shape or layout (CheckLayout), a bad rank, a layer with
  // another expert count, or a local expert missing or of the wrong size.
  static Result<std::unique_ptr<UnifiedExpertBuffer>> Create(int rank, const ExpertLayout& layout,
                                                             int inter, int hidden,
                                                             std::span<LayerWeights> moe_layers);

  UnifiedExpertBuffer(const UnifiedExpertBuffer&) = delete;
  UnifiedExpertBuffer& operator=(const UnifiedExpertBuffer&) = delete;

  // Collective: switches every rank's buffer to `target`. Already in
  // `target` on every rank: OK with layers = 0. FAILED_PRECONDITION when the
  // ranks disagree on their current mode or on `target` (nothing moved).
  // UNAVAILABLE "reshard EP->TP failed at MoE layer i, phase exchange
  // (rank r)" when a rank failed (see FaultPlan); the active slots are then
  // bit-identical to before and mode() is unchanged. `fault` (may be null)
  // applies to this reshard only; `rec` (may be null) gets the spans.
  // REQUIRES: comm->size() == devices(); the same call on every rank.
  Result<ReshardStats> Reshard(ParallelMode target, Communicator* comm,
                               const FaultPlan* fault = nullptr, SpanRecorder* rec = nullptr);
  // The last Reshard's figures, also when it failed (then with rollback_ms).
  const ReshardStats& last_stats() const { return last_; }

  // 64-bit FNV-1a over the float bits of `layout`'s active slots (EP: 1..L,
  // TP: 0..L-1), whatever the current mode.
  uint64_t Checksum(ParallelMode layout) const;

  ParallelMode mode() const { return mode_; }
  // REQUIRES: mode() == kEP, 0 <= layer < layers(), 0 <= local_index < local_experts().
  EpExpertView EpExpert(int layer, int local_index) const;
  // REQUIRES: mode() == kTP, 0 <= layer < layers(), 0 <= expert < experts().
  TpExpertView TpExpert(int layer, int expert) const;

  int layers() const { return layers_; }
  int experts() const { return experts_; }
  int devices() const { return devices_; }
  int rank() const { return rank_; }
  int inter() const { return inter_; }
  int hidden() const { return hidden_; }
  // Expert ids this rank owns under EP, ascending (EpExpert's local_index order).
  const std::vector<int>& local_ids() const { return owned_[rank_]; }
  int local_experts() const { return static_cast<int>(owned_[rank_].size()); }

  int64_t slot_floats() const { return slot_floats_; }
  int64_t slot_bytes() const { return slot_floats_ * static_cast<int64_t>(sizeof(float)); }
  // The one allocation: (layers() + 1) * slot_bytes().
  int64_t bytes() const { return (layers_ + 1) * slot_bytes(); }
  // Capacity of the AllToAll send/recv vectors (transport scratch), in bytes.
  int64_t scratch_bytes() const;
  const float* data() const { return storage_.get(); }

 private:
  struct AlignedFree {
    void operator()(float* p) const;
  };
  enum class Direction { kEpToTp, kTpToEp };
  // Where a reshard stopped: the layer and phase that failed, and which rank.
  struct Failure {
    int layer = -1;
    ReshardPhase phase = ReshardPhase::kPermute;
    int rank = -1;
  };

  UnifiedExpertBuffer(int rank, const ExpertLayout& layout, int inter, int hidden, int layers);

  float* slot(int s) { return storage_.get() + s * slot_floats_; }
  const float* slot(int s) const { return storage_.get() + s * slot_floats_; }
  // Converts one layer; false (with *failure set) when any rank failed.
  bool ConvertLayer(Direction dir, int layer, Communicator* comm, const FaultPlan* fault,
                    SpanRecorder* rec, ReshardStats* stats, Failure* failure);
  void Permute(Direction dir, int layer, bool fail_halfway);
  bool Place(Direction dir, int layer, bool torn);
  // AllReduceSum of one flag per rank; returns the lowest failed rank or -1.
  int Vote(Communicator* comm, bool failed, SpanRecorder* rec, int layer, ReshardStats* stats);

  const int rank_;
  const int devices_;
  const int experts_;
  const int inter_;
  const int hidden_;
  const int layers_;
  const int shard_;                      // s = I / P
  const int64_t ep_expert_;              // floats of one full expert: 3 * I * H
  const int64_t chunk_;                  // floats of one TP shard of one expert: 3 * s * H
  const int64_t slot_floats_;            // (E / P) * ep_expert_ == E * chunk_
  std::vector<std::vector<int>> owned_;  // per rank: expert ids it owns under EP, ascending
  std::unique_ptr<float[], AlignedFree> storage_;
  ParallelMode mode_ = ParallelMode::kEP;
  ReshardStats last_;

  // Transport scratch (see the file comment): reserved once, never grown.
  std::vector<std::vector<float>> send_, recv_;
  std::vector<float> vote_;  // one flag per rank
};

}  // namespace sy::engine
