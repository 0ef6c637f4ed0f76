// File: engine/server/bench.cc
#include "engine/server/bench.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "engine/attention/linear_attention.h"
#include "engine/model/weights.h"
#include "engine/server/engine.h"

namespace sy::engine {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

Result<DecodeResult> BenchDecode(ModelRunner& runner, const BenchOptions& o, int batch) {
  SchedulerOptions so;
  so.max_running = batch;
  // Every prompt in one step, so all requests start decoding together and
  // none reaches max_new_tokens inside the timed window.
  so.max_batch_tokens = batch * o.prompt_len;
  so.admission_reserve_pages = 0;
  so.max_seq = runner.config().max_seq;
  so.vocab = runner.config().vocab;
  std::vector<KvPool*> pools;
  std::vector<StatePool*> states;
  for (int d = 0; d < runner.devices(); ++d) {
    pools.push_back(&runner.kv_pool(d));
    states.push_back(&runner.state_pool(d));
  }
  Scheduler sched(so, std::move(pools), std::move(states));
  for (int i = 0; i < batch; ++i) {
    RequestSpec spec;
    spec.prompt.assign(o.prompt_len, 'a' + i % 26);
    spec.max_new_tokens = o.steps + 2;
    spec.ignore_eos = true;
    ASSIGN_OR_RETURN(int64_t id, sched.Submit(std::move(spec), 0));
    (void)id;
  }
  const auto step = [&]() -> Status {
    BatchInput b = sched.Plan();
    ASSIGN_OR_RETURN(StepOutput out, runner.Step(b, TraceLevel::kOff));
    return sched.Commit(out, 0).status();
  };
  RETURN_IF_ERROR(step());  // prefill
  if (sched.generated_total() != batch) return Internal("prefill did not sample every request");
  const auto t0 = Clock::now();
  for (int s = 0; s < o.steps; ++s) {
    RETURN_IF_ERROR(step());
    if (sched.last_plan().decode_tokens != batch) {
      return Internal("decode step had " + std::to_string(sched.last_plan().decode_tokens) +
                      " tokens, expected " + std::to_string(batch));
    }
  }
  const double secs = Seconds(Clock::now() - t0);
  return DecodeResult{.batch = batch,
                      .steps = o.steps,
                      .tokens_per_s = batch * o.steps / secs,
                      .step_ms = secs * 1e3 / o.steps};
}

Result<ServeResult> BenchServe(const ModelConfig& config, const BenchOptions& o, TraceLevel level,
                               const std::filesystem::path& dir) {
  EngineOptions eo;
  eo.model = config;
  eo.runner = {.devices = o.devices, .seed = o.seed};
  eo.workload.burst = true;
  eo.workload.max_requests = o.serve_requests;
  eo.workload.prompt_len = {LengthDist::Kind::kUniform, 16, 64};
  eo.workload.output_len = {LengthDist::Kind::kFixed, o.serve_output, o.serve_output};
  eo.workload.ignore_eos = true;
  eo.workload.seed = o.seed;
  const std::string tag(TraceLevelName(level));
  eo.publisher.endpoint = "ipc://" + (dir / ("pub-" + tag)).string();
  eo.control_endpoint = "ipc://" + (dir / ("ctl-" + tag)).string();
  eo.trace_level = level;
  eo.exit_when_done = true;
  eo.run_id = "bench-" + tag;
  ASSIGN_OR_RETURN(auto engine, Engine::Create(std::move(eo)));
  RETURN_IF_ERROR(engine->Run());
  const EngineStats st = engine->stats();
  ServeResult r;
  r.trace = tag;
  r.generated = st.generated;
  r.steps = st.steps;
  r.seconds = st.serving_us / 1e6;
  r.tokens_per_s = r.seconds > 0 ? st.generated / r.seconds : 0;
  r.dropped = st.dropped;
  return r;
}

// One prompt of `tokens` tokens through the whole model in one step, with the
// linear layers in `mode`; the best of `repeats` runs.
Result<PrefillResult> BenchModelPrefill(const ModelConfig& config, const BenchOptions& o,
                                        PrefillMode mode, int repeats) {
  ModelRunnerOptions ro{.devices = o.devices,
                        .seed = o.seed,
                        .kv_pages_per_device = KvPool::PagesFor(o.prefill_len, 16),
                        .page_size = 16,
                        .state_slots_per_device = 1};
  ro.linear_prefill = mode;
  ASSIGN_OR_RETURN(auto runner, ModelRunner::Create(config, ro));
  SeqInput s;
  s.request_id = 1;
  RETURN_IF_ERROR(runner->kv_pool(0).Allocate(ro.kv_pages_per_device, &s.pages));
  ASSIGN_OR_RETURN(s.state_slot, runner->state_pool(0).Allocate());
  for (int i = 0; i < o.prefill_len; ++i) s.tokens.push_back(i * 7 % 256);
  PrefillResult r{.what = "model",
                  .form = mode == PrefillMode::kChunked ? "chunked" : "recurrent",
                  .tokens = o.prefill_len};
  for (int rep = 0; rep < repeats; ++rep) {
    const auto t0 = Clock::now();
    ASSIGN_OR_RETURN(StepOutput out, runner->Step(BatchInput{.seqs = {s}}, TraceLevel::kOff));
    const double secs = Seconds(Clock::now() - t0);
    if (rep == 0 || secs < r.seconds) r.seconds = secs;
  }
  r.tokens_per_s = r.tokens / r.seconds;
  return r;
}

// The KDA core alone at Ling3-Tiny's head shape: 16 heads of d = 128 over
// `tokens` tokens, the state starting at zero.
PrefillResult BenchKdaCore(int tokens, PrefillMode mode, int repeats) {
  constexpr int kHeads = 16, kD = 128, kChunk = 64;
  const size_t n = static_cast<size_t>(tokens) * kD;
  std::vector<float> q(n), k(n), v(n), g(n), beta(tokens), o(n), state(kD * kD);
  std::vector<float> scratch;
  FillTensor(1, "q", 1.0f / kD, 0, q.data(), n);  // unit-norm-sized rows, as after L2 norm
  FillTensor(1, "k", 1.0f / kD, 0, k.data(), n);
  FillTensor(1, "v", 1.0f, 0, v.data(), n);
  FillTensor(1, "g", 0.05f, -0.1f, g.data(), n);
  FillTensor(1, "beta", 0.4f, 0.5f, beta.data(), tokens);
  PrefillResult r{.what = "kda_core",
                  .form = mode == PrefillMode::kChunked ? "chunked" : "recurrent",
                  .tokens = tokens};
  for (int rep = 0; rep < repeats; ++rep) {
    const auto t0 = Clock::now();
    for (int h = 0; h < kHeads; ++h) {
      std::fill(state.begin(), state.end(), 0.0f);
      if (mode == PrefillMode::kChunked) {
        KdaChunked(q.data(), k.data(), v.data(), g.data(), beta.data(), 1, tokens, kD, kD, kChunk,
                   state.data(), o.data(), &scratch);
      } else {
        KdaRecurrent(q.data(), k.data(), v.data(), g.data(), beta.data(), 1, tokens, kD, kD,
                     state.data(), o.data());
      }
    }
    const double secs = Seconds(Clock::now() - t0);
    if (rep == 0 || secs < r.seconds) r.seconds = secs;
  }
  r.tokens_per_s = r.tokens / r.seconds;
  return r;
}

// A scratch directory for ipc:// sockets, removed on scope exit.
class ScratchDir {
 public:
  ScratchDir() {
    path_ = std::filesystem::temp_directory_path() / ("sy-bench-" + std::to_string(::getpid()));
    std::filesystem::create_directories(path_, ec_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  const std::error_code& error() const { return ec_; }

 private:
  std::filesystem::path path_;
  std::error_code ec_;
};

}  // namespace

Result<BenchReport> RunBench(const BenchOptions& o) {
  ASSIGN_OR_RETURN(ModelConfig config, PresetConfig(o.model));
  if (o.batches.empty()) return InvalidArgument("--batch needs at least one batch size");
  for (int b : o.batches) {
    if (b < 1) return InvalidArgument("batch sizes must be >= 1, got " + std::to_string(b));
  }
  if (o.steps < 1) return InvalidArgument("--steps must be >= 1");
  if (o.prompt_len < 1 || o.prompt_len + o.steps + 2 > config.max_seq) {
    return InvalidArgument("prompt_len + steps must fit in the model's max_seq " +
                           std::to_string(config.max_seq));
  }
  if (o.serve_requests < 1 || o.serve_output < 1 || o.serve_repeats < 1) {
    return InvalidArgument("serve_requests, serve_output and serve_repeats must be >= 1");
  }

  BenchReport report;
  report.model = config.name;
  report.devices = o.devices;
  const int max_batch = *std::max_element(o.batches.begin(), o.batches.end());
  const int page_size = ModelRunnerOptions{}.page_size;
  const int per_request = KvPool::PagesFor(o.prompt_len + o.steps + 2, page_size);
  // Even placement puts ceil(B/P) requests on a device; twice that is slack.
  const int per_device_requests = (max_batch + o.devices - 1) / std::max(o.devices, 1);
  ModelRunnerOptions ro{.devices = o.devices,
                        .seed = o.seed,
                        .kv_pages_per_device = 2 * per_device_requests * per_request + 8,
                        .page_size = page_size};
  ASSIGN_OR_RETURN(auto runner, ModelRunner::Create(config, ro));
  for (int b : o.batches) {
    ASSIGN_OR_RETURN(DecodeResult d, BenchDecode(*runner, o, b));
    report.decode.push_back(d);
  }
  runner.reset();

  if (config.hybrid() && o.prefill_len > 0) {
    if (o.prefill_len > config.max_seq) {
      return InvalidArgument("--prefill-len exceeds the model's max_seq " +
                             std::to_string(config.max_seq));
    }
    for (PrefillMode m : {PrefillMode::kChunked, PrefillMode::kRecurrent}) {
      ASSIGN_OR_RETURN(PrefillResult p, BenchModelPrefill(config, o, m, 3));
      report.prefill.push_back(p);
    }
    for (PrefillMode m : {PrefillMode::kChunked, PrefillMode::kRecurrent}) {
      report.prefill.push_back(BenchKdaCore(o.prefill_len, m, 3));
    }
  }

  if (o.agentic_sessions > 0) {
    for (bool cache : {true, false}) {
      ASSIGN_OR_RETURN(CacheBenchResult a, BenchAgentic(config, o, cache));
      report.agentic.push_back(std::move(a));
    }
    report.agentic_same_tokens = report.agentic[0].outputs == report.agentic[1].outputs;
  }

  if (o.eplb_batch > 0 && config.experts > 0) {
    for (int redundant : {0, o.eplb_redundant}) {
      if (redundant == 0 && !report.eplb.empty()) break;
      BenchOptions eo = o;
      eo.eplb_redundant = redundant;
      ASSIGN_OR_RETURN(EplbBenchResult e, BenchEplb(config, eo));
      report.eplb.push_back(e);
    }
  }

  if (o.switch_rounds > 0 && config.experts > 0) {
    for (const std::string& preset : {o.model, o.switch_large}) {
      if (preset == o.switch_large && preset == o.model) break;
      ASSIGN_OR_RETURN(ModelConfig c, PresetConfig(preset));
      ASSIGN_OR_RETURN(SwitchBenchResult sw, BenchSwitch(c, o));
      report.switches.push_back(sw);
    }
  }
  if (!o.calibrate_batches.empty() && config.experts > 0) {
    ASSIGN_OR_RETURN(Calibration cal, BenchCalibrate(config, o));
    report.calibration = std::move(cal);
  }

  if (o.trace_compare) {
    ScratchDir dir;
    if (dir.error()) {
      return Unavailable("cannot create " + dir.path().string() + ": " + dir.error().message());
    }
    report.serve.resize(2);
    for (int rep = 0; rep < o.serve_repeats; ++rep) {
      for (int i = 0; i < 2; ++i) {
        const TraceLevel level = i == 0 ? TraceLevel::kOff : TraceLevel::kFull;
        ASSIGN_OR_RETURN(ServeResult s, BenchServe(config, o, level, dir.path()));
        if (s.tokens_per_s > report.serve[i].tokens_per_s) report.serve[i] = s;
      }
    }
    if (report.serve[0].tokens_per_s > 0) {
      report.full_over_off = report.serve[1].tokens_per_s / report.serve[0].tokens_per_s;
    }
  }
  return report;
}

void PrintBench(const BenchReport& r, std::ostream& out) {
  char line[256];
  out << "model " << r.model << ", " << r.devices << " devices\n\n";
  out << "decode      batch   steps    tokens/s   ms/step\n";
  for (const DecodeResult& d : r.decode) {
    std::snprintf(line, sizeof line, "            %5d   %5d  %10.1f  %8.3f\n", d.batch, d.steps,
                  d.tokens_per_s, d.step_ms);
    out << line;
  }
  nlohmann::json j = {{"bench", "moe-engine"}, {"model", r.model}, {"devices", r.devices}};
  j["decode"] = nlohmann::json::array();
  for (const DecodeResult& d : r.decode) {
    j["decode"].push_back({{"batch", d.batch},
                           {"steps", d.steps},
                           {"tokens_per_s", d.tokens_per_s},
                           {"step_ms", d.step_ms}});
  }
  if (!r.prefill.empty()) {
    out << "\nprefill     what       form        tokens   seconds    tokens/s\n";
    j["prefill"] = nlohmann::json::array();
    for (const PrefillResult& p : r.prefill) {
      std::snprintf(line, sizeof line, "            %-9s  %-10s %6d  %8.4f  %10.1f\n",
                    p.what.c_str(), p.form.c_str(), p.tokens, p.seconds, p.tokens_per_s);
      out << line;
      j["prefill"].push_back({{"what", p.what},
                              {"form", p.form},
                              {"tokens", p.tokens},
                              {"seconds", p.seconds},
                              {"tokens_per_s", p.tokens_per_s}});
    }
    // Rows come in (chunked, recurrent) pairs per `what`.
    for (size_t i = 0; i + 1 < r.prefill.size(); i += 2) {
      const double ratio = r.prefill[i].tokens_per_s / r.prefill[i + 1].tokens_per_s;
      std::snprintf(line, sizeof line, "%s chunked / recurrent prefill: %.2fx\n",
                    r.prefill[i].what.c_str(), ratio);
      out << line;
      j["chunked_over_recurrent_" + r.prefill[i].what] = ratio;
    }
  }
  if (!r.agentic.empty()) {
    out << "\nagentic     cache  sessions  requests  hit rate   seconds    req/s     tokens/s  "
           "TTFT p50\n";
    j["agentic"] = nlohmann::json::array();
    for (const CacheBenchResult& a : r.agentic) {
      std::snprintf(line, sizeof line,
                    "            %-5s  %8d  %8d  %7.1f%%  %8.2f  %7.2f  %11.1f  %6.1fms\n",
                    a.cache.c_str(), a.sessions, a.requests, a.hit_rate * 100, a.seconds,
                    a.requests_per_s, a.tokens_per_s, a.ttft_p50_ms);
      out << line;
      j["agentic"].push_back({{"cache", a.cache},
                              {"sessions", a.sessions},
                              {"requests", a.requests},
                              {"prompt_tokens", a.prompt_tokens},
                              {"output_tokens", a.output_tokens},
                              {"hit_rate", a.hit_rate},
                              {"seconds", a.seconds},
                              {"requests_per_s", a.requests_per_s},
                              {"tokens_per_s", a.tokens_per_s},
                              {"ttft_p50_ms", a.ttft_p50_ms}});
    }
    const double ratio = r.agentic[0].tokens_per_s / r.agentic[1].tokens_per_s;
    std::snprintf(line, sizeof line, "agentic throughput cache on / off: %.2fx (%s tokens)\n",
                  ratio, r.agentic_same_tokens ? "same" : "DIFFERENT");
    out << line;
    j["agentic_on_over_off"] = ratio;
    j["agentic_same_tokens"] = r.agentic_same_tokens;
  }
  if (!r.eplb.empty()) {
    out << "\nrebalance   slots  balancedness       MoE ms/step       decode tok/s      moved   "
           "longest pause\n";
    j["eplb"] = nlohmann::json::array();
    for (const EplbBenchResult& e : r.eplb) {
      std::snprintf(line, sizeof line,
                    "            %5d  %.3f -> %.3f   %6.2f -> %6.2f   %7.0f -> %7.0f  %3d exp  "
                    "%6.2f ms (step %.1f ms)\n",
                    e.slots, e.balancedness_before, e.balancedness_after, e.moe_ms_before,
                    e.moe_ms_after, e.tokens_per_s_before, e.tokens_per_s_after, e.experts_moved,
                    e.longest_pause_ms, e.longest_step_before_ms);
      out << line;
      j["eplb"].push_back(
          {{"slots", e.slots},
           {"skew", e.skew},
           {"batch", e.batch},
           {"steps", e.steps},
           {"predicted_before", e.predicted_before},
           {"predicted_after", e.predicted_after},
           {"balancedness_before", e.balancedness_before},
           {"balancedness_after", e.balancedness_after},
           {"moe_ms_before", e.moe_ms_before},
           {"moe_ms_after", e.moe_ms_after},
           {"moe_before_over_after", e.moe_ms_after > 0 ? e.moe_ms_before / e.moe_ms_after : 0.0},
           {"tokens_per_s_before", e.tokens_per_s_before},
           {"tokens_per_s_after", e.tokens_per_s_after},
           {"layers_moved", e.layers_moved},
           {"experts_moved", e.experts_moved},
           {"bytes_moved", e.bytes_moved},
           {"longest_pause_ms", e.longest_pause_ms},
           {"longest_step_before_ms", e.longest_step_before_ms},
           {"longest_step_during_ms", e.longest_step_during_ms},
           {"rebalance_ms", e.rebalance_ms},
           {"steps_during", e.steps_during}});
    }
  }
  if (!r.switches.empty()) {
    out << "\nswitch      model    switches  MiB/switch  reshard GB/s  memcpy GB/s  ratio   "
           "pause ms (max)\n";
    j["switch"] = nlohmann::json::array();
    for (const SwitchBenchResult& w : r.switches) {
      std::snprintf(
          line, sizeof line, "            %-8s %8d  %10.2f  %12.2f  %11.2f  %5.2f   %6.2f (%.2f)\n",
          w.model.c_str(), w.switches, static_cast<double>(w.bytes_per_switch) / (1 << 20),
          w.reshard_gbps, w.memcpy_gbps, w.reshard_over_memcpy, w.pause_ms, w.pause_max_ms);
      out << line;
      std::snprintf(line, sizeof line,
                    "              with %d requests in flight: state %.2f MiB (%d pages) in "
                    "%.2f ms (%.2f GB/s), pause %.2f ms\n",
                    w.loaded_requests, static_cast<double>(w.state_bytes) / (1 << 20),
                    w.loaded_kv_pages, w.state_ms, w.state_gbps, w.loaded_pause_ms);
      out << line;
      j["switch"].push_back({{"model", w.model},
                             {"devices", w.devices},
                             {"switches", w.switches},
                             {"weight_bytes", w.weight_bytes},
                             {"bytes_per_switch", w.bytes_per_switch},
                             {"reshard_gbps", w.reshard_gbps},
                             {"memcpy_gbps", w.memcpy_gbps},
                             {"reshard_over_memcpy", w.reshard_over_memcpy},
                             {"pause_ms", w.pause_ms},
                             {"pause_max_ms", w.pause_max_ms},
                             {"loaded_requests", w.loaded_requests},
                             {"loaded_kv_pages", w.loaded_kv_pages},
                             {"state_bytes", w.state_bytes},
                             {"state_ms", w.state_ms},
                             {"state_gbps", w.state_gbps},
                             {"loaded_pause_ms", w.loaded_pause_ms}});
    }
  }
  if (r.calibration) {
    out << "\ncalibrate   decode step ms per layout (" << r.model << ")\n"
        << FormatCalibrationTable(*r.calibration) << "\n";
    j["calibrate"] = nlohmann::json::parse(CalibrationToJson(*r.calibration));
  }
  if (!r.serve.empty()) {
    out << "\nserving     trace   steps   generated   seconds    tokens/s   dropped\n";
    j["serve"] = nlohmann::json::array();
    for (const ServeResult& s : r.serve) {
      std::snprintf(line, sizeof line, "            %-5s  %6lld  %10lld  %8.3f  %10.1f  %8lld\n",
                    s.trace.c_str(), static_cast<long long>(s.steps),
                    static_cast<long long>(s.generated), s.seconds, s.tokens_per_s,
                    static_cast<long long>(s.dropped));
      out << line;
      j["serve"].push_back({{"trace", s.trace},
                            {"steps", s.steps},
                            {"generated", s.generated},
                            {"seconds", s.seconds},
                            {"tokens_per_s", s.tokens_per_s},
                            {"dropped", s.dropped}});
    }
    std::snprintf(line, sizeof line, "\ntracing full / off throughput: %.3f (overhead %.1f%%)\n",
                  r.full_over_off, (1 - r.full_over_off) * 100);
    out << line;
    j["full_over_off"] = r.full_over_off;
  }
  out << j.dump() << "\n";
}

}  // namespace sy::engine
