// File: engine/workload/corpus.cc
//
// The built-in prompt corpus: plain English about serving systems and the
// everyday world, so byte-level prompts look like text (letters, spaces,
// punctuation) rather than noise.
#include <string>
#include <vector>

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

}  // namespace sy::engine
