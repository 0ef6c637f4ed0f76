// Fuzz target: the cost model's catalogue files, data/hardware/*.json and
// data/models/*.json (engine/costmodel/catalog.h ParseHardwareJson,
// ParseModelJson). Input: one JSON text, tried as both.
//
// Contract checked: both fail only with INVALID_ARGUMENT; an accepted
// hardware spec has finite figures > 0 and devices_per_chip >= 1; an accepted
// model spec passes ModelSpec::Validate and its derived layer counts add up.
#include <cmath>
#include <cstdint>
#include <string>

#include "engine/costmodel/catalog.h"
#include "tests/fuzz/fuzz_util.h"

using sy::StatusCode;
namespace cm = sy::engine::costmodel;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  sy::Result<cm::HardwareSpec> h = cm::ParseHardwareJson(text, "fuzz.json");
  if (!h.ok()) {
    SY_FUZZ_CHECK(h.status().code() == StatusCode::kInvalidArgument, h.status().ToString());
  } else {
    SY_FUZZ_CHECK(h->devices_per_chip >= 1 && h->links_per_chip >= 1, h->name);
    for (double v :
         {h->peak_flops_bf16_per_chip, h->peak_flops_fp8_per_chip, h->hbm_bandwidth_per_chip,
          h->hbm_capacity_per_chip, h->link_bandwidth_per_direction}) {
      SY_FUZZ_CHECK(std::isfinite(v) && v > 0, std::to_string(v));
    }
    for (cm::Dtype d : {cm::Dtype::kFp8, cm::Dtype::kBf16}) {
      SY_FUZZ_CHECK(std::isfinite(h->peak_flops(d)) && h->peak_flops(d) > 0, h->name);
    }
  }
  sy::Result<cm::ModelSpec> m = cm::ParseModelJson(text, "fuzz.json");
  if (!m.ok()) {
    SY_FUZZ_CHECK(m.status().code() == StatusCode::kInvalidArgument, m.status().ToString());
    return 0;
  }
  SY_FUZZ_CHECK(m->Validate().ok(), m->Validate().ToString());
  SY_FUZZ_CHECK(m->full_attention_layers() >= 1 && m->full_attention_layers() <= m->layers,
                std::to_string(m->full_attention_layers()));
  SY_FUZZ_CHECK(m->linear_layers() >= 0 && m->moe_layers() >= 1, m->name);
  return 0;
}
