// File: engine/scheduler/request.h
//
// Request: one generation request as the scheduler tracks it, from arrival to
// finish. A plain value owned by the Scheduler; a finished Request is handed
// back to the caller by Scheduler::Commit.
//
// Token bookkeeping (the same for fresh and preempted requests):
//   tokens()     = prompt followed by generated
//   computed     = how many of tokens() have K/V in the request's pages (and,
//                  for a hybrid model, are folded into its recurrent-state slot)
// A step feeds tokens()[computed, ...). While more than one token is
// outstanding (or nothing was generated yet) the request is in prefill and may
// be chunked; afterwards each step feeds exactly the last generated token
// (decode). A preempted request keeps its generated tokens and drops its
// pages and its state slot (computed = 0): it is recomputed later by
// prefilling prompt+generated from position 0, which starts from a zeroed slot.
//
// With the prefix cache (engine/prefix_cache), admission may start a request
// at computed = cached_len > 0: pages[0, cached_len / page_size) are then the
// tree's pages (shared, read-only, pinned by the lock on cache_node), and for
// a hybrid model the first step copies the tree's checkpoint (state_copy_from)
// into the request's own working slot. Later pages are the request's own
// until they are published to the tree.
//
// Times are microseconds since the run's epoch (the caller's clock), so tests
// can inject them.
//
// Thread-safety: a value; the Scheduler is single-threaded.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace sy::engine {

enum class RequestState { kWaiting, kRunning, kFinished };
enum class FinishReason { kNone, kEos, kLength, kCancelled };

// "eos" | "length" | "cancelled" | "" : the wire names of RequestDone.finish.
std::string_view FinishReasonName(FinishReason reason);

// What a client asks for.
struct RequestSpec {
  std::vector<int32_t> prompt;  // token ids; non-empty, each < vocab
  int max_new_tokens = 64;      // >= 1; further capped by the model's max_seq
  float temperature = 0.0f;     // 0: greedy
  uint64_t seed = 0;            // sampling seed; same seed -> same tokens
  bool ignore_eos = false;      // generate exactly max_new_tokens (benchmarks)
};

struct Request {
  int64_t id = 0;
  RequestSpec spec;
  RequestState state = RequestState::kWaiting;
  FinishReason finish = FinishReason::kNone;

  int device = -1;             // home device while running (DP attention rank)
  std::vector<int32_t> pages;  // page table on `device`
  // Recurrent-state slot on `device` while running, when that device's
  // StatePool has linear layers; -1 otherwise. Held from admission to finish
  // or preemption, so chunked prefill and decode continue in the same slot.
  int state_slot = -1;
  std::vector<int32_t> generated;
  int computed = 0;  // tokens with K/V in `pages`
  int preemptions = 0;

  // Prefix cache bookkeeping (scheduler-private; see the header comment).
  int cached_len = 0;        // leading tokens whose pages the tree owns
  int32_t cache_node = -1;   // RadixCache node locked for them; -1: none
  int state_copy_from = -1;  // checkpoint slot to copy into state_slot at the next step
  int ckpt_slot = -1;        // own slot receiving checkpoints (hybrid), not yet published
  int ckpt_len = 0;          // tokens of the state in ckpt_slot; 0: none yet
  int cache_hit_tokens = 0;  // prompt tokens reused at the last admission

  int64_t arrival_us = 0;
  int64_t first_token_us = -1;  // -1 until the first token is sampled
  int64_t finish_us = -1;

  int prompt_len() const { return static_cast<int>(spec.prompt.size()); }
  int total_len() const { return prompt_len() + static_cast<int>(generated.size()); }
  int32_t token_at(int pos) const {
    return pos < prompt_len() ? spec.prompt[pos] : generated[pos - prompt_len()];
  }
  // True while the next step would feed more than the last generated token.
  bool in_prefill() const { return generated.empty() || computed < total_len() - 1; }

  // Latency metrics; REQUIRES: state == kFinished.
  int64_t ttft_us() const { return first_token_us - arrival_us; }
  int64_t e2e_us() const { return finish_us - arrival_us; }
  // Mean time between output tokens after the first (0 with one token).
  int64_t tpot_us() const {
    const int64_t n = static_cast<int64_t>(generated.size());
    return n > 1 ? (finish_us - first_token_us) / (n - 1) : 0;
  }
};

}  // namespace sy::engine
