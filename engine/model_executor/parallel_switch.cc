#include "engine/model_executor/parallel_switch.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>

#include "base/stopwatch.h"

namespace sy::engine {

namespace {

using Clock = SteadyClock;

}  // namespace

constexpr char kWhy[] = "cannot switch parallelism: ";

Status CheckSwitchLayout(const ModelConfig& config, const ExpertMap& map, int devices,
                         KvHeadSplit kv) {
  const int p = devices;
  const std::string why = kWhy;
  if (Status s =
          UnifiedExpertBuffer::CheckShape(config.experts, config.expert_inter, config.hidden, p);
      !s.ok()) {
    return FailedPrecondition(why + s.message());
  }
  if (map.slots() != map.experts()) {
    return FailedPrecondition(why + "the expert map has " + std::to_string(map.slots()) +
                              " slots for " + std::to_string(map.experts()) +
                              " experts (redundant experts); the TP layout holds each expert "
                              "once (rebalance to a map without replicas first)");
  }
  // Tensor-parallel attention splits the state by head (or latent column):
  // every device must get an equal block (tp_batch.h).
  const auto split = [&](const char* what, int64_t n) -> Status {
    if (n % p == 0) return Status::Ok();
    return FailedPrecondition(why + std::to_string(p) + " devices do not divide the " + what +
                              " (" + std::to_string(n) + "): TP attention splits it evenly");
  };
  if (config.hybrid()) {
    RETURN_IF_ERROR(
        split("MLA latent row (kv_lora_rank + qk_rope_head_dim)", config.mla_latent_dim()));
    if (config.linear_layers() > 0) RETURN_IF_ERROR(split("linear-attention heads", config.heads));
  } else if (kv == KvHeadSplit::kEven || p % config.kv_heads != 0) {
    RETURN_IF_ERROR(split("KV heads", config.kv_heads));
  }
  return Status::Ok();
}

Status CheckSwitch(const ModelConfig& config, const ExpertMap& map,
                   const std::vector<UnifiedExpertBuffer*>& buffers) {
  const int p = static_cast<int>(buffers.size());
  RETURN_IF_ERROR(CheckSwitchLayout(config, map, p, KvHeadSplit::kEven));
  for (int d = 0; d < p; ++d) {
    if (buffers[d] == nullptr) {
      return FailedPrecondition(std::string(kWhy) + "device " + std::to_string(d) +
                                " has no unified expert buffer (the model has no MoE layer, or "
                                "the devices hold unequal expert slot counts)");
    }
  }
  return Status::Ok();
}

DeviceSwitch ReshardDevice(UnifiedExpertBuffer* buffer, KvPool* kv, StatePool* state,
                           StateReshardScratch* scratch, ParallelMode target, Communicator* comm,
                           const FaultPlan* fault, SpanRecorder* rec) {
  DeviceSwitch out;
  const ParallelMode from = buffer->mode();
  const int rank = buffer->rank();
  Clock::time_point t0 = Clock::now();
  out.checksum_before = buffer->Checksum(from);
  out.checksum_ms = MsSince(t0);
  // The reshard's clock starts when every device has its checksum, so its
  // phases do not include waiting for a slower device's checksum.
  comm->Barrier(rank);
  Result<ReshardStats> r = buffer->Reshard(target, comm, fault, rec);
  out.stats = buffer->last_stats();
  if (r.ok()) {
    Result<StateReshardStats> st = ReshardState(rank, target, kv, state, comm, fault, rec, scratch);
    if (st.ok()) {
      out.state = *st;
      return out;
    }
    out.status = st.status();
    // The state rolled itself back on every rank; take the weights back too.
    t0 = Clock::now();
    Result<ReshardStats> back = buffer->Reshard(from, comm, nullptr, rec);
    out.revert_ms = MsSince(t0);
    if (!back.ok()) {
      out.status = Internal("could not take the expert weights back to " +
                            std::string(ParallelModeName(from)) + " after " + out.status.message() +
                            ": " + back.status().message());
    }
  } else {
    out.status = r.status();
  }
  t0 = Clock::now();
  out.checksum_after = buffer->Checksum(from);
  out.checksum_ms += MsSince(t0);
  return out;
}

Status FoldSwitch(ParallelMode from, ParallelMode to, const std::vector<DeviceSwitch>& devices,
                  double total_ms, SwitchStats* stats) {
  *stats = SwitchStats{.from = from, .to = to};
  double checksum_ms = 0;
  const DeviceSwitch* failed = nullptr;
  for (const DeviceSwitch& d : devices) {
    const ReshardStats& r = d.stats;
    stats->layers = std::max(stats->layers, r.layers);
    stats->permute_ms = std::max(stats->permute_ms, r.permute_ms);
    stats->exchange_ms = std::max(stats->exchange_ms, r.exchange_ms);
    stats->place_ms = std::max(stats->place_ms, r.place_ms);
    stats->rollback_ms = std::max(stats->rollback_ms, r.rollback_ms);
    // The reshard's own wall time (phases and votes), without its rollback.
    stats->weights_ms = std::max(stats->weights_ms, r.total_ms - r.rollback_ms);
    stats->bytes_moved += r.bytes_sent;
    const StateReshardStats& st = d.state;
    stats->state_ms = std::max(stats->state_ms, st.total_ms - st.rollback_ms);
    stats->state_bytes += st.bytes_sent;
    stats->kv_pages += st.kv_pages;
    stats->state_slots += st.state_slots;
    stats->rollback_ms = std::max(stats->rollback_ms, st.rollback_ms + d.revert_ms);
    checksum_ms = std::max(checksum_ms, d.checksum_ms);
    if (!d.status.ok() && failed == nullptr) failed = &d;
  }
  stats->total_ms = total_ms;
  stats->other_ms =
      std::max(checksum_ms, total_ms - stats->weights_ms - stats->state_ms - stats->rollback_ms);
  stats->gbps = stats->weights_ms > 0 ? stats->bytes_moved / (stats->weights_ms * 1e6) : 0.0;
  stats->state_gbps = stats->state_ms > 0 ? stats->state_bytes / (stats->state_ms * 1e6) : 0.0;
  if (failed == nullptr) return Status::Ok();
  if (failed->status.code() == StatusCode::kInternal) return failed->status;
  stats->layers = 0;
  for (size_t d = 0; d < devices.size(); ++d) {
    if (devices[d].checksum_after != devices[d].checksum_before) {
      return Internal("switch " + std::string(ParallelModeName(from)) + "->" +
                      std::string(ParallelModeName(to)) + " rolled back, but device " +
                      std::to_string(d) + "'s expert weights differ from before (checksum " +
                      std::to_string(devices[d].checksum_after) + ", was " +
                      std::to_string(devices[d].checksum_before) +
                      ") after: " + failed->status.message());
    }
  }
  stats->rolled_back = true;
  return failed->status;
}

Status CheckStateMoves(const std::vector<StateMove>& moves, int devices, int pages, int slots) {
  for (const StateMove& m : moves) {
    const std::string who = "request " + std::to_string(m.request_id) + ": ";
    if (m.from < 0 || m.from >= devices || m.to < 0 || m.to >= devices) {
      return InvalidArgument(who + "device out of range");
    }
    if (m.from_pages.size() != m.to_pages.size()) {
      return InvalidArgument(who + "page tables of different lengths");
    }
    for (size_t i = 0; i < m.from_pages.size(); ++i) {
      if (m.from_pages[i] < 0 || m.from_pages[i] >= pages || m.to_pages[i] < 0 ||
          m.to_pages[i] >= pages) {
        return InvalidArgument(who + "page out of range");
      }
    }
    if ((m.from_slot < 0) != (m.to_slot < 0) ||
        (m.from_slot >= 0 && (m.from_slot >= slots || m.to_slot >= slots))) {
      return InvalidArgument(who + "state slot out of range");
    }
  }
  return Status::Ok();
}

Status MoveRequestState(const std::vector<StateMove>& moves, const std::vector<KvPool*>& kv,
                        const std::vector<StatePool*>& state) {
  const int p = static_cast<int>(kv.size());
  // Every device's pools have the same size (ModelRunnerOptions).
  RETURN_IF_ERROR(CheckStateMoves(moves, p, p > 0 ? kv[0]->num_pages() : 0,
                                  state.empty() ? 0 : state[0]->slots()));
  for (const StateMove& m : moves) {
    for (int d = 0; d < p; ++d) {
      KvPool* pool = kv[d];
      const int shards = pool->shards();
      // Unsharded, only the destination device's pool changes.
      if (shards == 1 && d != m.to) continue;
      const KvPool* src = shards == 1 ? kv[m.from] : pool;
      const int n = pool->num_pages();
      const int from_base = shards == 1 ? 0 : m.from * n, to_base = shards == 1 ? 0 : m.to * n;
      const size_t bytes = static_cast<size_t>(pool->page_floats()) * sizeof(float);
      for (size_t i = 0; i < m.from_pages.size(); ++i) {
        std::memcpy(pool->PageData(to_base + m.to_pages[i]),
                    src->PageData(from_base + m.from_pages[i]), bytes);
      }
      if (m.from_slot < 0) continue;
      StatePool* sp = state[d];
      const StatePool* ssrc = shards == 1 ? state[m.from] : sp;
      const int slots = sp->slots();
      const int sf = shards == 1 ? 0 : m.from * slots, st = shards == 1 ? 0 : m.to * slots;
      std::memcpy(sp->SlotData(st + m.to_slot), ssrc->SlotData(sf + m.from_slot),
                  static_cast<size_t>(sp->slot_floats()) * sizeof(float));
    }
  }
  return Status::Ok();
}

}  // namespace sy::engine
