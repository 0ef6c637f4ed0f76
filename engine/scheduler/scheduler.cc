// File: engine/scheduler/scheduler.cc
#include "engine/scheduler/scheduler.h"

#include <algorithm>
#include <cassert>
#include <string>
#include <utility>

namespace sy::engine {

std::string_view FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kEos:
      return "eos";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kCancelled:
      return "cancelled";
    case FinishReason::kNone:
      break;
  }
  return "";
}

Status SchedulerOptions::Validate() const {
  if (max_batch_tokens < 1) return InvalidArgument("max_batch_tokens must be >= 1");
  if (max_running < 1) return InvalidArgument("max_running must be >= 1");
  if (max_running > max_batch_tokens) {
    return InvalidArgument("max_running (" + std::to_string(max_running) +
                           ") must be <= max_batch_tokens (" + std::to_string(max_batch_tokens) +
                           ") so every decode token fits in a step");
  }
  if (admission_reserve_pages < 0) return InvalidArgument("admission_reserve_pages must be >= 0");
  if (max_seq < 2) return InvalidArgument("max_seq must be >= 2");
  if (vocab < 1) return InvalidArgument("vocab must be >= 1");
  if (!(cache_threshold >= 0 && cache_threshold <= 1)) {
    return InvalidArgument("cache_threshold must be in [0, 1]");
  }
  return Status::Ok();
}

