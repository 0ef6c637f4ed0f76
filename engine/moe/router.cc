#include "engine/moe/router.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <vector>

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

void RouteGroupedSigmoid(float* logits, const float* bias, int tokens, const GroupedRouting& r,
                         int32_t* ids, float* weights) {
  const int experts = r.experts, top_k = r.top_k;
  const int group_size = experts / r.n_group;
  assert(experts % r.n_group == 0 && r.topk_group >= 1 && r.topk_group <= r.n_group);
  assert(top_k >= 1 && top_k <= r.topk_group * group_size);
  // Per call, not per token: n_group floats and flags.
  std::vector<float> group_score(r.n_group);
  std::vector<char> kept(r.n_group);
  for (int t = 0; t < tokens; ++t) {
    float* s = logits + static_cast<size_t>(t) * experts;
    for (int e = 0; e < experts; ++e) s[e] = 1.0f / (1.0f + std::exp(-s[e]));
    // A group's score: its two highest biased scores (the one score when a
    // group has a single expert).
    for (int g = 0; g < r.n_group; ++g) {
      float first = -INFINITY, second = -INFINITY;
      for (int e = g * group_size; e < (g + 1) * group_size; ++e) {
        const float b = s[e] + bias[e];
        if (b > first) {
          second = first;
          first = b;
        } else if (b > second) {
          second = b;
        }
      }
      group_score[g] = group_size == 1 ? first : first + second;
    }
    std::fill(kept.begin(), kept.end(), 0);
    for (int k = 0; k < r.topk_group; ++k) {
      int best = -1;
      for (int g = 0; g < r.n_group; ++g) {
        if (!kept[g] && (best < 0 || group_score[g] > group_score[best])) best = g;
      }
      kept[best] = 1;
    }
    // Only kept groups are candidates: a dropped group is skipped outright,
    // never masked to a value that a negative biased score could lose to.
    int32_t* id = ids + static_cast<size_t>(t) * top_k;
    float* w = weights + static_cast<size_t>(t) * top_k;
    float sum = 0.0f;
    for (int k = 0; k < top_k; ++k) {
      int best = -1;
      float best_b = 0.0f;
      for (int e = 0; e < experts; ++e) {
        if (!kept[e / group_size]) continue;
        bool taken = false;
        for (int j = 0; j < k; ++j) taken = taken || id[j] == e;
        const float b = s[e] + bias[e];
        if (!taken && (best < 0 || b > best_b)) {
          best = e;
          best_b = b;
        }
      }
      id[k] = best;
      w[k] = s[best];
      sum += s[best];
    }
    const float scale = r.renormalize ? r.scaling / sum : r.scaling;
    for (int k = 0; k < top_k; ++k) w[k] *= scale;
  }
}

}  // namespace sy::engine
