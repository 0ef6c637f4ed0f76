// File: engine/workload/corpus.cc
//
// The built-in prompt corpus: plain English about serving systems and the
// everyday world, so byte-level prompts look like text (letters, spaces,
// punctuation) rather than noise; and TokenSource, which cuts prompts from it.
#include <algorithm>
#include <cassert>
#include <cmath>
#include <string>
#include <vector>

#include "engine/workload/scenarios.h"
#include "engine/workload/workload.h"

namespace sy::engine {

const std::vector<std::string>& CorpusSentences() {
  static const std::vector<std::string> kSentences = {
      "The quick brown fox jumps over the lazy dog.",
      "A mixture of experts routes every token to a few specialists.",
      "The scheduler batches requests so the accelerator stays busy.",
      "Rain fell on the harbour while the ships waited for the tide.",
      "Each device keeps the attention state of its own requests.",
      "She wrote the report in the morning and sent it before lunch.",
      "Expert parallelism spreads the experts of a layer over many devices.",
      "The library opens at nine and closes at six on weekdays.",
      "A paged cache stores keys and values in fixed-size blocks.",
      "The old bridge was repaired after the winter storms.",
      "Throughput rises with batch size until memory runs out.",
      "He planted tomatoes, beans and a row of sunflowers.",
      "Latency is the time a user waits for the first token.",
      "The orchestra tuned their instruments before the concert began.",
      "All-to-all communication sends each token to its chosen experts.",
      "The museum keeps a collection of maps from the sixteenth century.",
      "When the pool is full, the newest request gives back its pages.",
      "Children played football in the park until the lights came on.",
      "A router scores every expert and keeps the top few.",
      "The train to the coast leaves every hour from platform four.",
      "Prefill reads the whole prompt; decode produces one token at a time.",
      "The baker rises early to have bread ready by dawn.",
      "Load imbalance leaves some devices idle while others work.",
      "Mountains to the north were covered in fresh snow.",
      "Chunked prefill splits a long prompt across several steps.",
      "The cat slept on the warm windowsill all afternoon.",
      "A telemetry stream lets operators watch the engine as it runs.",
      "They walked along the river and talked about their plans.",
      "Shared experts see every token, routed experts only some.",
      "The committee will meet again next Thursday to decide.",
      "Continuous batching admits new requests as soon as others finish.",
      "Bright lanterns hung across the narrow street during the festival.",
      "Every step is a barrier: all devices finish before the next begins.",
      "The recipe calls for two eggs, flour, sugar and a pinch of salt.",
      "Data parallel attention avoids duplicating the cache on each device.",
      "The lighthouse keeper climbed the stairs to light the lamp.",
      "A heartbeat tells observers the engine is still alive.",
      "Autumn leaves drifted slowly down onto the quiet lake.",
      "Balanced expert placement keeps every device equally busy.",
      "The students read the poem aloud and then discussed its meaning.",
  };
  return kSentences;
}

namespace workload_internal {

int TokenSource::Draw(const LengthDist& d) {
  switch (d.kind) {
    case LengthDist::Kind::kFixed:
      return d.min;
    case LengthDist::Kind::kUniform:
      return std::uniform_int_distribution<int>(d.min, d.max)(rng_);
    case LengthDist::Kind::kLogNormal: {
      // E[X] = exp(mu + sigma^2 / 2), so mu is chosen to hit the mean.
      const double mu = std::log(d.mean) - d.sigma * d.sigma / 2;
      const double x = std::lognormal_distribution<double>(mu, d.sigma)(rng_);
      return static_cast<int>(std::clamp<long long>(std::llround(x), d.min, d.max));
    }
  }
  return d.min;
}

std::vector<int32_t> TokenSource::Text(int tokens, bool bos, std::string_view header) {
  assert(tokens >= 1);
  const auto& corpus = CorpusSentences();
  size_t i = std::uniform_int_distribution<size_t>(0, corpus.size() - 1)(rng_);
  std::string text(header);
  auto extend_to = [&](size_t bytes) {
    while (text.size() < bytes) {
      if (text.size() > header.size()) text += ' ';
      text += corpus[i++ % corpus.size()];
    }
  };
  if (!tokenizer_) {
    const size_t bytes = static_cast<size_t>(tokens - (bos ? 1 : 0));
    extend_to(bytes);
    text.resize(bytes);
    return engine::Encode(text, bos);
  }
  // A subword tokenizer packs several bytes per token: encode enough text,
  // then cut to exactly `tokens`.
  std::vector<int32_t> out;
  for (size_t bytes = static_cast<size_t>(tokens) * 4 + header.size();; bytes *= 2) {
    extend_to(bytes);
    out = tokenizer_->Encode(text, bos);
    if (static_cast<int>(out.size()) >= tokens) break;
  }
  out.resize(tokens);
  return out;
}

std::vector<int32_t> TokenSource::Prompt(int tokens) {
  return Text(tokens, true, "[" + std::to_string(prompts_++) + "] ");
}

std::vector<int32_t> TokenSource::Encode(std::string_view text) const {
  return tokenizer_ ? tokenizer_->Encode(text, /*add_bos=*/true)
                    : engine::Encode(text, /*add_bos=*/true);
}

}  // namespace workload_internal
}  // namespace sy::engine
