// File: tests/engine/scheduler/test_util.h
//
// Shared fixtures of the scheduler tests: real pools (tiny rows, since the
// scheduler only counts pages and slots), request specs, and the model's
// side of a step as the scheduler sees it.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "base/status_matchers.h"
#include "engine/scheduler/scheduler.h"

namespace sy::engine {

inline constexpr int32_t kEos = 257;

// Real pools, one per device; tiny rows since the scheduler only counts pages.
struct Pools {
  Pools() = default;
  Pools(int devices, int pages, int page_size) {
    for (int d = 0; d < devices; ++d) {
      owned.push_back(std::make_unique<KvPool>(KvPoolOptions{
          .num_pages = pages, .page_size = page_size, .layers = 1, .kv_heads = 1, .head_dim = 1}));
      ptrs.push_back(owned.back().get());
    }
  }
  int free_total() const {
    int n = 0;
    for (KvPool* p : ptrs) n += p->free_pages();
    return n;
  }
  std::vector<std::unique_ptr<KvPool>> owned;
  std::vector<KvPool*> ptrs;
};

// The prefix cache is off unless a test asks: most tests count pages, and a
// cache keeps pages after a request finishes.
inline SchedulerOptions Opts(int budget, int max_running = 8, int reserve = 0, bool cache = false) {
  SchedulerOptions o;
  o.prefix_cache = cache;
  o.max_batch_tokens = budget;
  o.max_running = max_running;
  o.admission_reserve_pages = reserve;
  o.max_seq = 256;
  return o;
}

inline RequestSpec Spec(int prompt_len, int max_new, bool ignore_eos = true) {
  RequestSpec s;
  for (int i = 0; i < prompt_len; ++i) s.prompt.push_back(65 + i % 26);
  s.max_new_tokens = max_new;
  s.ignore_eos = ignore_eos;
  return s;
}

// The model's side of a step, as the scheduler sees it: one token per
// sampling seq, chosen by `next` (default: 'x').
inline StepOutput Outputs(const BatchInput& b,
                          const std::function<int32_t(const SeqInput&)>& next = nullptr) {
  StepOutput out;
  for (const SeqInput& s : b.seqs)
    out.outputs.push_back({s.request_id, s.sample ? (next ? next(s) : 'x') : -1});
  return out;
}

inline int Tokens(const BatchInput& b) {
  int n = 0;
  for (const SeqInput& s : b.seqs) n += static_cast<int>(s.tokens.size());
  return n;
}

// Runs steps until idle; checks the page tables cover every fed position.
inline std::vector<Request> Drain(Scheduler& s, int64_t* now, int max_steps = 10000) {
  std::vector<Request> done;
  for (int i = 0; i < max_steps && !s.idle(); ++i) {
    BatchInput b = s.Plan();
    EXPECT_LE(Tokens(b), s.options().max_batch_tokens);
    for (const SeqInput& q : b.seqs) {
      EXPECT_GE(static_cast<int>(q.pages.size()) * 4,
                q.start_pos + static_cast<int>(q.tokens.size()));
    }
    auto r = s.Commit(Outputs(b), *now += 1000);
    EXPECT_THAT(r.status(), IsOk());
    for (Request& q : *r) done.push_back(std::move(q));
  }
  return done;
}

// Real KV and state pools per device; one-float slots since the scheduler only
// counts them.
struct HybridPools {
  HybridPools(std::vector<int> pages, std::vector<int> slots, int page_size, int layers = 1) {
    for (size_t d = 0; d < pages.size(); ++d) {
      kv.owned.push_back(std::make_unique<KvPool>(KvPoolOptions{.num_pages = pages[d],
                                                                .page_size = page_size,
                                                                .layers = 1,
                                                                .kv_heads = 1,
                                                                .head_dim = 1}));
      kv.ptrs.push_back(kv.owned.back().get());
      state.push_back(std::make_unique<StatePool>(
          StatePoolOptions{.slots = slots[d], .layers = layers, .state_floats = 1}));
      state_ptrs.push_back(state.back().get());
    }
  }
  // (free pages, free slots) of every device, for before/after comparisons.
  std::vector<std::pair<int, int>> Free() const {
    std::vector<std::pair<int, int>> f;
    for (size_t d = 0; d < state.size(); ++d)
      f.emplace_back(kv.ptrs[d]->free_pages(), state[d]->free_slots());
    return f;
  }
  Pools kv;
  std::vector<std::unique_ptr<StatePool>> state;
  std::vector<StatePool*> state_ptrs;
};

}  // namespace sy::engine
