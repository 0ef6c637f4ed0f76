// File: tests/engine/model_executor/switch_test_util.h
//
// Shared by the TP <-> EP switch tests: a runner on a preset, a fixed set of
// in-flight requests stepped through Logits (greedy), bit comparison of
// logits and the devices' expert checksums.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/status_matchers.h"
#include "engine/model/config.h"
#include "engine/model_executor/model_runner.h"

namespace sy::engine {

inline constexpr int kDevices = 4;

inline std::unique_ptr<ModelRunner> Make(const std::string& preset, ModelRunnerOptions o = {}) {
  const Result<ModelConfig> c = PresetConfig(preset);
  EXPECT_THAT(c.status(), IsOk());
  o.seed = 5;
  o.kv_pages_per_device = 96;
  o.state_slots_per_device = 8;
  auto r = ModelRunner::Create(*c, o);
  EXPECT_THAT(r.status(), IsOk()) << preset;
  return r.ok() ? std::move(r).value() : nullptr;
}

// Seven requests on devices 0..2 (device 3 holds none: it still computes its
// experts / slices), prompts of 3 to 40 tokens (prefill GEMMs on both sides
// of kSmallGemmRows), then decode steps. Pages and state slots come from the pools.
class Session {
 public:
  explicit Session(ModelRunner* r) : runner_(r) {
    for (int i = 0; i < 7; ++i) {
      SeqInput s;
      s.request_id = 100 + i;
      s.device = i % 3;
      const int len = 3 + (i * 13) % 38;
      for (int t = 0; t < len; ++t) s.tokens.push_back((i * 31 + t * 17 + 5) % 250);
      // Taken from the pools, as the scheduler does: a switch moves the
      // pages and slots that are in use, and only those.
      EXPECT_THAT(r->kv_pool(s.device).Allocate(8, &s.pages), IsOk());
      if (r->config().linear_layers() > 0)
        s.state_slot = r->state_pool(s.device).Allocate().value();
      seqs_.push_back(s);
    }
  }
  // One step's logits (prefill first, then one decode token per seq).
  std::vector<std::vector<float>> Next() {
    BatchInput b{.step = step_++, .seqs = seqs_};
    auto logits = runner_->Logits(b);
    EXPECT_THAT(logits.status(), IsOk());
    if (!logits.ok()) return {};
    for (size_t i = 0; i < seqs_.size(); ++i) {
      SeqInput& s = seqs_[i];
      s.start_pos += static_cast<int>(s.tokens.size());
      int best = 0;
      for (int v = 1; v < static_cast<int>((*logits)[i].size()); ++v) {
        if ((*logits)[i][v] > (*logits)[i][best]) best = v;
      }
      s.tokens = {best};
    }
    return std::move(logits).value();
  }

 private:
  ModelRunner* runner_;
  std::vector<SeqInput> seqs_;
  int64_t step_ = 0;
};

inline bool SameBits(const std::vector<std::vector<float>>& a,
                     const std::vector<std::vector<float>>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].size() != b[i].size() ||
        std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)) != 0) {
      return false;
    }
  }
  return true;
}

inline std::vector<uint64_t> Checksums(const ModelRunner& r, ParallelMode layout) {
  std::vector<uint64_t> out;
  for (int d = 0; d < r.devices(); ++d) out.push_back(r.expert_buffer(d)->Checksum(layout));
  return out;
}

}  // namespace sy::engine
