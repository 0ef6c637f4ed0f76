// File: engine/server/model_tools.h
//
// The model subcommands of moe-engine, as functions the tests call directly:
//
//   moe-engine make-checkpoint --preset P --out DIR [--seed S] [--dtype f32|bf16]
//       writes the preset's weights (built from the seed, every expert) as a
//       checkpoint in the Ling3 layout (model_loader/checkpoint.h); loading it
//       gives back the same numbers, so `--model DIR` serves with the logits
//       of `--model P`.
//   moe-engine score (--model DIR | --preset P) --tokens 1,2,3 [--devices N]
//       prints {"logits": [[...vocab floats...] per position]}: the logits
//       after each token of the sequence, so another implementation of the
//       architecture can be compared with ours on the same checkpoint.
//
// Thread-safety: each call builds and owns its model.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/model_loader/safetensors.h"

namespace sy::engine {

struct MakeCheckpointOptions {
  std::string preset;
  std::string out;
  uint64_t seed = 1;
  DType dtype = DType::kF32;
  int64_t shard_bytes = 2LL << 30;
};

// RESOURCE_EXHAUSTED when the preset's weights would not fit in memory.
Status MakeCheckpoint(const MakeCheckpointOptions& o);

struct ScoreOptions {
  std::string model;  // preset name or model directory
  std::vector<int32_t> tokens;
  int devices = 1;
  uint64_t seed = 1;  // presets only
};

// logits[i] = next-token logits after tokens[0..i].
Result<std::vector<std::vector<float>>> Score(const ScoreOptions& o);
// {"logits": [[...], ...]} on one line.
void PrintScore(const std::vector<std::vector<float>>& logits, std::ostream& out);

}  // namespace sy::engine
