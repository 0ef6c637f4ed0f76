// File: console/draw/format.h
//
// Short human-readable numbers for panels, fixed rules so tests can assert
// exact text: durations ("850us", "1.25ms", "3.4s"), counts ("999",
// "12.3k", "4.5M"), rates ("1.2k/s"), percentages ("42.0%") and byte sizes
// ("2.50 MiB").
#pragma once

#include <cstdint>
#include <string>

namespace sy::console {

std::string FormatUs(int64_t us);
std::string FormatCount(double v);
std::string FormatRate(double per_s);  // FormatCount + "/s"
std::string FormatPercent(double fraction);
// Binary units, three significant digits: "512 B", "20.0 KiB", "2.50 MiB",
// "438 KiB", "1.50 GiB".
std::string FormatBytes(int64_t bytes);
// Right-aligns (or cuts) UTF-8 `s` to exactly `width` columns.
std::string PadLeft(const std::string& s, int width);
// Left-aligns (or cuts with "…") to exactly `width` columns.
std::string PadRight(const std::string& s, int width);

}  // namespace sy::console
