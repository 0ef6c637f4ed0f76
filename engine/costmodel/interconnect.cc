#include "engine/costmodel/interconnect.h"

#include <algorithm>

namespace sy::engine::costmodel {

std::array<int, 3> TorusShape(int chips) {
  std::array<int, 3> best = {1, 1, chips};
  for (int a = 1; a * a * a <= chips; ++a) {
    if (chips % a) continue;
    for (int b = a; a * b * b <= chips; ++b) {
      if ((chips / a) % b) continue;
      const int c = chips / a / b;
      if (c - a < best[2] - best[0]) best = {a, b, c};
    }
  }
  return best;
}

Interconnect DescribeInterconnect(const HardwareSpec& hw, int devices) {
  Interconnect ic;
  ic.devices = devices;
  ic.chips = (devices + hw.devices_per_chip - 1) / hw.devices_per_chip;
  if (hw.topology == Topology::kSwitch) {
    ic.effective_links_per_chip = hw.links_per_chip;
    ic.all_to_all_hops = static_cast<double>(devices - 1) / devices;
  } else {
    ic.torus = TorusShape(ic.chips);
    int links = 0;
    double hops = 0;
    for (int d : ic.torus) {
      links += d == 1 ? 0 : (d == 2 ? 1 : 2);
      double sum = 0;  // ring distance to each of the d positions, self included
      for (int i = 0; i < d; ++i) sum += std::min(i, d - i);
      hops += sum / d;
    }
    ic.effective_links_per_chip = std::min(links, hw.links_per_chip);
    ic.all_to_all_hops = hops;
  }
  ic.injection_bandwidth =
      ic.effective_links_per_chip * hw.link_bandwidth_per_direction / hw.devices_per_chip;
  return ic;
}

}  // namespace sy::engine::costmodel
