// File: engine/server/bench_prefix.cc
//
// `moe-engine bench` part (d): the agentic workload served closed-loop with
// the prefix cache on and off (bench.h).
#include <algorithm>
#include <chrono>
#include <deque>
#include <vector>

#include "engine/model_executor/model_runner.h"
#include "engine/scheduler/scheduler.h"
#include "engine/server/bench.h"
#include "engine/workload/workload.h"

namespace sy::engine {
namespace {

using Clock = std::chrono::steady_clock;

bool IsPrefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  return a.size() < b.size() && std::equal(a.begin(), a.end(), b.begin());
}

Result<std::vector<std::deque<RequestSpec>>> AgenticSessions(const ModelConfig& config,
                                                             const BenchOptions& o) {
  WorkloadOptions w = WorkloadOptions::ForKind(WorkloadKind::kAgentic);
  w.seed = o.seed;
  // Arrival times do not matter closed-loop: sessions start about once a
  // second with their turns close together, and the first N sessions are kept.
  w.rate = 1;
  w.think_s = 0.01;
  w.duration_s = 4.0 * o.agentic_sessions + 10;
  w.turns_min = o.agentic_turns;
  w.turns_max = o.agentic_turns;
  w.first_turn_len = {LengthDist::Kind::kUniform, 384, 512};
  w.append_tokens = 64;
  w.output_len = {LengthDist::Kind::kFixed, o.agentic_output, o.agentic_output};
  w.ignore_eos = true;
  w.max_prompt_tokens = config.max_seq - o.agentic_output - 1;
  RETURN_IF_ERROR(w.Validate().WithContext("agentic bench"));
  WorkloadGenerator gen(w);
  // Turns of one session extend its previous prompt exactly; that is how
  // arrivals are grouped back into sessions.
  std::vector<std::deque<RequestSpec>> sessions;
  std::vector<std::vector<int32_t>> last;
  for (Arrival& a : gen.Schedule()) {
    size_t s = 0;
    while (s < last.size() && !IsPrefix(last[s], a.spec.prompt)) ++s;
    if (s == last.size()) {
      sessions.emplace_back();
      last.emplace_back();
    }
    last[s] = a.spec.prompt;
    sessions[s].push_back(std::move(a.spec));
  }
  if (static_cast<int>(sessions.size()) > o.agentic_sessions) sessions.resize(o.agentic_sessions);
  return sessions;
}

}  // namespace

Result<CacheBenchResult> BenchAgentic(const ModelConfig& config, const BenchOptions& o,
                                      bool cache) {
  ASSIGN_OR_RETURN(std::vector<std::deque<RequestSpec>> sessions, AgenticSessions(config, o));
  ModelRunnerOptions ro{.devices = o.devices, .seed = o.seed};
  ro.kv_pages_per_device = 1024;
  ASSIGN_OR_RETURN(auto runner, ModelRunner::Create(config, ro));
  SchedulerOptions so;
  so.max_seq = config.max_seq;
  so.vocab = config.vocab;
  so.eos_token = config.eos_token;
  so.prefix_cache = cache;
  std::vector<KvPool*> pools;
  std::vector<StatePool*> states;
  for (int d = 0; d < runner->devices(); ++d) {
    pools.push_back(&runner->kv_pool(d));
    states.push_back(&runner->state_pool(d));
  }
  Scheduler sched(so, std::move(pools), std::move(states));
  CacheBenchResult r;
  r.cache = cache ? "on" : "off";
  r.sessions = static_cast<int>(sessions.size());
  r.outputs.resize(sessions.size());
  std::vector<int> session_of;  // request id -> session
  const auto submit = [&](int s, int64_t now) -> Status {
    RequestSpec spec = std::move(sessions[s].front());
    sessions[s].pop_front();
    r.prompt_tokens += static_cast<int64_t>(spec.prompt.size());
    ASSIGN_OR_RETURN(int64_t id, sched.Submit(std::move(spec), now));
    session_of.resize(std::max<size_t>(session_of.size(), id + 1), -1);
    session_of[id] = s;
    ++r.requests;
    return Status::Ok();
  };
  const auto t0 = Clock::now();
  const auto now_us = [&] {
    return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count();
  };
  for (int s = 0; s < static_cast<int>(sessions.size()); ++s) RETURN_IF_ERROR(submit(s, 0));
  std::vector<double> ttft_ms;
  while (!sched.idle()) {
    BatchInput b = sched.Plan();
    ASSIGN_OR_RETURN(StepOutput out, runner->Step(b, TraceLevel::kOff));
    ASSIGN_OR_RETURN(std::vector<Request> done, sched.Commit(out, now_us()));
    for (const Request& q : done) {
      r.output_tokens += static_cast<int64_t>(q.generated.size());
      ttft_ms.push_back(q.ttft_us() / 1e3);
      const int s = session_of[q.id];
      r.outputs[s].push_back(q.generated);
      if (!sessions[s].empty()) RETURN_IF_ERROR(submit(s, now_us()));  // the next turn, closed-loop
    }
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  r.hit_tokens = sched.cache_hit_tokens_total();
  r.hit_rate = r.prompt_tokens > 0 ? static_cast<double>(r.hit_tokens) / r.prompt_tokens : 0;
  r.requests_per_s = r.requests / r.seconds;
  r.tokens_per_s = (r.prompt_tokens + r.output_tokens) / r.seconds;
  std::sort(ttft_ms.begin(), ttft_ms.end());
  r.ttft_p50_ms = ttft_ms.empty() ? 0 : ttft_ms[ttft_ms.size() / 2];
  return r;
}

}  // namespace sy::engine
