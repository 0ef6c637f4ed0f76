// Fuzz target: a workload trace, JSONL (engine/workload/workload_file.h
// ReadWorkloadFile), read from an in-memory file.
//
// Contract checked: ReadWorkloadFile fails only with INVALID_ARGUMENT (it
// cannot fail to open the file here); the entries it returns keep the
// documented rules (times >= 0 and non-decreasing, exactly one prompt form,
// output_len >= 1, temperature finite and >= 0); and the token-prompt entries,
// written back by WriteWorkloadFile, read back as the same requests.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/workload/workload_file.h"
#include "tests/fuzz/fuzz_util.h"

using sy::StatusCode;
namespace en = sy::engine;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static sy::fuzz::MemFile in_file;
  static sy::fuzz::MemFile out_file;
  sy::Result<std::vector<en::TraceEntry>> r = en::ReadWorkloadFile(in_file.Hold(data, size));
  if (!r.ok()) {
    SY_FUZZ_CHECK(r.status().code() == StatusCode::kInvalidArgument, r.status().ToString());
    return 0;
  }
  SY_FUZZ_CHECK(!r->empty(), "no entries but no error");
  std::vector<en::Arrival> arrivals;
  int64_t last_us = 0;
  for (const en::TraceEntry& e : *r) {
    SY_FUZZ_CHECK(e.time_us >= last_us, std::to_string(e.time_us));
    last_us = e.time_us;
    SY_FUZZ_CHECK(e.text.empty() != e.tokens.empty(), "not exactly one prompt form");
    SY_FUZZ_CHECK(e.output_len >= 1, std::to_string(e.output_len));
    if (e.temperature) {
      SY_FUZZ_CHECK(std::isfinite(*e.temperature) && *e.temperature >= 0,
                    std::to_string(*e.temperature));
    }
    if (e.tokens.empty()) continue;
    en::Arrival a;
    a.time_us = e.time_us;
    a.spec.prompt = e.tokens;
    a.spec.max_new_tokens = e.output_len;
    a.spec.temperature = e.temperature.value_or(0.5f);
    a.spec.ignore_eos = e.ignore_eos.value_or(false);
    a.spec.seed = e.seed.value_or(7);
    arrivals.push_back(std::move(a));
  }
  if (arrivals.empty()) return 0;
  const sy::Status w = en::WriteWorkloadFile(arrivals, out_file.path());
  SY_FUZZ_CHECK(w.ok(), w.ToString());
  sy::Result<std::vector<en::TraceEntry>> back = en::ReadWorkloadFile(out_file.path());
  SY_FUZZ_CHECK(back.ok(), back.status().ToString());
  SY_FUZZ_CHECK(back->size() == arrivals.size(), std::to_string(back->size()));
  for (size_t i = 0; i < arrivals.size(); ++i) {
    const en::Arrival& a = arrivals[i];
    const en::TraceEntry& b = (*back)[i];
    const std::string which = "entry " + std::to_string(i);
    SY_FUZZ_CHECK(b.time_us == a.time_us, which + ": time " + std::to_string(a.time_us) + " -> " +
                                              std::to_string(b.time_us));
    SY_FUZZ_CHECK(b.tokens == a.spec.prompt && b.text.empty(), which + ": prompt");
    SY_FUZZ_CHECK(b.output_len == a.spec.max_new_tokens, which + ": output_len");
    SY_FUZZ_CHECK(b.temperature && *b.temperature == a.spec.temperature, which + ": temperature");
    SY_FUZZ_CHECK(b.ignore_eos && *b.ignore_eos == a.spec.ignore_eos, which + ": ignore_eos");
    SY_FUZZ_CHECK(b.seed && *b.seed == a.spec.seed, which + ": seed");
  }
  return 0;
}
