// File: engine/model/attention.h
//
// Causal multi-head attention over one request's paged KV cache (KvPool).
// A request's position p lives at page pages[p / page_size], slot
// p % page_size. New tokens' K/V are written first (WriteKv), then each new
// token at position p attends to positions 0..p (PagedAttention), which is
// what makes chunked prefill and decode the same code path.
//
// Heads: query head h reads KV head h / (heads / kv_heads) (GQA when
// kv_heads < heads). Scores are scaled by 1/sqrt(head_dim).
//
// Thread-safety: called on the pool's device worker only (see kv_pool.h).
#pragma once

#include <cstdint>

#include "engine/pools/kv_pool.h"

namespace sy::engine {

struct AttentionShape {
  int heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
};

// Copies K and V of `n` tokens (row i at k + i*stride, v + i*stride, each
// kv_heads*head_dim floats) to positions start_pos..start_pos+n-1.
// REQUIRES: pages covers start_pos + n positions.
void WriteKv(KvPool& pool, int layer, const int32_t* pages, int start_pos, int n, const float* k,
             const float* v, int stride, const AttentionShape& shape);

// out row i (heads*head_dim floats at out + i*out_stride) = attention of query
// row i (q + i*q_stride) at position start_pos + i over positions 0..start_pos+i.
// `scores` holds heads * (start_pos + n) floats.
// REQUIRES: WriteKv already ran for these tokens.
void PagedAttention(const KvPool& pool, int layer, const int32_t* pages, int start_pos, int n,
                    const float* q, int q_stride, const AttentionShape& shape, float* scores,
                    float* out, int out_stride);

// FLOPs of PagedAttention for n tokens after start_pos (QK^T and PV).
int64_t AttentionFlops(int start_pos, int n, const AttentionShape& shape);

}  // namespace sy::engine
