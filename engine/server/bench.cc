// File: engine/server/bench.cc
#include "engine/server/bench.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

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
  for (int d = 0; d < runner.devices(); ++d) pools.push_back(&runner.kv_pool(d));
  Scheduler sched(so, std::move(pools));
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
