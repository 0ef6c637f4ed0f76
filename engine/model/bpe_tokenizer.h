// File: engine/model/bpe_tokenizer.h
//
// A Hugging Face `tokenizer.json` byte-level BPE tokenizer (the GPT-2 /
// Llama-3 / Qwen / Ling family), behind the Tokenizer interface (kind() ==
// "bpe"). Owns its tables; loading reads the file once (GPT-2's 50k vocab
// takes about half a second, mostly JSON parsing), so the model loader calls
// it once per model directory that has a tokenizer.json.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tok, LoadBpeTokenizer("m/tokenizer.json", 156892));
//
// What is read:
//  * "model": {"type": "BPE", "vocab": {token: id}, "merges": ["a b", ...]
//    (older files) or [["a", "b"], ...] (newer), "ignore_merges" (a word that
//    is a whole vocab token is emitted as is)}. "byte_fallback", "dropout" and
//    "unk_token" have no effect: every byte has a token, encoding is
//    deterministic.
//  * "added_tokens": matched verbatim in the input before anything else,
//    longest first, honouring lstrip / rstrip / single_word, so
//    "<|endoftext|>" in text becomes its id (special or not).
//  * "pre_tokenizer": ByteLevel (add_prefix_space, use_regex), or a Sequence
//    of Split and ByteLevel steps. Any other type is refused, by name.
//  * "normalizer": none, or NFC (not applied: text is taken as already NFC).
//    "decoder": none or ByteLevel. Others are refused, by name.
//  * "post_processor": only for bos(), see below.
//
// Word splitting (the pre-tokenizer's regex) is done by hand-written
// scanners, since std::regex has no Unicode classes. Three patterns:
//  * GPT-2's (ByteLevel with use_regex, and any Split regex not below)
//      's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//  * Llama-3's Split regex, recognised verbatim:
//      (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//       ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//  * Qwen2's: the same with \p{N} (one digit per word).
// All three share one approximation of the Unicode classes: ASCII is
// classified exactly; a non-ASCII code point counts as a letter unless it is
// Unicode White_Space (U+00A0, U+3000, ...), and a byte that is not valid
// UTF-8 counts as a letter. So ASCII text splits exactly as the reference
// does; non-ASCII punctuation, symbols and digits are grouped with adjacent
// letters (still a valid tokenization that decodes back to the same bytes,
// but its ids can differ from the reference's). A file whose Split regex is
// some other pattern gets GPT-2's scanner: lossless, but ids may differ.
//
// BPE inside each word: byte symbols (GPT-2's bytes_to_unicode table) merged
// pair by pair, lowest merge rank first, leftmost first on ties.
//
// bos(): the first element of the post_processor's TemplateProcessing
// "single" template when that is a special token (also inside a Sequence
// post-processor); else an added token "<|startoftext|>", "<s>" or
// "<|begin_of_text|>"; else -1.
// eos(): the `eos` argument when >= 0; else an added token "<|endoftext|>",
// "</s>", "<|end_of_text|>" or "<|im_end|>" (first found, in that order);
// else -1.
// vocab(): max id over model.vocab and added_tokens, plus one.
//
// Decode: vocab tokens map back to their bytes; added tokens give their
// content verbatim; bos(), eos() and a pad token ("<pad>", "<|pad|>",
// "[PAD]") give nothing; ids with no token (holes, out of range) are skipped.
// Hence Decode(Encode(s, false)) == s for any bytes s, unless s contains the
// text of a silent token or the ByteLevel step has add_prefix_space.
//
// Errors are INVALID_ARGUMENT naming the file (`origin`) and what is wrong:
// not JSON, model.type not BPE, a merge whose parts or result are not in the
// vocab, duplicate ids, a byte with no token, an unsupported pre-tokenizer /
// normalizer / decoder type. A missing file is NOT_FOUND.
//
// Thread-safety: immutable after loading; Encode/Decode from any thread.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "engine/model/tokenizer.h"

namespace sy::engine {

// eos: the model config's EOS id (reported by eos()); -1 to take it from the file.
Result<std::unique_ptr<Tokenizer>> LoadBpeTokenizer(const std::string& path, int32_t eos);
// The same from JSON text (for tests); `origin` names it in errors.
Result<std::unique_ptr<Tokenizer>> ParseBpeTokenizer(const std::string& json_text,
                                                     const std::string& origin, int32_t eos);

// The scanners described above.
enum class WordSplit { kGpt2, kLlama3, kQwen2 };
// The word split Encode applies to text between added tokens, exposed for
// tests and tools: views into `text`, in order, covering it exactly.
std::vector<std::string_view> SplitWords(std::string_view text, WordSplit style);

}  // namespace sy::engine
