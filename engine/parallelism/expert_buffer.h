// File: engine/parallelism/expert_buffer.h
//
// UnifiedExpertBuffer: one device's routed-expert weights of every MoE layer
// in ONE fixed allocation that is read either as the expert-parallel (EP) or
// the tensor-parallel (TP) layout, and resharded between the two in place
// (Moebius, seed 003 §2, §3 Algorithms 1 and 2, §5 offset-by-one aliasing).
//
//   slots:   [ 0 ] [ 1 ] [ 2 ] ... [ L ]          L = MoE layers, each slot
//   EP:      spare  l0    l1   ...  l(L-1)        slot_floats = S*3*I*H
//   TP:      l0     l1    l2   ...  spare         (volume invariant, eq. 6)
//
// EP alias, slot i+1 = MoE layer i (model layer map.first_moe() + i): this
// device's S = map.device_slots(rank) physical expert slots in ExpertMap
// order (local slot k = the device's k-th slot; with redundant experts an
// expert may appear in several), each [gate_up H x 2I | down I x H] exactly
// as SwigluWeights stores them, so EpMoeLayer reads them in place
// (EpExpert). In EP mode the spare (slot 0) is the staging area of a live
// expert rebalance (StagingExpert, CommitStaged): nothing else reads it.
// TP alias, slot i = MoE layer i: all E experts in id order, each rank r's
// intermediate shard (s = I/P): [gate_up_r H x 2s: per row the gate columns
// [r*s, (r+1)*s) then the up columns I + [r*s, (r+1)*s) | down_r s x H: down
// rows [r*s, (r+1)*s)] (TpExpert). Both aliases are pointer arithmetic into
// the same allocation: addresses never change, so whatever captured them
// (a CUDA graph on real hardware) stays valid across switches.
//
// The TP alias needs the EP slots to be exactly the E experts split evenly
// (N == E, P | E, P | I; then S = E/P and both aliases fill a slot);
// otherwise Reshard refuses with FAILED_PRECONDITION and the buffer serves
// EP only. Reshard EP->TP runs layer i = 0..L-1 from slot i+1 into slot i (the slot
// layer i-1 has just vacated, or the EP spare); TP->EP runs i = L-1..0 from
// slot i into slot i+1. Per layer: permute (EP: pack each local expert's
// shard p for peer p; TP: pack the chunks of the experts peer p owns),
// exchange (Communicator::AllToAll; per layer the experts each peer holds
// come from the map's row of that layer, as updated by CommitStaged), place (EP->TP: each received
// chunk is a TP expert, copied to its id's place; TP->EP: interleave the P shards back into full
// experts). Every rank votes after every phase (an AllReduceSum of one flag per rank), so a failure
// on one rank stops all of them at the same point; each then runs the inverse transformation over
// the layers it has already converted, restoring the active slots bit for bit (seed §11 W5), and
// returns UNAVAILABLE naming the layer, the phase and the failed rank. The spare slot's contents
// are unspecified at all times.
//
// Memory: bytes() = (L + 1) * slot_bytes(), i.e. exactly one slot more than
// the weights. The AllToAll payloads are separate: Communicator takes
// std::vector buffers, so the in-process transport needs its own send/recv
// scratch (as NCCL owns its channel buffers), one layer's worth each way,
// reserved at creation and never grown (scratch_bytes()).
//
//   auto buf = UnifiedExpertBuffer::Create(rank, map, I, H, moe_layers);
//   // on every rank's thread, together:
//   Result<ReshardStats> s = (*buf)->Reshard(ParallelMode::kTP, &comm);
//
// Thread-safety: one instance per rank. Reshard is a collective: all P ranks
// call it together, each on its own thread, and nothing may read the expert
// weights of that rank while it runs. Accessors are const and may be called
// from the rank's thread between reshards. StagingExpert's slot may be
// written from another thread while the EP alias is read (they are
// disjoint); CommitStaged and Reshard must not overlap anything else.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "engine/distributed/communicator.h"
#include "engine/model/weights.h"
#include "engine/moe/expert_map.h"
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
// `part` picks which half of a switch fails: the expert weights (this
// buffer's Reshard) or the request state (engine/parallelism/
// state_reshard.h, where the phases are pack / exchange / place and `layer`
// is ignored); each ignores a plan for the other part.
enum class SwitchPart { kWeights, kState };
// "weights" | "state".
std::string_view SwitchPartName(SwitchPart part);

struct FaultPlan {
  int rank = 0;
  int layer = 0;  // MoE layer index in [0, L)
  ReshardPhase phase = ReshardPhase::kPermute;
  SwitchPart part = SwitchPart::kWeights;
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
  // OK iff the TP alias can hold E experts of intermediate size I over P
  // devices: INVALID_ARGUMENT naming the condition when P does not divide E
  // ("experts") or I ("expert_inter"), or any size is < 1.
  static Status CheckShape(int experts, int inter, int hidden, int devices);
  // OK iff a buffer (EP alias) can hold the map's slots: sizes >= 1 and
  // every device holding the same number of slots, at least one
  // (INVALID_ARGUMENT "device d holds n slots ...").
  static Status CheckMap(const ExpertMap& map, int inter, int hidden);

