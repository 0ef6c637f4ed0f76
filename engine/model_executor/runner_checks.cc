#include "engine/model_executor/runner_checks.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "engine/pools/kv_pool.h"

namespace sy::engine {

namespace {

std::string SeqName(size_t i, const SeqInput& s) {
  return "seq " + std::to_string(i) + " (request " + std::to_string(s.request_id) + ")";
}

// The prefix-cache fields of one seq (SeqInput::state_copy_from,
// checkpoint_slot, checkpoint_len), given `slots` state slots per device
// (0 for a model without linear layers).
Status ValidatePrefixFields(size_t i, const SeqInput& s, int slots) {
  // A seq without prefix-cache fields has nothing to check here, and the
  // messages below cost two strings per seq (most seqs, every step).
  if (s.checkpoint_slot == -1 && s.checkpoint_len == 0 && s.state_copy_from == -1) {
    return Status::Ok();
  }
  const std::string name = SeqName(i, s);
  const std::string range = " is outside [0, " + std::to_string(slots) + ")";
  if (s.checkpoint_slot == -1 && s.checkpoint_len != 0) {
    return InvalidArgument(name + ": checkpoint_len " + std::to_string(s.checkpoint_len) +
                           " is set without a checkpoint_slot");
  }
  for (const auto& [field, slot] : {std::pair{"state_copy_from", s.state_copy_from},
                                    std::pair{"checkpoint_slot", s.checkpoint_slot}}) {
    if (slot == -1) continue;
    const std::string what = name + ": " + field + " " + std::to_string(slot);
    if (slots == 0)
      return InvalidArgument(what + " is set but the model has no linear-attention layers");
    if (slot < 0 || slot >= slots) return InvalidArgument(what + range);
    if (slot == s.state_slot) return InvalidArgument(what + " equals its state_slot");
  }
  if (s.state_copy_from != -1 && s.state_copy_from == s.checkpoint_slot) {
    return InvalidArgument(name + ": state_copy_from and checkpoint_slot are both slot " +
                           std::to_string(s.state_copy_from));
  }
  if (s.state_copy_from != -1 && s.start_pos == 0) {
    return InvalidArgument(name + ": state_copy_from " + std::to_string(s.state_copy_from) +
                           " needs start_pos > 0 (a seq at position 0 starts from a zeroed slot)");
  }
  const int64_t end = static_cast<int64_t>(s.start_pos) + s.tokens.size();
  if (s.checkpoint_slot != -1 && (s.checkpoint_len <= s.start_pos || s.checkpoint_len > end)) {
    return InvalidArgument(name + ": checkpoint_len " + std::to_string(s.checkpoint_len) +
                           " is outside (start_pos " + std::to_string(s.start_pos) + ", " +
                           std::to_string(end) + "]");
  }
  return Status::Ok();
}

// Across the seqs of one batch: on each device, every slot is written by at
// most one seq (its state_slot or its checkpoint_slot), and no copy source is
// written in the same step (a published checkpoint is read-only; several
// seqs may copy the same one).
Status ValidateSlotsAcrossSeqs(const BatchInput& batch) {
  struct Use {
    int device, slot;
    size_t seq;
    bool operator<(const Use& o) const {
      return device != o.device ? device < o.device : slot != o.slot ? slot < o.slot : seq < o.seq;
    }
  };
  std::vector<Use> written;
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    const SeqInput& s = batch.seqs[i];
    written.push_back({s.device, s.state_slot, i});
    if (s.checkpoint_slot != -1) written.push_back({s.device, s.checkpoint_slot, i});
  }
  std::sort(written.begin(), written.end());
  for (size_t j = 1; j < written.size(); ++j) {
    const Use &a = written[j - 1], &b = written[j];
    if (a.device == b.device && a.slot == b.slot) {
      return InvalidArgument("state slot " + std::to_string(a.slot) + " on device " +
                             std::to_string(a.device) + " is written by both " +
                             SeqName(a.seq, batch.seqs[a.seq]) + " and " +
                             SeqName(b.seq, batch.seqs[b.seq]));
    }
  }
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    const SeqInput& s = batch.seqs[i];
    if (s.state_copy_from == -1) continue;
    auto it = std::lower_bound(written.begin(), written.end(), Use{s.device, s.state_copy_from, 0});
    if (it != written.end() && it->device == s.device && it->slot == s.state_copy_from) {
      return InvalidArgument(SeqName(i, s) + ": state_copy_from " +
                             std::to_string(s.state_copy_from) + " on device " +
                             std::to_string(s.device) + " is written in the same step by " +
                             SeqName(it->seq, batch.seqs[it->seq]));
    }
  }
  return Status::Ok();
}

}  // namespace

