// File: console/collect/experts.h
//
// ExpertTracker: the Collector's expert state. It keeps the routed-token
// counts of the last `window_steps` ExpertLoad messages, the newest expert
// placement (phy2log, slot -> device) and each step's balancedness per layer,
// and fills the Snapshot's expert fields from them (heatmap sums, per-device
// totals, per-slot tokens, window balancedness and its per-second trend).
//
//   ExpertTracker t(64, 120);
//   t.SetMetaDevices(meta.expert_device);
//   t.Add(expert_load);          // per message
//   t.Fill(snapshot);            // on TakeSnapshot
//
// Balancedness of a layer = mean / max over devices of the tokens the
// device's slots received (1.0 = perfect, 1.0 for a layer without tokens), as
// the engine defines it (docs/PROTOCOL.md "experts"). The engine's value is
// used when the message carries one; for engines before EPLB it is computed
// here from the counts and the expert -> device map, so older runs show it too.
//
// Thread-safety: none; the Collector calls it under its mutex.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "console/collect/snapshot.h"
#include "telemetry/protocol.h"

namespace sy::console {

// Balancedness of each layer of `counts` ([layer][logical expert]) under the
// placement `phy2log` ([layer][slot] -> expert) with `slot_device` ([slot]
// -> device); an expert's tokens are split evenly over its replicas. Layers
// without a placement row, or whose experts have no slot, are left out (the
// result is as long as the layers both cover). Entries out of range are
// ignored.
std::vector<double> LayerBalancedness(const std::vector<std::vector<int64_t>>& counts,
                                      const std::vector<std::vector<int>>& phy2log,
                                      const std::vector<int>& slot_device);

class ExpertTracker {
 public:
  ExpertTracker(int window_steps, int series_seconds);

  // Meta's expert -> device map; used until an ExpertLoad brings one.
  void SetMetaDevices(const std::vector<int>& expert_device);
  void Add(const telemetry::ExpertLoad& m);
  // Sets every expert field of `s` (expert_window_steps through
  // balancedness_trend). `devices` is Meta's device count (0 unknown).
  void Fill(Snapshot& s, int devices) const;
  void Reset();

 private:
  struct Second {
    int64_t second = 0;
    std::vector<double> sum;  // per layer
    std::vector<int> n;       // samples per layer
  };

  // The placement in force: the engine's, else one slot per expert on the
  // device of expert_device_ (empty when neither is known).
  void Placement(size_t layers, size_t experts, std::vector<std::vector<int>>& phy2log,
                 std::vector<int>& slot_device) const;

  const int window_steps_;
  const int series_seconds_;
  std::deque<std::vector<std::vector<int64_t>>> counts_;  // newest last
  std::deque<std::vector<double>> balancedness_;          // parallel to counts_
  std::deque<Second> seconds_;
  std::vector<int> expert_device_;
  std::vector<std::vector<int>> phy2log_;  // as last reported
  std::vector<int> slot_device_;
};

}  // namespace sy::console
