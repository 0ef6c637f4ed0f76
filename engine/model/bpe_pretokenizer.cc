// File: engine/model/bpe_pretokenizer.cc
//
// UTF-8 helpers, GPT-2's byte-to-code-point table and the word splitters of
// the byte-level BPE tokenizer (bpe_pretokenizer.h).
#include "engine/model/bpe_pretokenizer.h"

namespace sy::engine::bpe_internal {

void AppendUtf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// Decodes the well-formed UTF-8 sequence at s[i]; returns its length, or 0
// when the bytes there are not one (the caller then treats the byte alone).
size_t DecodeUtf8(std::string_view s, size_t i, char32_t* cp) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  size_t len = 0;
  char32_t v = 0;
  if (c < 0x80) {
    *cp = c;
    return 1;
  } else if (c >= 0xC2 && c <= 0xDF) {
    len = 2, v = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3, v = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4, v = c & 0x07;
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    if ((b(k) & 0xC0) != 0x80) return 0;
    v = (v << 6) | (b(k) & 0x3F);
  }
  // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8.
  if ((len == 3 && v < 0x800) || (len == 4 && (v < 0x10000 || v > 0x10FFFF)) ||
      (v >= 0xD800 && v <= 0xDFFF)) {
    return 0;
  }
  *cp = v;
  return len;
}

// GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the
// other 68 bytes take the code points 256, 257, ... in byte order.
std::array<char32_t, 256> ByteToCodePoint() {
  std::array<char32_t, 256> table{};
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    table[b] = printable ? static_cast<char32_t>(b) : next++;
  }
  return table;
}

namespace {

bool IsUnicodeSpace(char32_t cp) {
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
         cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

}  // namespace

Char ClassifyAt(std::string_view s, size_t i) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return {CharClass::kLetter, 1};
    if (c >= '0' && c <= '9') return {CharClass::kDigit, 1};
    if (c == ' ' || (c >= '\t' && c <= '\r')) return {CharClass::kSpace, 1};
    return {CharClass::kOther, 1};
  }
  char32_t cp = 0;
  const size_t len = DecodeUtf8(s, i, &cp);
  if (len == 0) return {CharClass::kLetter, 1};
  return {IsUnicodeSpace(cp) ? CharClass::kSpace : CharClass::kLetter, len};
}

namespace {

// Length of a contraction ('s 't 're 've 'm 'll 'd) at s[i], 0 if none.
size_t ContractionAt(std::string_view s, size_t i, bool any_case) {
  if (s[i] != '\'' || i + 1 >= s.size()) return 0;
  const auto lower = [&](size_t k) {
    const char c = s[k];
    return any_case && c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
  };
  const char a = lower(i + 1);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (i + 2 >= s.size()) return 0;
  const char b = lower(i + 2);
  return (a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l') ? 3 : 0;
}

// The scanner equivalent of
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// under the classes above: alternatives are tried in order at each position,
// as the regex engine does.
template <typename Emit>
void SplitGpt2(std::string_view s, Emit&& emit) {
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    if (const size_t len = ContractionAt(s, i, /*any_case=*/false); len > 0) {
      emit(s.substr(i, len));
      i += len;
      continue;
    }
    const Char first = ClassifyAt(s, i);
    size_t j = i;
    CharClass cls = first.cls;
    if (s[i] == ' ' && i + 1 < n) {
      const Char next = ClassifyAt(s, i + 1);
      if (next.cls != CharClass::kSpace) j = i + 1, cls = next.cls;
    }
    if (cls != CharClass::kSpace) {  // ` ?\p{L}+`, ` ?\p{N}+` or ` ?[^\s\p{L}\p{N}]+`
      while (j < n) {
        const Char c = ClassifyAt(s, j);
        if (c.cls != cls) break;
        j += c.len;
      }
      emit(s.substr(i, j - i));
      i = j;
      continue;
    }
    // A whitespace run. `\s+(?!\S)` leaves its last character to prefix the
    // word that follows; a single one before a word is taken by `\s+`.
    size_t end = i, last = i;
    while (end < n) {
      const Char c = ClassifyAt(s, end);
      if (c.cls != CharClass::kSpace) break;
      last = end;
      end += c.len;
    }
    if (end < n && last > i) end = last;
    emit(s.substr(i, end - i));
    i = end;
  }
}

bool IsNewline(char c) { return c == '\r' || c == '\n'; }

// The scanner equivalent of Llama-3's pattern (Qwen2's when max_digits is 1)
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//   ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// under the same classes.
template <typename Emit>
void SplitLlama3(std::string_view s, int max_digits, Emit&& emit) {
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const size_t start = i;
    const Char first = ClassifyAt(s, i);
    if (const size_t len = ContractionAt(s, i, /*any_case=*/true); len > 0) {
      i += len;
    } else if (first.cls == CharClass::kLetter ||
               (first.cls != CharClass::kDigit && !IsNewline(s[i]) && i + first.len < n &&
                ClassifyAt(s, i + first.len).cls == CharClass::kLetter)) {
      for (i += first.len; i < n;) {  // [^\r\n\p{L}\p{N}]?\p{L}+
        const Char c = ClassifyAt(s, i);
        if (c.cls != CharClass::kLetter) break;
        i += c.len;
      }
    } else if (first.cls == CharClass::kDigit) {
      for (int k = 0; k < max_digits && i < n && ClassifyAt(s, i).cls == CharClass::kDigit; ++k) {
        ++i;
      }
    } else if (first.cls == CharClass::kOther ||
               (s[i] == ' ' && i + 1 < n && ClassifyAt(s, i + 1).cls == CharClass::kOther)) {
      if (s[i] == ' ') ++i;  // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
      while (i < n && ClassifyAt(s, i).cls == CharClass::kOther) i += ClassifyAt(s, i).len;
      while (i < n && IsNewline(s[i])) ++i;
    } else {
      // A whitespace run: up to its last newline when it has one
      // (`\s*[\r\n]+`), else as in GPT-2's pattern.
      size_t end = i, last = i, after_newline = i;
      while (end < n) {
        const Char c = ClassifyAt(s, end);
        if (c.cls != CharClass::kSpace) break;
        last = end;
        end += c.len;
        if (IsNewline(s[last])) after_newline = end;
      }
      if (after_newline > i) {
        end = after_newline;
      } else if (end < n && last > i) {
        end = last;
      }
      i = end;
    }
    emit(s.substr(start, i - start));
  }
}

}  // namespace

void ForEachWord(std::string_view s, WordSplit style,
                 const std::function<void(std::string_view)>& emit) {
  switch (style) {
    case WordSplit::kGpt2:
      return SplitGpt2(s, emit);
    case WordSplit::kLlama3:
      return SplitLlama3(s, 3, emit);
    case WordSplit::kQwen2:
      return SplitLlama3(s, 1, emit);
  }
}

}  // namespace sy::engine::bpe_internal
