// File: console/collect/json_read.h
//
// Lenient readers for event `detail` objects and command replies. The wire
// only promises that `detail` is an object, so a missing or mistyped field
// reads as 0, "" or false and is never an error: the console then simply
// lacks that figure.
//
//   double ms = JsonNum(e.detail, "total_ms");   // 0 when absent
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace sy::console {

inline double JsonNum(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return 0;
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}

inline int64_t JsonInt(const nlohmann::json& j, const char* key) {
  return static_cast<int64_t>(JsonNum(j, key));
}

inline std::string JsonStr(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return "";
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

inline bool JsonBool(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return false;
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

// Whether `key` holds a number (null, absent or text: false).
inline bool JsonHasNum(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return false;
  auto it = j.find(key);
  return it != j.end() && it->is_number();
}

}  // namespace sy::console
