#include "engine/model_loader/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "base/atomic_file.h"

namespace sy::engine {

namespace {

using nlohmann::json;

// The official implementation's cap on the header; a larger length prefix is
// corruption, not a real header.
constexpr uint64_t kMaxHeaderBytes = 100ULL << 20;

std::string Errno(int err) { return std::strerror(err); }

Status Corrupt(const std::string& path, const std::string& why) {
  return DataLoss("safetensors file " + path + ": " + why);
}

Status CorruptTensor(const std::string& path, const std::string& tensor, const std::string& why) {
  return DataLoss("safetensors file " + path + ": tensor '" + tensor + "': " + why);
}

// Valid safetensors dtypes we cannot widen to fp32: a well-formed file we
// refuse as unsupported rather than as corrupt.
bool IsOtherSafetensorsDType(const std::string& s) {
  static constexpr const char* kOthers[] = {
      "F64",  "I64",     "U64",     "I32",     "U32", "I16",     "U16",     "I8", "U8",
      "BOOL", "F8_E4M3", "F8_E5M2", "F8_E8M0", "F4",  "F6_E2M3", "F6_E3M2", "C64"};
  return std::find(std::begin(kOthers), std::end(kOthers), s) != std::end(kOthers);
}

bool ParseDType(const std::string& s, DType* out) {
  if (s == "F32")
    *out = DType::kF32;
  else if (s == "BF16")
    *out = DType::kBF16;
  else if (s == "F16")
    *out = DType::kF16;
  else
    return false;
  return true;
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf / nan
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;  // signed zero
  } else {
    // Subnormal half: normalise the mantissa into an fp32 normal.
    exp = 113;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --exp;
    }
    bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t FloatToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((bits >> 16) | 0x40u);  // quiet nan
  // Round to nearest, ties to even (overflow to inf is the correct rounding).
  const uint32_t lsb = (bits >> 16) & 1u;
  return static_cast<uint16_t>((bits + 0x7fffu + lsb) >> 16);
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Parses one tensor entry; `data_size` is the byte length after the header.
Status ParseEntry(const std::string& path, const std::string& name, const json& e,
                  uint64_t data_size, TensorView* t, uint64_t* begin, uint64_t* end) {
  if (!e.is_object()) return CorruptTensor(path, name, "header entry is not a JSON object");
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    if (!e.contains(key))
      return CorruptTensor(path, name, std::string("header lacks '") + key + "'");
  }
  const json& dt = e["dtype"];
  if (!dt.is_string()) return CorruptTensor(path, name, "'dtype' is not a string");
  const std::string dts = dt.get<std::string>();
  if (!ParseDType(dts, &t->dtype)) {
    if (IsOtherSafetensorsDType(dts)) {
      return InvalidArgument("safetensors file " + path + ": tensor '" + name + "': dtype " + dts +
                             " is not supported (F32, BF16, F16 are)");
    }
    return CorruptTensor(path, name, "unknown dtype '" + dts.substr(0, 32) + "'");
  }
  const json& sh = e["shape"];
  if (!sh.is_array()) return CorruptTensor(path, name, "'shape' is not an array");
  uint64_t elements = 1;
  for (const json& d : sh) {
    if (!d.is_number_unsigned()) {
      return CorruptTensor(path, name, "'shape' holds something other than a non-negative integer");
    }
    const uint64_t v = d.get<uint64_t>();
    // Every partial product must fit int64, as TensorView::elements() takes
    // them in order ([2^62, 2, 0] holds 0 elements but overflows there).
    if (v > static_cast<uint64_t>(INT64_MAX) || __builtin_mul_overflow(elements, v, &elements) ||
        elements > static_cast<uint64_t>(INT64_MAX)) {
      return CorruptTensor(path, name, "'shape' overflows");
    }
    t->shape.push_back(static_cast<int64_t>(v));
  }
  const json& off = e["data_offsets"];
  if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
      !off[1].is_number_unsigned()) {
    return CorruptTensor(path, name, "'data_offsets' is not [begin, end] of non-negative integers");
  }
  *begin = off[0].get<uint64_t>();
  *end = off[1].get<uint64_t>();
  if (*begin > *end) {
    return CorruptTensor(
        path, name,
        "'data_offsets' begin " + std::to_string(*begin) + " > end " + std::to_string(*end));
  }
  uint64_t want = 0;
  if (__builtin_mul_overflow(elements, static_cast<uint64_t>(DTypeSize(t->dtype)), &want) ||
      want != *end - *begin) {
    return CorruptTensor(path, name,
                         "shape " + ShapeString(t->shape) + " of " + dts + " needs " +
                             std::to_string(elements * DTypeSize(t->dtype)) +
                             " bytes but data_offsets span " + std::to_string(*end - *begin));
  }
  if (*end > data_size) {
    return DataLoss("file " + path + " is truncated: tensor '" + name + "' needs bytes [" +
                    std::to_string(*begin) + ", " + std::to_string(*end) +
                    ") but the data section has " + std::to_string(data_size));
  }
  t->name = name;
  t->bytes = static_cast<size_t>(want);
  return Status::Ok();
}

