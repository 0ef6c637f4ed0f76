#include "engine/model/tokenizer.h"

namespace sy::engine {

std::vector<int32_t> Encode(std::string_view text, bool add_bos) {
  std::vector<int32_t> out;
  out.reserve(text.size() + 1);
  if (add_bos) out.push_back(kBosToken);
  for (unsigned char c : text) out.push_back(c);
  return out;
}

std::string Decode(const std::vector<int32_t>& tokens) {
  std::string out;
  out.reserve(tokens.size());
  for (int32_t t : tokens) {
    if (t >= 0 && t < 256) out.push_back(static_cast<char>(t));
  }
  return out;
}

}  // namespace sy::engine

namespace sy::engine {
namespace {

class ByteTokenizer final : public Tokenizer {
 public:
  std::vector<int32_t> Encode(std::string_view text, bool add_bos) const override {
    return sy::engine::Encode(text, add_bos);
  }
  std::string Decode(const std::vector<int32_t>& tokens) const override {
    return sy::engine::Decode(tokens);
  }
  int vocab() const override { return kTokenizerVocab; }
  int32_t bos() const override { return kBosToken; }
  int32_t eos() const override { return kEosToken; }
  std::string_view kind() const override { return "byte"; }
};

}  // namespace

std::unique_ptr<Tokenizer> MakeByteTokenizer() { return std::make_unique<ByteTokenizer>(); }

}  // namespace sy::engine
