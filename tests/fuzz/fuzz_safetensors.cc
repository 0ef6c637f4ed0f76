// Fuzz target: a safetensors checkpoint file (engine/model_loader/
// safetensors.h SafetensorsFile::Open), mapped from an in-memory file.
//
// Input: a first byte, then the file. Even first byte: the rest is the file
// as it is. Odd: the rest is the header JSON, optionally followed by a NUL
// and the data section; the 8-byte length prefix is written for it, so the
// fuzzer spends its time on the header's meaning rather than on its length.
//
// Contract checked: Open fails only with DATA_LOSS (corrupt) or
// INVALID_ARGUMENT (a dtype we cannot widen); an opened file's tensors have
// bytes == elements * dtype size, lie inside the file, do not overlap, and
// ToFloat reads every element of each without leaving the mapping.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "engine/model_loader/safetensors.h"
#include "tests/fuzz/fuzz_util.h"

using sy::StatusCode;
namespace en = sy::engine;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static sy::fuzz::MemFile file;
  if (size == 0) return 0;
  std::string bytes;
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  if (data[0] % 2 == 0) {
    bytes.assign(rest);
  } else {
    const size_t nul = rest.find('\0');
    const std::string_view header = rest.substr(0, nul);
    const uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>(n >> (8 * i)));
    bytes.append(header);
    if (nul != std::string_view::npos) bytes.append(rest.substr(nul + 1));
  }
  sy::Result<std::unique_ptr<en::SafetensorsFile>> f = en::SafetensorsFile::Open(file.Hold(bytes));
  if (!f.ok()) {
    SY_FUZZ_CHECK(f.status().code() == StatusCode::kDataLoss ||
                      f.status().code() == StatusCode::kInvalidArgument,
                  f.status().ToString());
    return 0;
  }
  size_t total = 0;
  for (const auto& [name, t] : (*f)->tensors()) {
    SY_FUZZ_CHECK(t.name == name, name);
    SY_FUZZ_CHECK(t.elements() >= 0, name);
    const uint64_t elements = static_cast<uint64_t>(t.elements());
    SY_FUZZ_CHECK(elements * en::DTypeSize(t.dtype) == t.bytes, name);
    SY_FUZZ_CHECK(t.bytes <= bytes.size(), name);
    total += t.bytes;
    SY_FUZZ_CHECK(total <= bytes.size(), "tensors hold more bytes than the file");
    std::vector<float> out(static_cast<size_t>(elements));
    en::ToFloat(t, out.data());
  }
  return 0;
}
