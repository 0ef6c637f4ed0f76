// File: engine/entrypoints/detokenizer.h
//
// IncrementalDetokenizer: turns a growing list of generated tokens into
// streamed text pieces that never split a UTF-8 character. Each Add decodes
// every token so far with the tokenizer and emits the new suffix, holding back
// a trailing byte sequence that is still an incomplete UTF-8 character (a
// later token may complete it). Invalid sequences become U+FFFD (one per
// maximal ill-formed subpart, as the Unicode standard recommends), so the
// pieces are always valid UTF-8 and, after Finish, concatenate to
// SanitizeUtf8(tokenizer.Decode(all tokens)).
//
//   IncrementalDetokenizer d(tok);
//   for (...) send(d.Add(update.tokens));
//   send(d.Finish());
//
// Decoding everything each time costs O(n^2) bytes per request, small next
// to a model step at the context lengths served here, and needs no
// assumption about how the tokenizer joins tokens. Should a tokenizer's
// decode ever rewrite text already sent, nothing is emitted until the
// decoded text again extends what was sent (nothing sent is retracted).
//
// Thread-safety: one instance per request, used from one thread; the
// tokenizer must outlive it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/model/tokenizer.h"

namespace sy::engine {

// `bytes` as valid UTF-8, ill-formed subparts replaced by U+FFFD. With
// hold_tail, a trailing incomplete (but so far well-formed) character is
// left out and *consumed stops before it; otherwise it is replaced too.
std::string SanitizeUtf8(std::string_view bytes, bool hold_tail = false,
                         size_t* consumed = nullptr);

class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(const Tokenizer* tokenizer) : tokenizer_(tokenizer) {}

  // Appends tokens; returns the text that became complete (may be empty).
  std::string Add(const std::vector<int32_t>& tokens);
  // No more tokens: returns whatever was held back, replaced as invalid.
  std::string Finish();
  // Everything returned so far.
  const std::string& text() const { return sent_; }

 private:
  std::string Emit(bool final);

  const Tokenizer* tokenizer_;
  std::vector<int32_t> tokens_;
  std::string sent_;
};

}  // namespace sy::engine
