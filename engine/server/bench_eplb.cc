// File: engine/server/bench_eplb.cc
//
// Bench (e): a live expert rebalance under skewed routing. B decode requests
// run on a runner whose router is skewed toward a few hot experts per layer
// (ModelRunnerOptions::router_skew); N decode steps are measured, the
// placement is planned from their load (PlanRebalance) and applied while
// decoding goes on (RebalanceApplier: staging on its thread, one layer
// committed per step boundary), then N more steps are measured. Reported:
// balancedness (mean over steps of mean/max device tokens), MoE critical
// path per step (max over devices of the expert FFN time), decode tokens/s,
// the longest commit (the only pause serving sees) and the bytes moved.
#include <algorithm>
#include <chrono>

#include "engine/eplb/applier.h"
#include "engine/eplb/expert_stats.h"
#include "engine/eplb/rebalance_plan.h"
#include "engine/model_executor/model_runner.h"
#include "engine/scheduler/scheduler.h"
#include "engine/server/bench.h"

namespace sy::engine {
namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double MoeCriticalMs(const StepOutput& out, int devices) {
  std::vector<int64_t> per_device(devices, 0);
  for (const telemetry::Span& s : out.spans) {
    if (s.name == "expert_ffn" && s.device >= 0 && s.device < devices) {
      per_device[s.device] += s.dur_us;
    }
  }
  return static_cast<double>(*std::max_element(per_device.begin(), per_device.end())) / 1000.0;
}

}  // namespace

Result<EplbBenchResult> BenchEplb(const ModelConfig& config, const BenchOptions& o) {
  if (o.eplb_batch < 1 || o.eplb_steps < 2) {
    return InvalidArgument("--eplb-batch must be >= 1 and --eplb-steps >= 2");
  }
  const int steps = o.eplb_steps;
  const int max_new = 3 * steps + 16;
  if (o.prompt_len + max_new > config.max_seq) {
    return InvalidArgument("prompt_len + 3 * eplb_steps + 16 must fit in max_seq");
  }
  ModelRunnerOptions ro{.devices = o.devices, .seed = o.seed};
  ro.router_skew = o.eplb_skew;
  const int per_device = (o.eplb_batch + o.devices - 1) / o.devices;
  ro.kv_pages_per_device =
      2 * per_device * KvPool::PagesFor(o.prompt_len + max_new, ro.page_size) + 8;
  if (o.eplb_redundant > 0) {
    ASSIGN_OR_RETURN(ro.expert_phy2log, eplb::InitialPlacement(config.layers, config.experts,
                                                               o.devices, o.eplb_redundant));
  }
  ASSIGN_OR_RETURN(auto runner, ModelRunner::Create(config, ro));
  ASSIGN_OR_RETURN(eplb::ExpertStats stats,
                   eplb::ExpertStats::Create(config.layers, config.experts));

  SchedulerOptions so;
  so.max_running = o.eplb_batch;
  so.max_batch_tokens = o.eplb_batch * o.prompt_len;
  so.admission_reserve_pages = 0;
  so.max_seq = config.max_seq;
  so.vocab = config.vocab;
  std::vector<KvPool*> pools;
  std::vector<StatePool*> states;
  for (int d = 0; d < runner->devices(); ++d) {
    pools.push_back(&runner->kv_pool(d));
    states.push_back(&runner->state_pool(d));
  }
  Scheduler sched(so, std::move(pools), std::move(states));
  for (int i = 0; i < o.eplb_batch; ++i) {
    RequestSpec spec;
    for (int t = 0; t < o.prompt_len; ++t) spec.prompt.push_back(32 + (i * 7 + t * 13) % 90);
    spec.max_new_tokens = max_new;
    spec.ignore_eos = true;
    ASSIGN_OR_RETURN(int64_t id, sched.Submit(std::move(spec), 0));
    (void)id;
  }

  EplbBenchResult r{.devices = o.devices,
                    .slots = runner->expert_map().slots(),
                    .skew = o.eplb_skew,
                    .batch = o.eplb_batch,
                    .steps = steps};
  struct Window {
    double moe_ms = 0;
    double wall_s = 0;
    double longest_ms = 0;
    int64_t tokens = 0;
  };
  const auto step = [&](Window* w) -> Status {
    const auto t0 = Clock::now();
    BatchInput b = sched.Plan();
    ASSIGN_OR_RETURN(StepOutput out, runner->Step(b, TraceLevel::kSummary));
    ASSIGN_OR_RETURN(eplb::Placement p, eplb::PlacementOf(runner->expert_map()));
    RETURN_IF_ERROR(stats.Record(b.step, out.expert_counts, &p));
    RETURN_IF_ERROR(sched.Commit(out, 0).status());
    if (w != nullptr) {
      w->moe_ms += MoeCriticalMs(out, runner->devices());
      const double ms = Ms(Clock::now() - t0);
      w->wall_s += ms / 1000.0;
      w->longest_ms = std::max(w->longest_ms, ms);
      w->tokens += sched.last_plan().decode_tokens;
    }
    return Status::Ok();
  };
  RETURN_IF_ERROR(step(nullptr));  // prefill
  Window before, after;
  for (int s = 0; s < steps; ++s) RETURN_IF_ERROR(step(&before));
  ASSIGN_OR_RETURN(eplb::Balancedness b0, stats.StepBalancedness(steps));

  const int64_t expert_bytes =
      3LL * config.hidden * config.expert_inter * static_cast<int64_t>(sizeof(float));
  ASSIGN_OR_RETURN(eplb::RebalancePlan plan,
                   eplb::PlanRebalance(stats, runner->expert_map(),
                                       {.window = steps, .num_groups = std::max(1, config.n_group)},
                                       expert_bytes));
  r.predicted_before = plan.mean_before;
  r.predicted_after = plan.mean_after;
  {
    eplb::RebalanceApplier applier(runner.get());
    const auto t0 = Clock::now();
    RETURN_IF_ERROR(applier.Start(plan));
    int during = 0;
    while (applier.busy()) {
      for (const eplb::ApplierEvent& ev : applier.Poll()) {
        if (ev.kind == eplb::ApplierEvent::Kind::kFailed) {
          return Internal("rebalance failed: " + ev.error);
        }
        if (ev.kind == eplb::ApplierEvent::Kind::kDone) {
          r.layers_moved = ev.layers;
          r.experts_moved = ev.experts_moved;
          r.bytes_moved = ev.bytes;
          r.longest_pause_ms = ev.longest_pause_ms;
        }
      }
      if (!applier.busy()) break;
      const auto s0 = Clock::now();
      RETURN_IF_ERROR(step(nullptr));
      r.longest_step_during_ms = std::max(r.longest_step_during_ms, Ms(Clock::now() - s0));
      ++during;
    }
    r.rebalance_ms = Ms(Clock::now() - t0);
    r.steps_during = during;
  }
  for (int s = 0; s < steps; ++s) RETURN_IF_ERROR(step(&after));
  ASSIGN_OR_RETURN(eplb::Balancedness b1, stats.StepBalancedness(steps));
  r.balancedness_before = b0.mean;
  r.balancedness_after = b1.mean;
  r.longest_step_before_ms = before.longest_ms;
  r.moe_ms_before = before.moe_ms / steps;
  r.moe_ms_after = after.moe_ms / steps;
  r.tokens_per_s_before = static_cast<double>(before.tokens) / before.wall_s;
  r.tokens_per_s_after = static_cast<double>(after.tokens) / after.wall_s;
  return r;
}

}  // namespace sy::engine