// Writes all of [p, p+n) to fd, retrying short writes and EINTR.
}  // namespace

const char* DTypeName(DType d) {
  switch (d) {
    case DType::kF32:
      return "F32";
    case DType::kBF16:
      return "BF16";
    case DType::kF16:
      return "F16";
  }
  return "?";
}

size_t DTypeSize(DType d) { return d == DType::kF32 ? 4 : 2; }

int64_t TensorView::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return NotFound("safetensors file " + path + " does not exist");
    return Unavailable("cannot open safetensors file " + path + ": " + Errno(err));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgument("safetensors file " + path + " is not a regular file");
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    return Corrupt(path,
                   "is " + std::to_string(size) + " bytes, shorter than the 8-byte header length");
  }
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_err = errno;
  ::close(fd);  // the mapping keeps the file
  if (map == MAP_FAILED) return Unavailable("cannot map " + path + ": " + Errno(map_err));

  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  f->map_ = map;
  f->map_size_ = size;
  const uint8_t* base = static_cast<const uint8_t*>(map);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | base[i];  // little-endian
  if (header_len > size - 8 || header_len > kMaxHeaderBytes) {
    return Corrupt(path, "header length " + std::to_string(header_len) + " exceeds the file (" +
                             std::to_string(size) + " bytes)");
  }
  const char* hp = reinterpret_cast<const char*>(base + 8);
  // JSON parsers keep one of two equal keys silently; a repeated tensor name
  // would hide a tensor, so the top-level keys are collected while parsing.
  std::set<std::string> keys;
  std::string repeated;
  const json::parser_callback_t note_keys = [&](int depth, json::parse_event_t event,
                                                json& parsed) {
    if (depth == 1 && event == json::parse_event_t::key &&
        !keys.insert(parsed.get<std::string>()).second) {
      repeated = parsed.get<std::string>();
    }
    return true;
  };
  const json header = json::parse(hp, hp + header_len, note_keys, /*allow_exceptions=*/false);
  if (header.is_discarded()) return Corrupt(path, "header is not valid JSON");
  if (!repeated.empty()) return CorruptTensor(path, repeated, "named twice in the header");
  if (!header.is_object()) return Corrupt(path, "header is not a JSON object");

  const uint64_t data_size = size - 8 - header_len;
  const uint8_t* data = base + 8 + header_len;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;  // [begin, end) with the tensor's name below
  std::vector<const std::string*> range_names;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) return Corrupt(path, "__metadata__ is not a JSON object");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) {
          return Corrupt(path, "__metadata__ value of '" + m.key() + "' is not a string");
        }
        f->metadata_[m.key()] = m->get<std::string>();
      }
      continue;
    }
    TensorView t;
    uint64_t begin = 0, end = 0;
    RETURN_IF_ERROR(ParseEntry(path, it.key(), *it, data_size, &t, &begin, &end));
    t.data = data + begin;
    auto [pos, inserted] = f->tensors_.emplace(it.key(), std::move(t));
    (void)inserted;  // JSON object keys are unique after parsing
    ranges.emplace_back(begin, end);
    range_names.push_back(&pos->first);
  }
  // Overlap check: sort ranges by begin; empty tensors overlap nothing.
  std::vector<size_t> order(ranges.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ranges[a] < ranges[b]; });
  uint64_t prev_end = 0;
  const std::string* prev_name = nullptr;
  for (size_t i : order) {
    if (ranges[i].first == ranges[i].second) continue;
    if (prev_name != nullptr && ranges[i].first < prev_end) {
      return CorruptTensor(path, *range_names[i],
                           "bytes [" + std::to_string(ranges[i].first) + ", " +
                               std::to_string(ranges[i].second) + ") overlap tensor '" +
                               *prev_name + "' ending at " + std::to_string(prev_end));
    }
    prev_end = ranges[i].second;
    prev_name = range_names[i];
  }
  return f;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_ != nullptr) ::munmap(map_, map_size_);
}

