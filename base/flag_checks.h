// File: base/flag_checks.h
//
// CLI11 validators for numeric flags, with messages an operator can read.
// CLI11 2.1's PositiveNumber and NonNegativeNumber refuse with their whole
// range, DBL_MAX written out in 300 digits ("Value -1 not in range 0.000000
// to 1797693134862315708145...").
//
// Header-only (CLI11 is), for every program's flags: moe-engine, moe-console,
// moe-store.
//
// Thread-safety: each call returns a new validator; nothing is shared.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace sy {

namespace flag_checks_internal {
inline CLI::Validator ZeroCheck(bool zero_ok) {
  return CLI::Validator(
      [zero_ok](std::string& in) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(in, v)) return "Value " + in + " is not a number";
        if (zero_ok ? v < 0 : v <= 0)
          return "Value " + in + (zero_ok ? " must be >= 0" : " must be > 0");
        return "";
      },
      zero_ok ? "NONNEGATIVE" : "POSITIVE");
}
}  // namespace flag_checks_internal

// "--flag: Value V must be > 0" (Positive) or ">= 0" (NonNegative), or
// "... is not a number". What they let through (NaN, for one) the flag's
// consumer refuses with its own message.
inline CLI::Validator Positive() { return flag_checks_internal::ZeroCheck(false); }
inline CLI::Validator NonNegative() { return flag_checks_internal::ZeroCheck(true); }

}  // namespace sy