namespace {

// SplitMix64 finaliser: a per-position sampling seed, so a recomputed
// (preempted) request samples the same tokens again.
uint64_t MixSeed(uint64_t seed, uint64_t pos) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (pos + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

Scheduler::Scheduler(const SchedulerOptions& options, std::vector<KvPool*> pools,
                     std::vector<StatePool*> state_pools)
    : options_(options), pools_(std::move(pools)), state_pools_(std::move(state_pools)) {
  assert(options_.Validate().ok());
  assert(!pools_.empty());
  assert(state_pools_.empty() || state_pools_.size() == pools_.size());
  page_size_ = pools_.front()->page_size();
  for ([[maybe_unused]] KvPool* p : pools_) assert(p->page_size() == page_size_);
  prefill_group_ = devices();
  hit_tokens_.assign(pools_.size(), 0);
  query_tokens_.assign(pools_.size(), 0);
  if (!options_.prefix_cache) return;
  for (int d = 0; d < devices(); ++d) {
    const bool state = needs_slot(d);
    caches_.push_back(std::make_unique<RadixCache>(
        RadixCacheOptions{.page_size = page_size_, .needs_state = state}, pools_[d],
        state ? state_pools_[d] : nullptr));
  }
}

Scheduler::~Scheduler() {
  // Unpins every node before the caches (declared earlier) free the tree.
  for (auto& r : running_) Release(r.get(), /*publish=*/false);
}

bool Scheduler::needs_slot(int device) const {
  return !state_pools_.empty() && state_pools_[device]->options().layers > 0;
}

void Scheduler::Release(Request* r, bool publish) {
  const int d = r->device;
  if (publish && prefix_cache()) {
    if (needs_slot(d)) {
      if (r->ckpt_slot >= 0 && r->ckpt_len > r->cached_len) Publish(r, r->ckpt_len, true);
    } else {
      const int len = r->computed / page_size_ * page_size_;
      if (len > r->cached_len) Publish(r, len, false);
    }
  }
  // Pages past the tree-owned prefix are the request's own.
  const std::vector<int32_t> own(r->pages.begin() + r->cached_len / page_size_, r->pages.end());
  pools_[d]->Free(own);
  r->pages.clear();
  if (r->cache_node >= 0) caches_[d]->Unlock(r->cache_node);
  r->cache_node = -1;
  r->cached_len = 0;
  r->state_copy_from = -1;
  if (r->state_slot >= 0) state_pools_[d]->Free(r->state_slot);
  r->state_slot = -1;
  if (r->ckpt_slot >= 0) state_pools_[d]->Free(r->ckpt_slot);
  r->ckpt_slot = -1;
  r->ckpt_len = 0;
}

int Scheduler::running_on(int device) const {
  return static_cast<int>(std::count_if(running_.begin(), running_.end(),
                                        [device](const auto& r) { return r->device == device; }));
}

std::vector<const Request*> Scheduler::running_requests() const {
  std::vector<const Request*> out;
  for (const auto& r : running_) out.push_back(r.get());
  return out;
}

int Scheduler::pending_prefill_tokens() const {
  const int cap = options_.max_batch_tokens;
  int64_t n = 0;
  // Decoding requests count in `running` (one row each); only requests still
  // prefilling (a chunked prompt, or a recompute after preemption) add here.
  for (const auto& r : running_) {
    if (r->in_prefill()) n += r->total_len() - r->computed;
  }
  for (const auto& r : waiting_) {
    if (n >= cap) break;
    n += r->total_len() - std::max(r->computed, CachedTokens(*r));
  }
  return static_cast<int>(std::min<int64_t>(n, cap));
}

std::vector<const Request*> Scheduler::waiting_requests() const {
  std::vector<const Request*> out;
  for (const auto& r : waiting_) out.push_back(r.get());
  return out;
}

Result<int64_t> Scheduler::Submit(RequestSpec spec, int64_t arrival_us) {
  const int prompt = static_cast<int>(spec.prompt.size());
  if (prompt == 0) return InvalidArgument("prompt is empty");
  for (size_t i = 0; i < spec.prompt.size(); ++i) {
    if (spec.prompt[i] < 0 || spec.prompt[i] >= options_.vocab) {
      return InvalidArgument("prompt token " + std::to_string(i) + " is " +
                             std::to_string(spec.prompt[i]) + ", outside the vocab [0, " +
                             std::to_string(options_.vocab) + ")");
    }
  }
  if (prompt >= options_.max_seq) {
    return InvalidArgument("prompt of " + std::to_string(prompt) +
                           " tokens leaves no room under max_seq " +
                           std::to_string(options_.max_seq));
  }
  if (spec.max_new_tokens < 1) return InvalidArgument("max_new_tokens must be >= 1");
  // The last sampled token is never fed back, so K/V covers total - 1 positions.
  const int64_t total = std::min<int64_t>(int64_t{prompt} + spec.max_new_tokens, options_.max_seq);
  const int need = KvPool::PagesFor(static_cast<int>(total - 1), page_size_);
  // Some one device must hold both its pages and (if it needs one) a slot.
  int largest = -1;  // most pages on a device that can hold a slot
  for (int d = 0; d < devices(); ++d) {
    if (!needs_slot(d) || state_pools_[d]->slots() > 0) {
      largest = std::max(largest, pools_[d]->num_pages());
    }
  }
  if (largest < 0) {
    return InvalidArgument(
        "request needs a recurrent-state slot but every device's state pool has 0 slots");
  }
  if (need > largest) {
    return InvalidArgument("request needs up to " + std::to_string(need) +
                           " KV pages but a device pool holds " + std::to_string(largest));
  }
  auto r = std::make_unique<Request>();
  r->id = next_id_++;
  r->spec = std::move(spec);
  r->arrival_us = arrival_us;
  waiting_.push_back(std::move(r));
  return waiting_.back()->id;
}

void Scheduler::Preempt(Request* r) {
  last_plan_.retracted.push_back({.id = r->id, .device = r->device, .computed = r->computed});
  // Its computed prefix goes to the cache, unpinned: evicted next if pages
  // are still short, or a hit when the request comes back.
  Release(r, /*publish=*/true);
  r->computed = 0;
  r->device = -1;
  r->state = RequestState::kWaiting;
  ++r->preemptions;
  ++preempted_total_;
  ++last_plan_.preempted;
  auto it =
      std::find_if(running_.begin(), running_.end(), [r](const auto& p) { return p.get() == r; });
  assert(it != running_.end());
  // Head of the queue: it arrived before anything still waiting.
  waiting_.push_front(std::move(*it));
  running_.erase(it);
}

bool Scheduler::EnsurePages(Request* r, int positions) {
  const int need = KvPool::PagesFor(positions, page_size_) - static_cast<int>(r->pages.size());
  if (need <= 0) return true;
  KvPool* pool = pools_[r->device];
  while (pool->free_pages() < need) {
    if (prefix_cache() && caches_[r->device]->EvictPages(need) > 0 && pool->free_pages() >= need) {
      break;
    }
    // Newest running request on this device; admission order makes it the last.
    Request* victim = nullptr;
    for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
      if ((*it)->device == r->device) {
        victim = it->get();
        break;
      }
    }
    assert(victim != nullptr);
    const bool self = victim == r;
    Preempt(victim);
    if (self) return false;
  }
  const Status s = pool->Allocate(need, &r->pages);
  assert(s.ok());
  s.IgnoreError();
  return true;
}

void Scheduler::AddSeq(BatchInput* batch, Request* req, int n) {
  const bool decode = !req->in_prefill();
  const int ckpt = PlanCheckpoint(req, n);
  const Request& r = *req;
  SeqInput s;
  s.request_id = r.id;
  s.device = r.device;
  s.start_pos = r.computed;
  s.tokens.reserve(n);
  for (int p = r.computed; p < r.computed + n; ++p) s.tokens.push_back(r.token_at(p));
  s.pages = r.pages;
  s.state_slot = r.state_slot;
  s.state_copy_from = r.state_copy_from;
  if (ckpt > 0 && needs_slot(r.device)) {
    s.checkpoint_slot = r.ckpt_slot;
    s.checkpoint_len = ckpt;
  }
  s.sample = r.computed + n == r.total_len();
  s.temperature = r.spec.temperature;
  s.sample_seed = MixSeed(r.spec.seed, static_cast<uint64_t>(r.computed + n));
  planned_.push_back({req, n, s.sample, ckpt, decode});
  batch->seqs.push_back(std::move(s));
}

BatchInput Scheduler::Plan() {
  BatchInput batch;
  batch.step = step_;
  planned_.clear();
  last_plan_ = PlanStats{};
  int budget = options_.max_batch_tokens;

  // 1. Decode first. Iterate over a snapshot: preemption edits running_.
  std::vector<Request*> order;
  for (auto& r : running_) order.push_back(r.get());
  for (Request* r : order) {
    if (r->state != RequestState::kRunning || r->in_prefill() || budget == 0) continue;
    if (!EnsurePages(r, r->computed + 1)) continue;
    AddSeq(&batch, r, 1);
    --budget;
    ++last_plan_.decode_tokens;
  }

  // 2. Continue chunked prefills of running requests, oldest first.
  const int groups = devices() / prefill_group_;
  prefill_left_.assign(groups, std::max(1, static_cast<int>(int64_t{options_.max_batch_tokens} *
                                                            prefill_group_ / devices())));
  auto take_prefill = [&](Request* r) {
    int& left = prefill_left_[r->device / prefill_group_];
    const int n = std::min({budget, left, r->total_len() - r->computed});
    if (n <= 0) return;
    AddSeq(&batch, r, n);
    budget -= n;
    left -= n;
    last_plan_.prefill_tokens += n;
  };
  for (auto& r : running_) {
    if (!r->in_prefill() || budget == 0) continue;
    take_prefill(r.get());
  }

  // 3. Admit FCFS. Pages for the whole (re)prefill are taken now, so a chunked
  // prompt never stalls halfway for lack of pages.
  while (last_plan_.preempted == 0 && budget > 0 && !waiting_.empty() &&
         running() < options_.max_running) {
    Request* r = waiting_.front().get();
    Placement p = PickDevice(*r);
    if (p.device < 0) break;  // no device can hold it now: it blocks the queue
    Admit(r, std::move(p));
    r->state = RequestState::kRunning;
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
    ++last_plan_.admitted;
    last_plan_.cache_hit_tokens += r->cache_hit_tokens;
    last_plan_.cache_query_tokens += r->total_len();
    take_prefill(r);
  }
  last_plan_.batch_requests = static_cast<int>(batch.seqs.size());
  return batch;
}

void Scheduler::set_prefill_group(int g) {
  assert(g >= 1 && devices() % g == 0);
  prefill_group_ = g;
}

Result<std::vector<Request>> Scheduler::Commit(const StepOutput& out, int64_t now_us) {
  if (out.outputs.size() != planned_.size()) {
    return Internal("step output has " + std::to_string(out.outputs.size()) +
                    " seqs, the planned batch " + std::to_string(planned_.size()));
  }
  for (size_t i = 0; i < planned_.size(); ++i) {
    const Planned& p = planned_[i];
    if (out.outputs[i].request_id != p.request->id) {
      return Internal("step output " + std::to_string(i) + " is for request " +
                      std::to_string(out.outputs[i].request_id) + ", planned " +
                      std::to_string(p.request->id));
    }
    const int32_t token = out.outputs[i].next_token;
    if (p.sample && (token < 0 || token >= options_.vocab)) {
      return Internal("step sampled token " + std::to_string(token) + " for request " +
                      std::to_string(p.request->id) + ", outside the vocab");
    }
  }
  std::vector<Request> finished;
  for (const Planned& p : planned_) {
    Request* r = p.request;
    r->computed += p.tokens;
    r->state_copy_from = -1;  // copied by this step
    if (p.ckpt_len > 0) CommitCheckpoint(r, p.ckpt_len, p.decode);
    if (!p.sample) continue;
    const int32_t token = out.outputs[&p - planned_.data()].next_token;
    r->generated.push_back(token);
    ++generated_total_;
    if (r->first_token_us < 0) r->first_token_us = now_us;
    if (token == options_.eos_token && !r->spec.ignore_eos) {
      r->finish = FinishReason::kEos;
    } else if (static_cast<int>(r->generated.size()) >= r->spec.max_new_tokens ||
               r->total_len() >= options_.max_seq) {
      r->finish = FinishReason::kLength;
    }
    if (r->finish == FinishReason::kNone) continue;
    finished.push_back(Retire(r, r->finish, now_us));
  }
  planned_.clear();
  ++step_;
  return finished;
}

Request Scheduler::Retire(Request* r, FinishReason why, int64_t now_us) {
  r->finish = why;
  r->finish_us = now_us;
  r->state = RequestState::kFinished;
  Release(r, /*publish=*/true);
  auto it =
      std::find_if(running_.begin(), running_.end(), [r](const auto& q) { return q.get() == r; });
  assert(it != running_.end());
  Request done = std::move(**it);
  running_.erase(it);
  ++finished_total_;
  return done;
}

Result<Request> Scheduler::Cancel(int64_t id, int64_t now_us) {
  for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
    if ((*it)->id != id) continue;
    Request done = std::move(**it);
    waiting_.erase(it);
    done.finish = FinishReason::kCancelled;
    done.finish_us = now_us;
    done.state = RequestState::kFinished;
    ++finished_total_;
    ++cancelled_total_;
    return done;
  }
  for (auto& r : running_) {
    if (r->id != id) continue;
    ++cancelled_total_;
    return Retire(r.get(), FinishReason::kCancelled, now_us);
  }
  return NotFound("request " + std::to_string(id) + " is not waiting or running");
}

}  // namespace sy::engine