const TensorView* SafetensorsFile::Find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

void ToFloat(const TensorView& t, float* out) {
  const size_t n = static_cast<size_t>(t.elements());
  // An empty tensor's destination is often an empty vector's null data();
  // memcpy must not see a null pointer even for 0 bytes.
  if (n == 0) return;
  switch (t.dtype) {
    case DType::kF32:
      std::memcpy(out, t.data, n * 4);  // the data may be unaligned: memcpy, not a cast
      return;
    case DType::kBF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, t.data + 2 * i, 2);
        const uint32_t bits = static_cast<uint32_t>(h) << 16;
        std::memcpy(out + i, &bits, 4);
      }
      return;
    case DType::kF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, t.data + 2 * i, 2);
        out[i] = HalfToFloat(h);
      }
      return;
  }
}

Status WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                        DType dtype, const std::map<std::string, std::string>& metadata) {
  if (dtype != DType::kF32 && dtype != DType::kBF16) {
    return InvalidArgument(std::string("writing ") + path + ": dtype " + DTypeName(dtype) +
                           " is not supported for writing (F32, BF16 are)");
  }
  const size_t esize = DTypeSize(dtype);
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const TensorToWrite& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__" || header.contains(t.name)) {
      return InvalidArgument("writing " + path + ": tensor name '" + t.name +
                             "' is empty, reserved or repeated");
    }
    uint64_t n = 1;
    for (int64_t d : t.shape) {
      if (d < 0)
        return InvalidArgument("writing " + path + ": tensor '" + t.name +
                               "' has a negative dimension");
      n *= static_cast<uint64_t>(d);
    }
    if (n > 0 && t.data == nullptr) {
      return InvalidArgument("writing " + path + ": tensor '" + t.name + "' has no data");
    }
    header[t.name] = {{"dtype", DTypeName(dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + n * esize}}};
    offset += n * esize;
  }
  std::string hs = header.dump();
  // Pad with spaces so the data section starts 8-byte aligned (as the reference writer does).
  hs.append((8 - (8 + hs.size()) % 8) % 8, ' ');
  uint8_t len[8];
  for (int i = 0; i < 8; ++i)
    len[i] = static_cast<uint8_t>(static_cast<uint64_t>(hs.size()) >> (8 * i));

  AtomicFile tmp(path);
  RETURN_IF_ERROR(tmp.Create());
  RETURN_IF_ERROR(tmp.Write(len, 8, "header"));
  RETURN_IF_ERROR(tmp.Write(hs.data(), hs.size(), "header"));
  constexpr size_t kChunk = 1 << 16;
  std::vector<uint16_t> buf;
  for (const TensorToWrite& t : tensors) {
    size_t n = 1;
    for (int64_t d : t.shape) n *= static_cast<size_t>(d);
    const std::string what = "tensor '" + t.name + "'";
    if (dtype == DType::kF32) {
      RETURN_IF_ERROR(tmp.Write(t.data, n * 4, what));
      continue;
    }
    for (size_t i = 0; i < n; i += kChunk) {
      const size_t m = std::min(kChunk, n - i);
      buf.resize(m);
      for (size_t j = 0; j < m; ++j) buf[j] = FloatToBf16(t.data[i + j]);
      RETURN_IF_ERROR(tmp.Write(buf.data(), m * 2, what));
    }
  }
  return tmp.Commit();
}

}  // namespace sy::engine
