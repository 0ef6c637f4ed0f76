#include "engine/entrypoints/detokenizer.h"

namespace sy::engine {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Length of the character a lead byte starts and the allowed range of its
// second byte (which rules out overlongs, surrogates and > U+10FFFF);
// 0 for a byte that cannot start a character.
struct Lead {
  int len;
  unsigned char lo, hi;
};

Lead LeadOf(unsigned char b) {
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b >= 0xE1 && b <= 0xEC) return {3, 0x80, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b >= 0xEE && b <= 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

}  // namespace

std::string SanitizeUtf8(std::string_view bytes, bool hold_tail, size_t* consumed) {
  std::string out;
  out.reserve(bytes.size());
  const size_t n = bytes.size();
  size_t i = 0;
  while (i < n) {
    const auto b = static_cast<unsigned char>(bytes[i]);
    if (b < 0x80) {
      out += static_cast<char>(b);
      ++i;
      continue;
    }
    const Lead lead = LeadOf(b);
    if (lead.len == 0) {
      out += kReplacement;
      ++i;
      continue;
    }
    int j = 1;  // bytes of this character that are well formed so far
    for (; j < lead.len && i + j < n; ++j) {
      const auto c = static_cast<unsigned char>(bytes[i + j]);
      const unsigned char lo = j == 1 ? lead.lo : 0x80, hi = j == 1 ? lead.hi : 0xBF;
      if (c < lo || c > hi) break;
    }
    if (j == lead.len) {
      out.append(bytes.substr(i, j));
    } else if (i + j == n && hold_tail) {
      break;  // incomplete at the end: a later byte may complete it
    } else {
      out += kReplacement;  // the maximal ill-formed subpart
    }
    i += j;
  }
  if (consumed != nullptr) *consumed = i;
  return out;
}

std::string IncrementalDetokenizer::Add(const std::vector<int32_t>& tokens) {
  tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
  return tokens.empty() ? std::string() : Emit(/*final=*/false);
}

std::string IncrementalDetokenizer::Finish() { return Emit(/*final=*/true); }

std::string IncrementalDetokenizer::Emit(bool final) {
  const std::string text = SanitizeUtf8(tokenizer_->Decode(tokens_), /*hold_tail=*/!final);
  if (text.size() <= sent_.size() || text.compare(0, sent_.size(), sent_) != 0) return {};
  std::string piece = text.substr(sent_.size());
  sent_ += piece;
  return piece;
}

}  // namespace sy::engine
