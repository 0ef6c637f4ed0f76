// File: console/draw/theme.h
//
// Named styles shared by the panels, so a colour means the same thing
// everywhere (green healthy, yellow warning, red bad, magenta comm).
#pragma once

#include <cstdint>
#include <string_view>

#include "console/draw/grid.h"

namespace sy::console::theme {

inline constexpr Style kNormal{};
inline constexpr Style kTitle{Color::kDefault, Color::kDefault, kBold};
inline constexpr Style kDimmed{Color::kDefault, Color::kDefault, kDim};
inline constexpr Style kLabel{Color::kCyan, Color::kDefault, 0};
inline constexpr Style kGood{Color::kGreen, Color::kDefault, kBold};
inline constexpr Style kWarn{Color::kYellow, Color::kDefault, kBold};
inline constexpr Style kBad{Color::kRed, Color::kDefault, kBold};
inline constexpr Style kComm{Color::kMagenta, Color::kDefault, 0};
inline constexpr Style kChart{Color::kGreen, Color::kDefault, 0};
inline constexpr Style kBar{Color::kBlack, Color::kWhite, 0};
inline constexpr Style kBarActive{Color::kBlack, Color::kCyan, kBold};
inline constexpr Style kOverlay{Color::kWhite, Color::kBlue, 0};
inline constexpr Style kOverlayKey{Color::kYellow, Color::kBlue, kBold};

// Green below 70%, yellow below 90%, red above: for pools and imbalance.
inline Style ForFraction(double f) { return f >= 0.9 ? kBad : f >= 0.7 ? kWarn : kGood; }

// A stable colour per kernel name so a kernel keeps its colour across steps.
inline Style ForKernel(std::string_view name) {
  uint32_t h = 2166136261u;
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 16777619u;
  static constexpr Color kPalette[] = {Color::kBlue, Color::kCyan, Color::kGreen, Color::kYellow};
  return Style{kPalette[h % 4], Color::kDefault, 0};
}

}  // namespace sy::console::theme
