#include "engine/model_executor/parallel_switch.h"

#include <algorithm>
#include <chrono>
#include <string>

namespace sy::engine {

namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

}  // namespace

Status CheckSwitch(const ModelConfig& config, const ExpertMap& map,
                   const std::vector<UnifiedExpertBuffer*>& buffers) {
  const int p = static_cast<int>(buffers.size());
  const std::string why = "cannot switch parallelism: ";
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
  for (int d = 0; d < p; ++d) {
    if (buffers[d] == nullptr) {
      return FailedPrecondition(why + "device " + std::to_string(d) +
                                " has no unified expert buffer (the model has no MoE layer, or "
                                "the devices hold unequal expert slot counts)");
    }
  }
  return Status::Ok();
}

DeviceSwitch ReshardDevice(UnifiedExpertBuffer* buffer, ParallelMode target, Communicator* comm,
                           const FaultPlan* fault, SpanRecorder* rec) {
  DeviceSwitch out;
  const ParallelMode from = buffer->mode();
  Clock::time_point t0 = Clock::now();
  out.checksum_before = buffer->Checksum(from);
  out.checksum_ms = MsSince(t0);
  // The reshard's clock starts when every device has its checksum, so its
  // phases do not include waiting for a slower device's checksum.
  comm->Barrier(buffer->rank());
  Result<ReshardStats> r = buffer->Reshard(target, comm, fault, rec);
  out.stats = buffer->last_stats();
  if (r.ok()) return out;
  out.status = r.status();
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
    checksum_ms = std::max(checksum_ms, d.checksum_ms);
    if (!d.status.ok() && failed == nullptr) failed = &d;
  }
  stats->total_ms = total_ms;
  stats->other_ms = std::max(checksum_ms, total_ms - stats->weights_ms - stats->rollback_ms);
  stats->gbps = stats->weights_ms > 0 ? stats->bytes_moved / (stats->weights_ms * 1e6) : 0.0;
  if (failed == nullptr) return Status::Ok();
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

}  // namespace sy::engine
