// Fuzz target: a checkpoint's config.json (engine/model_loader/hf_config.h
// ParseHfConfig, as LoadHfConfig calls it after parsing the file).
//
// Contract checked: ParseHfConfig fails only with INVALID_ARGUMENT; a config
// it accepts passes ModelConfig::Validate, and ToHfConfig writes a
// config.json that, as text, parses back to the same ModelConfig
// (compared through ToHfConfig, which spells out every field).
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/model_loader/hf_config.h"
#include "tests/fuzz/fuzz_util.h"

using nlohmann::json;
using sy::StatusCode;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const json j = json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  sy::Result<sy::engine::ModelConfig> c = sy::engine::ParseHfConfig(j);
  if (!c.ok()) {
    SY_FUZZ_CHECK(c.status().code() == StatusCode::kInvalidArgument, c.status().ToString());
    return 0;
  }
  SY_FUZZ_CHECK(c->Validate().ok(), c->Validate().ToString());
  // ToHfConfig lists every layer; a valid config of millions of layers is
  // not a parser matter and would only exhaust the fuzzer's memory.
  if (c->layers > (1 << 16)) return 0;
  const std::string text = sy::engine::ToHfConfig(*c).dump(2);
  sy::Result<sy::engine::ModelConfig> back =
      sy::engine::ParseHfConfig(json::parse(text, nullptr, /*allow_exceptions=*/false));
  SY_FUZZ_CHECK(back.ok(), back.status().ToString() + "\n  written: " + text);
  SY_FUZZ_CHECK(sy::engine::ToHfConfig(*back).dump(2) == text,
                "written: " + text + "\n  read back: " + sy::engine::ToHfConfig(*back).dump(2));
  return 0;
}