Status ValidateRunnerOptions(const ModelConfig& config, const ModelRunnerOptions& options) {
  RETURN_IF_ERROR(config.Validate());
  if (options.devices < 1) {
    return InvalidArgument("devices must be >= 1, got " + std::to_string(options.devices));
  }
  if (options.kv_pages_per_device < 1) {
    return InvalidArgument("kv_pages_per_device must be >= 1, got " +
                           std::to_string(options.kv_pages_per_device));
  }
  if (options.page_size < 1) {
    return InvalidArgument("page_size must be >= 1, got " + std::to_string(options.page_size));
  }
  if (config.linear_layers() > 0 && options.state_slots_per_device < 1) {
    return InvalidArgument(
        "state_slots_per_device must be >= 1 for a model with linear-attention "
        "layers, got " +
        std::to_string(options.state_slots_per_device));
  }
  if (!std::isfinite(options.router_skew) || options.router_skew < 0.0) {
    return InvalidArgument("router_skew must be finite and >= 0, got " +
                           std::to_string(options.router_skew));
  }
  if (options.skew_drift_steps < 0) {
    return InvalidArgument("skew_drift_steps must be >= 0, got " +
                           std::to_string(options.skew_drift_steps));
  }
  return Status::Ok();
}

Result<ExpertMap> StartingExpertMap(const ModelConfig& config, const ModelRunnerOptions& options) {
  const int first_moe = std::min(config.first_k_dense_replace, config.layers);
  if (options.expert_phy2log.empty()) {
    return ExpertMap::RoundRobin(config.layers, first_moe, config.experts, options.devices);
  }
  return ExpertMap::DeviceMajor(config.layers, first_moe, config.experts, options.devices,
                                options.expert_phy2log);
}

Status ValidateBatch(const BatchInput& batch, const ModelConfig& config,
                     const ModelRunnerOptions& options) {
  const int devices = options.devices;
  std::vector<int64_t> ids;
  ids.reserve(batch.seqs.size());
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    const SeqInput& s = batch.seqs[i];
    if (s.device < 0 || s.device >= devices) {
      return InvalidArgument(SeqName(i, s) + ": device " + std::to_string(s.device) +
                             " is outside [0, " + std::to_string(devices) + ")");
    }
    if (s.tokens.empty()) return InvalidArgument(SeqName(i, s) + ": has no tokens");
    if (s.start_pos < 0) {
      return InvalidArgument(SeqName(i, s) + ": start_pos " + std::to_string(s.start_pos) +
                             " is negative");
    }
    const int64_t end = static_cast<int64_t>(s.start_pos) + s.tokens.size();
    if (end > config.max_seq) {
      return InvalidArgument(SeqName(i, s) + ": start_pos " + std::to_string(s.start_pos) + " + " +
                             std::to_string(s.tokens.size()) + " tokens exceeds max_seq " +
                             std::to_string(config.max_seq));
    }
    for (size_t t = 0; t < s.tokens.size(); ++t) {
      if (s.tokens[t] < 0 || s.tokens[t] >= config.vocab) {
        return InvalidArgument(SeqName(i, s) + ": token " + std::to_string(s.tokens[t]) +
                               " at index " + std::to_string(t) + " is outside the vocab [0, " +
                               std::to_string(config.vocab) + ")");
      }
    }
    const int need = KvPool::PagesFor(static_cast<int>(end), options.page_size);
    if (static_cast<int>(s.pages.size()) < need) {
      return InvalidArgument(SeqName(i, s) + ": page table has " + std::to_string(s.pages.size()) +
                             " pages, " + std::to_string(need) + " needed for " +
                             std::to_string(end) + " positions at page_size " +
                             std::to_string(options.page_size));
    }
    for (int p = 0; p < need; ++p) {
      if (s.pages[p] < 0 || s.pages[p] >= options.kv_pages_per_device) {
        return InvalidArgument(SeqName(i, s) + ": page id " + std::to_string(s.pages[p]) +
                               " at index " + std::to_string(p) + " is outside [0, " +
                               std::to_string(options.kv_pages_per_device) + ")");
      }
    }
    if (config.linear_layers() > 0 &&
        (s.state_slot < 0 || s.state_slot >= options.state_slots_per_device)) {
      return InvalidArgument(SeqName(i, s) + ": state slot " + std::to_string(s.state_slot) +
                             " is outside [0, " + std::to_string(options.state_slots_per_device) +
                             ") (the model has linear-attention layers)");
    }
    RETURN_IF_ERROR(ValidatePrefixFields(
        i, s, config.linear_layers() > 0 ? options.state_slots_per_device : 0));
    if (!std::isfinite(s.temperature) || s.temperature < 0.0f) {
      return InvalidArgument(SeqName(i, s) + ": temperature " + std::to_string(s.temperature) +
                             " must be finite and >= 0");
    }
    ids.push_back(s.request_id);
  }
  std::sort(ids.begin(), ids.end());
  auto dup = std::adjacent_find(ids.begin(), ids.end());
  if (dup != ids.end()) {
    return InvalidArgument("request " + std::to_string(*dup) +
                           " appears more than once in the batch");
  }
  if (config.linear_layers() > 0) RETURN_IF_ERROR(ValidateSlotsAcrossSeqs(batch));
  return Status::Ok();
}

}  // namespace sy::engine
