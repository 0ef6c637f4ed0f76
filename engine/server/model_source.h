// File: engine/server/model_source.h
//
// Resolves the `--model` argument every moe-engine subcommand takes: a preset
// name (model/config.h; weights built from the seed) or a model directory
// (config.json + *.safetensors, model_loader/checkpoint.h), with its
// tokenizer: the directory's tokenizer.json when present (byte-level BPE,
// model/bpe_tokenizer.h), else the byte-level tokenizer.
//
//   ASSIGN_OR_RETURN(LoadedModel m, LoadModel("ckpt/"));
//   runner_options.checkpoint = m.checkpoint.get();   // null for a preset
//
// A name that is neither a preset nor a directory is NOT_FOUND listing the
// presets; a directory's errors are those of Checkpoint::Open (naming the
// file, tensor and field) and of the tokenizer.
//
// Thread-safety: LoadModel is a pure function of the filesystem; the result
// is a value (the checkpoint's mapping lives as long as it does).
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "engine/model/config.h"
#include "engine/model/tokenizer.h"
#include "engine/model_loader/checkpoint.h"

namespace sy::engine {

struct LoadedModel {
  ModelConfig config;
  std::unique_ptr<Checkpoint> checkpoint;      // null for a preset
  std::shared_ptr<const Tokenizer> tokenizer;  // never null
  std::string source;                          // "preset" or the directory
};

Result<LoadedModel> LoadModel(const std::string& name_or_dir);

}  // namespace sy::engine
