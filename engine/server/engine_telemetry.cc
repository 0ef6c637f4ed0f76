// File: engine/server/engine_telemetry.cc
//
// What the Engine publishes after a step beyond the step itself: pool and
// prefix-cache occupancy, expert load, kernel traces, finished requests,
// retractions, request progress, and the Prometheus figures.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>

#include "engine/server/engine.h"

namespace sy::engine {
namespace {

// Steps over which the per-rank prefix-cache hit rate is averaged.
constexpr size_t kHitWindow = 100;
// Requests snapshots at most this often: the lists can be long and the
// console redraws a few times a second.
constexpr int64_t kRequestsEveryUs = 200'000;
// Longest list a Requests snapshot carries per kind (oldest first).
constexpr size_t kRequestsCap = 256;

telemetry::RequestProgress Progress(const Request& r) {
  return {.id = r.id,
          .device = r.device,
          .prompt_tokens = r.prompt_len(),
          .computed = r.computed,
          .generated = static_cast<int>(r.generated.size()),
          .max_new_tokens = r.spec.max_new_tokens,
          .cached_tokens = r.cache_hit_tokens,
          .preemptions = r.preemptions,
          .arrival_us = r.arrival_us,
          .first_token_us = r.first_token_us};
}

double Ratio(int64_t num, int64_t den) {
  return den > 0 ? static_cast<double>(num) / static_cast<double>(den) : 0.0;
}

}  // namespace

double Engine::WindowHitRate(int device) const {
  const auto& w = hit_window_[device];
  if (w.size() < 2) return 0.0;
  return Ratio(w.back().first - w.front().first, w.back().second - w.front().second);
}

std::vector<telemetry::DeviceOccupancy> Engine::PoolOccupancy() const {
  std::vector<telemetry::DeviceOccupancy> out;
  for (int d = 0; d < runner_->devices(); ++d) {
    const KvPool& kv = runner_->kv_pool(d);
    const StatePool& state = runner_->state_pool(d);
    const CacheStats cache = scheduler_->cache_stats(d);
    out.push_back({.device = d,
                   .kv_pages_used = kv.used_pages(),
                   .kv_pages_total = kv.num_pages(),
                   .running = scheduler_->running_on(d),
                   .state_slots_used = state.used_slots(),
                   .state_slots_total = state.slots(),
                   .kv_bytes_used = kv.used_pages() * kv.page_bytes(),
                   .kv_bytes_total = kv.num_pages() * kv.page_bytes(),
                   .state_bytes_used = state.used_slots() * state.slot_bytes(),
                   .state_bytes_total = state.bytes(),
                   .cache_tokens = cache.tree.cached_tokens,
                   .cache_nodes = cache.tree.nodes,
                   .cache_slots = cache.tree.checkpoint_slots,
                   .cache_hit_rate = WindowHitRate(d),
                   .cache_evicted_pages = cache.tree.evicted_pages});
  }
  return out;
}

telemetry::RequestDone Engine::DoneMessage(const Request& r) const {
  telemetry::RequestDone rd;
  rd.id = r.id;
  rd.device = r.device;
  rd.prompt_tokens = r.prompt_len();
  rd.output_tokens = static_cast<int>(r.generated.size());
  rd.arrival_us = r.arrival_us;
  // A request cancelled before its first token has no TTFT or TPOT.
  rd.ttft_us = r.first_token_us >= 0 ? r.ttft_us() : 0;
  rd.tpot_us = r.first_token_us >= 0 ? r.tpot_us() : 0;
  rd.e2e_us = r.e2e_us();
  rd.finish = std::string(FinishReasonName(r.finish));
  rd.cached_tokens = r.cache_hit_tokens;
  rd.preemptions = r.preemptions;
  return rd;
}

void Engine::PublishAfterStep(const BatchInput& batch, StepOutput* out,
                              const std::vector<Request>& finished, int64_t start_us,
                              int64_t end_us) {
  const PlanStats& plan = scheduler_->last_plan();
  for (int d = 0; d < runner_->devices(); ++d) {
    const CacheStats c = scheduler_->cache_stats(d);
    auto& w = hit_window_[d];
    w.emplace_back(c.hit_tokens, c.query_tokens);
    if (w.size() > kHitWindow + 1) w.pop_front();
  }

  telemetry::Step st;
  st.step = batch.step;
  st.start_us = start_us;
  st.dur_us = end_us - start_us;
  st.prefill_tokens = plan.prefill_tokens;
  st.decode_tokens = plan.decode_tokens;
  st.batch_requests = plan.batch_requests;
  st.running = scheduler_->running();
  st.waiting = scheduler_->waiting();
  st.finished_total = scheduler_->finished_total();
  st.generated_total = scheduler_->generated_total();
  if (options_.observer) options_.observer->OnStep(st);
  publisher_->Publish(std::move(st));

  telemetry::Occupancy occ;
  occ.step = batch.step;
  occ.devices = PoolOccupancy();
  occ.running = scheduler_->running();
  occ.waiting = scheduler_->waiting();
  occ.prefill_tokens = plan.prefill_tokens;
  occ.decode_tokens = plan.decode_tokens;
  publisher_->Publish(std::move(occ));

  if (expert_stats_) {
    // Cannot fail for counts the runner produced; a refusal is logged, not fatal.
    if (Status s = expert_stats_->Record(batch.step, out->expert_counts, &*placement_); !s.ok()) {
      spdlog::warn("expert statistics: {}", s.ToString());
    }
  }
  RecordMoeTime(*out);
  // Expert load goes out every step, or summed over experts_every_us of the
  // serving clock (the sim's thousands of steps per second would otherwise
  // spend the host on 94 x 128 counts per step); totals are unchanged.
  if (pending_counts_.empty()) {
    pending_counts_ = std::move(out->expert_counts);
  } else {
    for (size_t l = 0; l < pending_counts_.size() && l < out->expert_counts.size(); ++l) {
      for (size_t e = 0; e < pending_counts_[l].size() && e < out->expert_counts[l].size(); ++e) {
        pending_counts_[l][e] += out->expert_counts[l][e];
      }
    }
  }
  ++pending_steps_;
  if (options_.experts_every_us <= 0 || end_us - last_experts_us_ >= options_.experts_every_us) {
    last_experts_us_ = end_us;
    telemetry::ExpertLoad load;
    load.step = batch.step;
    load.steps = pending_steps_;
    load.counts = std::move(pending_counts_);
    pending_counts_.clear();
    load.expert_device = runner_->expert_device();
    if (expert_stats_) {
      const ExpertMap& map = runner_->expert_map();
      for (int l = 0; l < map.layers(); ++l) load.phy2log.push_back(map.phy2log_row(l));
      load.slot_device = map.slot_device_row();
      Result<eplb::Balancedness> b = expert_stats_->StepBalancedness(pending_steps_);
      if (b.ok()) load.balancedness = b->per_layer;
    }
    pending_steps_ = 0;
    if (options_.observer) options_.observer->OnExpertLoad(load);
    publisher_->Publish(std::move(load));
  }

  if (trace_level_ != TraceLevel::kOff) {
    telemetry::KernelStats ks;
    ks.step = batch.step;
    ks.kernels = Summarize(out->spans);
    publisher_->Publish(std::move(ks));
  }
  if (trace_level_ == TraceLevel::kFull) {
    telemetry::Spans sp;
    sp.step = batch.step;
    sp.spans = std::move(out->spans);
    publisher_->Publish(std::move(sp));
  }
  for (const Retraction& rt : plan.retracted) {
    PublishEvent("scheduler", "retract", "",
                 "request " + std::to_string(rt.id) + " retracted from device " +
                     std::to_string(rt.device) + " for lack of KV pages; requeued",
                 {{"id", rt.id}, {"device", rt.device}, {"computed", rt.computed}});
  }
  for (const Request& r : finished) {
    telemetry::RequestDone done = DoneMessage(r);
    if (options_.observer) options_.observer->OnRequestDone(done);
    publisher_->Publish(std::move(done));
  }
  PublishRequests(/*force=*/false);
  publisher_->SetState(StateName(), scheduler_->step());
}

void Engine::PublishRequests(bool force) {
  const int64_t now = NowUs();
  if (!force && last_requests_us_ >= 0 && now - last_requests_us_ < kRequestsEveryUs) return;
  last_requests_us_ = now;
  telemetry::Requests m;
  m.step = scheduler_->step();
  const std::vector<const Request*> running = scheduler_->running_requests();
  const std::vector<const Request*> waiting = scheduler_->waiting_requests();
  m.running_total = static_cast<int>(running.size());
  m.waiting_total = static_cast<int>(waiting.size());
  for (size_t i = 0; i < running.size() && i < kRequestsCap; ++i) {
    m.running.push_back(Progress(*running[i]));
  }
  for (size_t i = 0; i < waiting.size() && i < kRequestsCap; ++i) {
    m.waiting.push_back(Progress(*waiting[i]));
  }
  publisher_->Publish(std::move(m));
}

void Engine::UpdateMetrics(const StepOutput& out, const std::vector<Request>& finished) {
  const PlanStats& plan = scheduler_->last_plan();
  int64_t sampled = 0;
  for (const SeqOutput& o : out.outputs) sampled += o.next_token >= 0 ? 1 : 0;
  metrics_->AddStep(plan.prefill_tokens, sampled, plan.cache_hit_tokens, plan.preempted);
  for (const Request& r : finished) {
    const bool first = r.first_token_us >= 0;
    const double ttft = first ? r.ttft_us() / 1e6 : -1.0;
    const double tpot = first && r.generated.size() > 1 ? r.tpot_us() / 1e6 : -1.0;
    metrics_->ObserveRequest(ttft, tpot, r.e2e_us() / 1e6, FinishReasonName(r.finish));
  }
  ServingGauges g;
  g.running = scheduler_->running();
  g.waiting = scheduler_->waiting() + inbox_->pending();
  int64_t kv_used = 0, kv_total = 0, st_used = 0, st_total = 0, hit = 0, query = 0;
  for (int d = 0; d < runner_->devices(); ++d) {
    kv_used += runner_->kv_pool(d).used_pages();
    kv_total += runner_->kv_pool(d).num_pages();
    st_used += runner_->state_pool(d).used_slots();
    st_total += runner_->state_pool(d).slots();
    const auto& w = hit_window_[d];
    if (w.size() >= 2) {
      hit += w.back().first - w.front().first;
      query += w.back().second - w.front().second;
    }
    g.cached_tokens += scheduler_->cache_stats(d).tree.cached_tokens;
  }
  g.token_usage = Ratio(kv_used, kv_total);
  g.state_usage = Ratio(st_used, st_total);
  g.cache_hit_rate = Ratio(hit, query);
  metrics_->SetGauges(g);
}

}  // namespace sy::engine
