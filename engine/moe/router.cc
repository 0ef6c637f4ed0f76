#include "engine/moe/router.h"

#include <cassert>

#include "engine/model/layers.h"

namespace sy::engine {

void RouteTopK(float* logits, int tokens, int experts, int top_k, bool renormalize, int32_t* ids,
               float* weights) {
  assert(top_k >= 1 && top_k <= experts);
  for (int t = 0; t < tokens; ++t) {
    float* p = logits + static_cast<size_t>(t) * experts;
    Softmax(p, experts);
    int32_t* id = ids + static_cast<size_t>(t) * top_k;
    float* w = weights + static_cast<size_t>(t) * top_k;
    // k passes of argmax: k is small (2..8) and this keeps ties deterministic.
    float sum = 0.0f;
    for (int k = 0; k < top_k; ++k) {
      int best = -1;
      for (int e = 0; e < experts; ++e) {
        bool taken = false;
        for (int j = 0; j < k; ++j) taken = taken || id[j] == e;
        if (!taken && (best < 0 || p[e] > p[best])) best = e;
      }
      id[k] = best;
      w[k] = p[best];
      sum += p[best];
    }
    if (renormalize) {
      const float inv = 1.0f / sum;
      for (int k = 0; k < top_k; ++k) w[k] *= inv;
    }
  }
}

}  // namespace sy::engine
