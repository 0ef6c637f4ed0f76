// File: engine/model/tokenizer.h
//
// Byte-level tokenizer: token i < 256 is byte i; 256..259 are special.
// Encode never fails; Decode maps specials to nothing (BOS/PAD) or to a
// visible marker and replaces invalid UTF-8 when shown.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sy::engine {

inline constexpr int32_t kBosToken = 256;
inline constexpr int32_t kEosToken = 257;
inline constexpr int32_t kPadToken = 258;
inline constexpr int32_t kUnkToken = 259;
inline constexpr int kTokenizerVocab = 260;

// BOS followed by the bytes of `text`.
std::vector<int32_t> Encode(std::string_view text, bool add_bos = true);
// Bytes of the non-special tokens, in order.
std::string Decode(const std::vector<int32_t>& tokens);

}  // namespace sy::engine
