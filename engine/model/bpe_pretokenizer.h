// File: engine/model/bpe_pretokenizer.h
//
// Private to engine/model's byte-level BPE tokenizer (bpe_tokenizer.cc): UTF-8
// helpers, GPT-2's bytes_to_unicode table, the character classes of the
// split patterns and the word splitters, kept apart from vocabulary loading
// and merging. SplitWords in bpe_tokenizer.h is the public face of the
// splitters.
//
// Thread-safety: pure functions.
#pragma once

#include <array>
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "engine/model/bpe_tokenizer.h"

namespace sy::engine::bpe_internal {

// Appends the UTF-8 encoding of code point cp.
void AppendUtf8(std::string& out, char32_t cp);
// Decodes the well-formed UTF-8 sequence at s[i]; returns its length, or 0
// when the bytes there are not one (the caller then treats the byte alone).
size_t DecodeUtf8(std::string_view s, size_t i, char32_t* cp);
// GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the
// other 68 bytes take the code points 256, 257, ... in byte order.
std::array<char32_t, 256> ByteToCodePoint();

// Character classes of the split patterns. Approximation (see
// bpe_tokenizer.h): ASCII is classified exactly; a non-ASCII code point is a
// letter unless it is Unicode White_Space; a byte that is not part of valid
// UTF-8 is a letter on its own.
enum class CharClass { kLetter, kDigit, kSpace, kOther };
struct Char {
  CharClass cls;
  size_t len;  // bytes of the character at the position asked
};
Char ClassifyAt(std::string_view s, size_t i);

// Calls emit(word) for each pre-token of s, in order, under `style`'s pattern.
void ForEachWord(std::string_view s, WordSplit style,
                 const std::function<void(std::string_view)>& emit);

}  // namespace sy::engine::bpe_internal
