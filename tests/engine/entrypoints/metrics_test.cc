#include "engine/entrypoints/metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <thread>
#include <vector>

namespace sy::engine {
namespace {

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct Exposition {
  std::map<std::string, std::string> type;  // family -> type
  std::map<std::string, std::string> help;
  std::vector<Sample> samples;

  // The one sample with this name whose labels include `want`.
  double Value(const std::string& name, std::map<std::string, std::string> want = {}) const {
    const Sample* found = nullptr;
    for (const Sample& s : samples) {
      if (s.name != name) continue;
      bool match = true;
      for (const auto& [k, v] : want) {
        auto it = s.labels.find(k);
        match = match && it != s.labels.end() && it->second == v;
      }
      if (!match) continue;
      EXPECT_EQ(found, nullptr) << "two samples match " << name;
      found = &s;
    }
    EXPECT_NE(found, nullptr) << "no sample " << name;
    return found ? found->value : -1;
  }
};

// A strict reader of text format 0.0.4, enough to check our own output:
// HELP then TYPE per family, and every sample belongs to the family
// declared last.
Exposition Parse(const std::string& text) {
  Exposition e;
  EXPECT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  std::istringstream in(text);
  std::string line, family;
  while (std::getline(in, line)) {
    EXPECT_FALSE(line.empty());
    if (line.rfind("# HELP ", 0) == 0) {
      const size_t sp = line.find(' ', 7);
      family = line.substr(7, sp - 7);
      e.help[family] = line.substr(sp + 1);
      continue;
    }
    if (line.rfind("# TYPE ", 0) == 0) {
      const size_t sp = line.find(' ', 7);
      EXPECT_EQ(line.substr(7, sp - 7), family) << "TYPE right after its HELP";
      e.type[family] = line.substr(sp + 1);
      continue;
    }
    EXPECT_NE(line[0], '#') << line;
    Sample s;
    size_t i = line.find_first_of("{ ");
    s.name = line.substr(0, i);
    if (line[i] == '{') {
      ++i;
      while (line[i] != '}') {
        const size_t eq = line.find('=', i);
        const std::string key = line.substr(i, eq - i);
        EXPECT_EQ(line[eq + 1], '"');
        std::string value;
        size_t j = eq + 2;
        for (; line[j] != '"'; ++j) {
          if (line[j] == '\\') {
            ++j;
            value += line[j] == 'n' ? '\n' : line[j];
          } else {
            value += line[j];
          }
        }
        s.labels[key] = value;
        i = j + 1;
        if (line[i] == ',') ++i;
      }
      ++i;
    }
    EXPECT_EQ(line[i], ' ') << line;
    const std::string v = line.substr(i + 1);
    s.value = v == "+Inf" ? std::numeric_limits<double>::infinity() : std::stod(v);
    const bool ok = s.name == family || s.name == family + "_bucket" || s.name == family + "_sum" ||
                    s.name == family + "_count";
    EXPECT_TRUE(ok) << s.name << " under family " << family;
    e.samples.push_back(std::move(s));
  }
  return e;
}

TEST(ServingMetricsTest, FreshRenderDeclaresEveryMetricAtZero) {
  ServingMetrics m("tiny");
  const Exposition e = Parse(m.Render());
  const std::map<std::string, std::string> want = {
      {"switchyard:num_running_reqs", "gauge"},
      {"switchyard:num_queue_reqs", "gauge"},
      {"switchyard:token_usage", "gauge"},
      {"switchyard:state_usage", "gauge"},
      {"switchyard:cache_hit_rate", "gauge"},
      {"switchyard:cached_tokens", "gauge"},
      {"switchyard:prompt_tokens_total", "counter"},
      {"switchyard:generation_tokens_total", "counter"},
      {"switchyard:num_requests_total", "counter"},
      {"switchyard:num_preemptions_total", "counter"},
      {"switchyard:cache_hit_tokens_total", "counter"},
      {"switchyard:time_to_first_token_seconds", "histogram"},
      {"switchyard:time_per_output_token_seconds", "histogram"},
      {"switchyard:e2e_request_latency_seconds", "histogram"},
  };
  EXPECT_EQ(e.type, want);
  for (const auto& [name, help] : e.help) EXPECT_FALSE(help.empty()) << name;
  for (const Sample& s : e.samples) {
    EXPECT_EQ(s.labels.at("model_name"), "tiny") << s.name;
    EXPECT_EQ(s.value, 0) << s.name;
  }
  EXPECT_EQ(e.Value("switchyard:num_requests_total", {{"finish_reason", "eos"}}), 0);
  EXPECT_EQ(e.Value("switchyard:time_to_first_token_seconds_bucket", {{"le", "+Inf"}}), 0);
}

TEST(ServingMetricsTest, RendersExactLines) {
  ServingMetrics m("tiny");
  m.SetGauges({.running = 3,
               .waiting = 2,
               .token_usage = 0.25,
               .state_usage = 0,
               .cache_hit_rate = 0.5,
               .cached_tokens = 96});
  m.ObserveRequest(0.03, 0.012, 0.7, "eos");
  const std::string text = m.Render();
  for (const char* line : {
           "# HELP switchyard:num_running_reqs Requests running (in the batch).\n"
           "# TYPE switchyard:num_running_reqs gauge\n"
           "switchyard:num_running_reqs{model_name=\"tiny\"} 3\n",
           "switchyard:token_usage{model_name=\"tiny\"} 0.25\n",
           "switchyard:cached_tokens{model_name=\"tiny\"} 96\n",
           "switchyard:num_requests_total{model_name=\"tiny\",finish_reason=\"eos\"} 1\n",
           "switchyard:time_to_first_token_seconds_bucket{model_name=\"tiny\",le=\"0.025\"} 0\n"
           "switchyard:time_to_first_token_seconds_bucket{model_name=\"tiny\",le=\"0.05\"} 1\n",
           "switchyard:time_to_first_token_seconds_bucket{model_name=\"tiny\",le=\"+Inf\"} 1\n"
           "switchyard:time_to_first_token_seconds_sum{model_name=\"tiny\"} 0.03\n"
           "switchyard:time_to_first_token_seconds_count{model_name=\"tiny\"} 1\n",
       }) {
    EXPECT_THAT(text, ::testing::HasSubstr(line));
  }
}

TEST(ServingMetricsTest, CountersAccumulateAndHistogramsAreCumulative) {
  ServingMetrics m("tiny");
  m.AddStep(100, 4, 16, 0);
  m.AddStep(0, 8, 0, 1);
  m.ObserveRequest(0.02, 0.01, 0.5, "eos");
  m.ObserveRequest(2.0, -1, 2.1, "length");    // one token: no TPOT
  m.ObserveRequest(-1, -1, 0.2, "cancelled");  // no token at all: no TTFT
  m.ObserveRequest(90, 0.003, 400, "eos");     // beyond the last bucket
  const Exposition e = Parse(m.Render());
  EXPECT_EQ(e.Value("switchyard:prompt_tokens_total"), 100);
  EXPECT_EQ(e.Value("switchyard:generation_tokens_total"), 12);
  EXPECT_EQ(e.Value("switchyard:cache_hit_tokens_total"), 16);
  EXPECT_EQ(e.Value("switchyard:num_preemptions_total"), 1);
  EXPECT_EQ(e.Value("switchyard:num_requests_total", {{"finish_reason", "eos"}}), 2);
  EXPECT_EQ(e.Value("switchyard:num_requests_total", {{"finish_reason", "length"}}), 1);
  EXPECT_EQ(e.Value("switchyard:num_requests_total", {{"finish_reason", "cancelled"}}), 1);

  const std::string ttft = "switchyard:time_to_first_token_seconds";
  EXPECT_EQ(e.Value(ttft + "_count"), 3);
  EXPECT_DOUBLE_EQ(e.Value(ttft + "_sum"), 92.02);
  EXPECT_EQ(e.Value(ttft + "_bucket", {{"le", "0.025"}}), 1);
  EXPECT_EQ(e.Value(ttft + "_bucket", {{"le", "2.5"}}), 2);
  EXPECT_EQ(e.Value(ttft + "_bucket", {{"le", "60"}}), 2);
  EXPECT_EQ(e.Value(ttft + "_bucket", {{"le", "+Inf"}}), 3);
  EXPECT_EQ(e.Value("switchyard:time_per_output_token_seconds_count"), 2);
  EXPECT_EQ(e.Value("switchyard:e2e_request_latency_seconds_count"), 4);

  // For each histogram: bounds increase, counts never decrease, +Inf last.
  for (const char* h :
       {"switchyard:time_to_first_token_seconds", "switchyard:time_per_output_token_seconds",
        "switchyard:e2e_request_latency_seconds"}) {
    double prev_le = -1, prev_count = 0;
    int buckets = 0;
    for (const Sample& s : e.samples) {
      if (s.name != std::string(h) + "_bucket") continue;
      const double le = s.labels.at("le") == "+Inf" ? std::numeric_limits<double>::infinity()
                                                    : std::stod(s.labels.at("le"));
      EXPECT_GT(le, prev_le) << h;
      EXPECT_GE(s.value, prev_count) << h;
      prev_le = le;
      prev_count = s.value;
      ++buckets;
    }
    EXPECT_GT(buckets, 5) << h;
    EXPECT_TRUE(std::isinf(prev_le)) << h;
    EXPECT_EQ(prev_count, e.Value(std::string(h) + "_count")) << h;
  }
}

TEST(ServingMetricsTest, EscapesLabelValues) {
  ServingMetrics m("we\"ird\\mo\ndel");
  m.ObserveRequest(0.1, 0.1, 0.1, "odd\"reason");
  const std::string text = m.Render();
  EXPECT_THAT(text, ::testing::HasSubstr("{model_name=\"we\\\"ird\\\\mo\\ndel\"}"));
  const Exposition e = Parse(text);
  for (const Sample& s : e.samples) EXPECT_EQ(s.labels.at("model_name"), "we\"ird\\mo\ndel");
  EXPECT_EQ(e.Value("switchyard:num_requests_total", {{"finish_reason", "odd\"reason"}}), 1);
}

TEST(ServingMetricsTest, WritersAndRenderersRunConcurrently) {
  ServingMetrics m("tiny");
  constexpr int kSteps = 2000;
  std::thread writer([&m] {
    for (int i = 0; i < kSteps; ++i) {
      m.AddStep(1, 2, 0, 0);
      m.SetGauges({.running = i % 7,
                   .waiting = 0,
                   .token_usage = 0,
                   .state_usage = 0,
                   .cache_hit_rate = 0,
                   .cached_tokens = 0});
      m.ObserveRequest(0.01, 0.01, 0.01, "eos");
    }
  });
  for (int i = 0; i < 50; ++i) (void)Parse(m.Render());
  writer.join();
  const Exposition e = Parse(m.Render());
  EXPECT_EQ(e.Value("switchyard:generation_tokens_total"), 2 * kSteps);
  EXPECT_EQ(e.Value("switchyard:e2e_request_latency_seconds_count"), kSteps);
}

}  // namespace
}  // namespace sy::engine
