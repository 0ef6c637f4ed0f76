// File: engine/model/tokenizer.h
//
// Tokenizer: text <-> token ids. Two implementations:
//  * the byte-level tokenizer (the default; token i < 256 is byte i, 256..259
//    are special), as free functions Encode/Decode and as ByteTokenizer;
//  * a Hugging Face byte-level BPE tokenizer read from a model directory's
//    tokenizer.json (model/bpe_tokenizer.h), used when the directory has one.
//
//   std::unique_ptr<Tokenizer> tok = MakeByteTokenizer();
//   std::vector<int32_t> ids = tok->Encode("hello", /*add_bos=*/true);
//
// Byte-level Encode never fails; Decode maps specials to nothing (BOS/PAD) and
// is not required to produce valid UTF-8 (callers showing text replace it).
//
// Thread-safety: Encode/Decode are const and safe from any thread.
#pragma once

#include <cstdint>
#include <memory>
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

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // With add_bos, prepends bos() when the tokenizer has one (bos() >= 0).
  virtual std::vector<int32_t> Encode(std::string_view text, bool add_bos) const = 0;
  virtual std::string Decode(const std::vector<int32_t>& tokens) const = 0;
  virtual int vocab() const = 0;              // ids are in [0, vocab)
  virtual int32_t bos() const = 0;            // -1 when none
  virtual int32_t eos() const = 0;            // -1 when none (the model config's EOS still applies)
  virtual std::string_view kind() const = 0;  // "byte" | "bpe"
};

std::unique_ptr<Tokenizer> MakeByteTokenizer();

}  // namespace sy::engine
