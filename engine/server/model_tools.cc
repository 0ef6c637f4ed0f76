#include "engine/server/model_tools.h"

#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "engine/model/weights.h"
#include "engine/model_executor/model_runner.h"
#include "engine/model_loader/checkpoint.h"
#include "engine/server/model_source.h"

namespace sy::engine {

Status MakeCheckpoint(const MakeCheckpointOptions& o) {
  ASSIGN_OR_RETURN(ModelConfig c, PresetConfig(o.preset));
  // Built in fp32 with every expert present, then written: refuse before the
  // allocation would take the machine down.
  const double need = 4.0 * static_cast<double>(c.ParamCount());
  const double have = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
  if (have > 0 && need > 0.8 * have) {
    char buf[200];
    std::snprintf(buf, sizeof(buf),
                  "preset '%s' has %.2fB parameters (%.1f GiB in fp32), more than this machine's "
                  "%.1f GiB can build",
                  c.name.c_str(), static_cast<double>(c.ParamCount()) / 1e9, need / (1 << 30),
                  have / (1 << 30));
    return ResourceExhausted(buf);
  }
  std::vector<int> all(c.experts);
  for (int e = 0; e < c.experts; ++e) all[e] = e;
  return WriteCheckpoint(c, BuildWeights(c, o.seed, all), o.out, o.dtype, o.shard_bytes);
}

Result<std::vector<std::vector<float>>> Score(const ScoreOptions& o) {
  if (o.tokens.empty()) return InvalidArgument("--tokens is empty");
  ASSIGN_OR_RETURN(LoadedModel m, LoadModel(o.model));
  const int n = static_cast<int>(o.tokens.size());
  if (n > m.config.max_seq) {
    return InvalidArgument(std::to_string(n) + " tokens exceed the model's max_seq " +
                           std::to_string(m.config.max_seq));
  }
  ModelRunnerOptions ro;
  ro.devices = o.devices;
  ro.seed = o.seed;
  ro.checkpoint = m.checkpoint.get();
  ro.page_size = 16;
  ro.kv_pages_per_device = KvPool::PagesFor(n, ro.page_size);
  ro.state_slots_per_device = 1;
  ASSIGN_OR_RETURN(std::unique_ptr<ModelRunner> runner, ModelRunner::Create(m.config, ro));
  SeqInput seq;
  seq.request_id = 1;
  seq.device = 0;
  RETURN_IF_ERROR(runner->kv_pool(0).Allocate(ro.kv_pages_per_device, &seq.pages));
  if (runner->state_pool(0).slots() > 0) {
    ASSIGN_OR_RETURN(seq.state_slot, runner->state_pool(0).Allocate());
  }
  // One position per forward: the logits after every prefix, through the
  // decode path the server runs (the prefill path is tested equal to it).
  std::vector<std::vector<float>> out;
  for (int i = 0; i < n; ++i) {
    seq.tokens = {o.tokens[i]};
    seq.start_pos = i;
    ASSIGN_OR_RETURN(auto logits, runner->Logits(BatchInput{.step = i, .seqs = {seq}}));
    out.push_back(std::move(logits[0]));
  }
  return out;
}

void PrintScore(const std::vector<std::vector<float>>& logits, std::ostream& out) {
  nlohmann::json j;
  j["logits"] = logits;
  out << j.dump() << "\n";
}

}  // namespace sy::engine
