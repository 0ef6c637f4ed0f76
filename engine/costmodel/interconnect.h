// File: engine/costmodel/interconnect.h
//
// What a group of devices sees of the interconnect: the one-way bandwidth a
// device can inject, and the hop factor of an all-to-all (seed 000 §1).
//
//   Interconnect ic = DescribeInterconnect(hw, 32);  // TPU v7x: 16 chips, 2x2x4
//   ic.injection_bandwidth == 200e9;  ic.all_to_all_hops == 2.0
//
//  * switch (NVLink + NVSwitch): injection = links_per_chip x link bandwidth
//    / devices_per_chip; a row to another device crosses one hop, to itself
//    none, so the hop factor over uniform destinations is (P-1)/P (seed 003
//    A2's (P-1)/P factor).
//  * torus: the chips form TorusShape(chips); a dimension of size 2 gives a
//    chip one effective link (both neighbours are the same chip), a larger
//    one two, a size-1 dimension none (capped at links_per_chip). The hop
//    factor is the mean ring distance summed over the dimensions, destinations
//    uniform and the source itself included (2x2x4: 0.5 + 0.5 + 1.0 = 2.0,
//    seed 000 §1). Devices on one chip reach each other in zero hops.
//
// Thread-safety: pure functions.
#pragma once

#include <array>

#include "engine/costmodel/catalog.h"

namespace sy::engine::costmodel {

struct Interconnect {
  int devices = 1;
  int chips = 1;
  std::array<int, 3> torus = {1, 1, 1};  // torus only; ascending
  int effective_links_per_chip = 0;
  double injection_bandwidth = 0;  // bytes/s one way, per device, at peak
  double all_to_all_hops = 0;      // mean links a row crosses, uniform destinations
};

// The most cubic 3-D shape (a <= b <= c, a*b*c == chips, smallest c - a):
// 16 -> 2x2x4, 8 -> 2x2x2, 32 -> 2x4x4, 4 -> 1x2x2. REQUIRES: chips >= 1.
std::array<int, 3> TorusShape(int chips);
// REQUIRES: devices >= 1. Chips = ceil(devices / devices_per_chip).
Interconnect DescribeInterconnect(const HardwareSpec& hw, int devices);

}  // namespace sy::engine::costmodel
