#include "engine/server/model_source.h"

#include <filesystem>
#include <system_error>

#include "engine/model/bpe_tokenizer.h"

namespace sy::engine {

Result<LoadedModel> LoadModel(const std::string& name_or_dir) {
  LoadedModel m;
  Result<ModelConfig> preset = PresetConfig(name_or_dir);
  if (preset.ok()) {
    m.config = std::move(preset).value();
    m.tokenizer = MakeByteTokenizer();
    m.source = "preset";
    return m;
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(name_or_dir, ec)) {
    return NotFound("--model '" + name_or_dir.substr(0, 200) +
                    "' is neither a model directory nor a preset (" + preset.status().message() +
                    ")");
  }
  ASSIGN_OR_RETURN(m.checkpoint, Checkpoint::Open(name_or_dir));
  m.config = m.checkpoint->config();
  m.source = name_or_dir;
  const std::string tok_path = (std::filesystem::path(name_or_dir) / "tokenizer.json").string();
  if (std::filesystem::exists(tok_path, ec)) {
    ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tok,
                     LoadBpeTokenizer(tok_path, m.config.eos_token));
    if (tok->vocab() > m.config.vocab) {
      return InvalidArgument(tok_path + " has " + std::to_string(tok->vocab()) +
                             " tokens, more than the model's vocab_size " +
                             std::to_string(m.config.vocab));
    }
    m.tokenizer = std::move(tok);
  } else {
    if (m.config.vocab < kTokenizerVocab) {
      return InvalidArgument(name_or_dir + " has no tokenizer.json and its vocab_size " +
                             std::to_string(m.config.vocab) +
                             " is too small for the byte-level tokenizer (" +
                             std::to_string(kTokenizerVocab) + ")");
    }
    m.tokenizer = MakeByteTokenizer();
  }
  return m;
}

}  // namespace sy::engine
