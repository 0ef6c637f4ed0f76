// File: engine/model_loader/safetensors.h
//
// The safetensors file format (huggingface/safetensors): an 8-byte
// little-endian header length N, N bytes of JSON
//   {"__metadata__": {str: str}, "<name>": {"dtype": "F32"|"BF16"|...,
//    "shape": [...], "data_offsets": [begin, end]}, ...}
// then the tensor bytes, offsets relative to the end of the header.
//
// SafetensorsFile memory-maps a file read-only (RAII: unmapped on
// destruction) and validates the whole header before anything is read: the
// length prefix within the file (and under 100 MiB), a JSON object, each
// entry's dtype/shape/data_offsets well-formed, shape * element size == its
// byte range, ranges inside the data section and non-overlapping (gaps are
// allowed), __metadata__ a string -> string map. A violation is DATA_LOSS
// naming the file and the tensor, e.g. "file X is truncated: tensor 'Y' needs
// bytes [a, b) but the data section has c". A well-formed file holding a
// dtype we cannot widen (F64, I32, F8_*, ...) is INVALID_ARGUMENT instead.
// Tensor data is not required to be aligned; ToFloat copies with memcpy.
//
//   ASSIGN_OR_RETURN(auto f, SafetensorsFile::Open("model-00001-of-00002.safetensors"));
//   const TensorView* t = f->Find("model.norm.weight");
//   std::vector<float> v(t->elements());
//   ToFloat(*t, v.data());            // F32 copied, BF16/F16 widened
//
// WriteSafetensors writes fp32 data as F32 or (rounding to nearest even) BF16,
// little-endian, header padded with spaces so the data starts 8-byte aligned.
//
// Thread-safety: an open file is immutable; views stay valid while it lives.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace sy::engine {

enum class DType { kF32, kBF16, kF16 };

// "F32" | "BF16" | "F16".
const char* DTypeName(DType d);
size_t DTypeSize(DType d);

struct TensorView {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // into the mapping
  size_t bytes = 0;
  int64_t elements() const;
};

class SafetensorsFile {
 public:
  // NOT_FOUND if missing; DATA_LOSS for a truncated file or a bad header.
  static Result<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  const TensorView* Find(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;
  std::string path_;
  void* map_ = nullptr;
  size_t map_size_ = 0;
  std::map<std::string, TensorView> tensors_;
  std::map<std::string, std::string> metadata_;
};

// Widens (or copies) t's elements into out[0, t.elements()).
void ToFloat(const TensorView& t, float* out);

struct TensorToWrite {
  std::string name;
  std::vector<int64_t> shape;
  const float* data = nullptr;  // shape's product floats
};

// Writes atomically: a temporary file beside `path`, fsync'd and renamed into
// place, so readers see the old file or the whole new one. On any error the
// temporary file is removed and `path` is untouched. Errors name the path and
// strerror: RESOURCE_EXHAUSTED for a full disk (ENOSPC, EDQUOT, EFBIG),
// UNAVAILABLE for other I/O errors, INVALID_ARGUMENT for dtype F16 (not
// writable) or an empty, repeated or "__metadata__" tensor name.
// REQUIRES: each tensor's data holds product(shape) floats.
Status WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                        DType dtype, const std::map<std::string, std::string>& metadata);

}  // namespace sy::engine