  // Builds rank `rank`'s buffer in EP mode from `moe_layers` (the model's MoE
  // layers in order, model layers map.first_moe().., L = moe_layers.size()):
  // the expert of each local slot is copied into its EP slot, then every
  // expert vector of those layers is freed (capacity 0, inter = 0: the
  // weights now exist only here). INVALID_ARGUMENT (nothing freed) for a
  // map CheckMap refuses, a bad rank, L other than the map's MoE layers, a
  // layer with another expert count, or a local slot's expert missing or of
  // the wrong size.
  static Result<std::unique_ptr<UnifiedExpertBuffer>> Create(int rank, const ExpertMap& map,
                                                             int inter, int hidden,
                                                             std::span<LayerWeights> moe_layers);

  UnifiedExpertBuffer(const UnifiedExpertBuffer&) = delete;
  UnifiedExpertBuffer& operator=(const UnifiedExpertBuffer&) = delete;

  // Collective: switches every rank's buffer to `target`. Already in
  // `target` on every rank: OK with layers = 0. FAILED_PRECONDITION (before
  // any collective, on every rank alike) when the map does not fit the TP
  // alias (redundant experts, or P not dividing E or I); when the ranks disagree on their current
  // mode or on `target` (nothing moved). UNAVAILABLE "reshard EP->TP failed at MoE layer i, phase
  // exchange (rank r)" when a rank failed (see FaultPlan); the active slots are then bit-identical
  // to before and mode() is unchanged. `fault` (may be null) applies to this reshard only; `rec`
  // (may be null) gets the spans. REQUIRES: comm->size() == devices(); the same call on every rank.
  Result<ReshardStats> Reshard(ParallelMode target, Communicator* comm,
                               const FaultPlan* fault = nullptr, SpanRecorder* rec = nullptr);
  // The last Reshard's figures, also when it failed (then with rollback_ms).
  const ReshardStats& last_stats() const { return last_; }

  // Live expert moves (EP mode only). The staging area for local slot k
  // (one expert, [gate_up | down], expert_floats() floats) in the spare.
  // REQUIRES: mode() == kEP, 0 <= local_index < local_slots().
  float* StagingExpert(int local_index);
  // Copies the staged experts of `local_indices` over MoE layer `layer`'s
  // live EP slots (addresses unchanged) and takes that layer's per-device
  // expert lists from `map` (the map after the move; model layer
  // map.first_moe() + layer). REQUIRES: mode() == kEP, no Reshard since the
  // staging (reshards() unchanged), and no reader of the layer meanwhile.
  void CommitStaged(int layer, std::span<const int> local_indices, const ExpertMap& map);
  // Reshards that moved anything (each overwrites the spare): a staging
  // taken before a change of this count is lost.
  uint64_t reshards() const { return reshards_; }

  // 64-bit FNV-1a over the float bits of `layout`'s active slots (EP: 1..L,
  // TP: 0..L-1), whatever the current mode.
  uint64_t Checksum(ParallelMode layout) const;

  ParallelMode mode() const { return mode_; }
  // The expert of local slot `local_index`, contiguous: down == gate_up + 2*H*I.
  // REQUIRES: mode() == kEP, 0 <= layer < layers(), 0 <= local_index < local_slots().
  EpExpertView EpExpert(int layer, int local_index) const;
  // REQUIRES: mode() == kTP, 0 <= layer < layers(), 0 <= expert < experts().
  TpExpertView TpExpert(int layer, int expert) const;

  int layers() const { return layers_; }
  int experts() const { return experts_; }
  int devices() const { return devices_; }
  int rank() const { return rank_; }
  int inter() const { return inter_; }
  int hidden() const { return hidden_; }
  // Expert ids in this rank's slots of MoE layer `layer` (EpExpert's
  // local_index order).
  const std::vector<int>& local_ids(int layer) const { return owned_[layer][rank_]; }
  // S: this rank's expert slots per layer.
  int local_slots() const { return slots_; }
  // Floats of one full expert: 3 * I * H.
  int64_t expert_floats() const { return ep_expert_; }

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

  UnifiedExpertBuffer(int rank, const ExpertMap& map, int inter, int hidden, int layers);

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
  const int slots_;            // S: expert slots per device
  const int shard_;            // s = I / P (0 when the TP alias does not fit)
  const int64_t ep_expert_;    // floats of one full expert: 3 * I * H
  const int64_t chunk_;        // floats of one TP shard of one expert: 3 * s * H
  const int64_t slot_floats_;  // S * ep_expert_ (== E * chunk_ when TP fits)
  std::string tp_refusal_;     // why Reshard refuses; empty when TP fits
  std::vector<std::vector<std::vector<int>>> owned_;  // [layer][rank]: experts in its slots
  uint64_t reshards_ = 0;
  std::unique_ptr<float[], AlignedFree> storage_;
  ParallelMode mode_ = ParallelMode::kEP;
  ReshardStats last_;

  // Transport scratch (see the file comment): reserved once, never grown.
  std::vector<std::vector<float>> send_, recv_;
  std::vector<float> vote_;  // one flag per rank
};

}  // namespace sy::engine
