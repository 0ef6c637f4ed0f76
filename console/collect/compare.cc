#include "console/collect/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "console/collect/collector.h"

namespace sy::console {
namespace {

constexpr double kUsPerS = 1e6;

// Relative changes below this are shown but not coloured (noise).
constexpr double kNeutralPct = 2.0;

std::string Pct(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f%%", fraction * 100);
  return buf;
}

}  // namespace

bool IsMoeKernel(std::string_view name) {
  static constexpr std::string_view kMoe[] = {"router",    "dispatch",    "expert_ffn",
                                              "combine",   "notify",      "shared_expert",
                                              "tp_gather", "tp_allreduce"};
  if (std::find(std::begin(kMoe), std::end(kMoe), name) != std::end(kMoe)) return true;
  return name.find("moe") != std::string_view::npos ||
         name.find("expert") != std::string_view::npos;
}

WindowAccumulator::WindowAccumulator(std::string label, int64_t from_us, int64_t to_us) {
  f_.label = std::move(label);
  f_.from_us = from_us;
  f_.to_us = to_us;
}

void WindowAccumulator::AddLayout(const std::string& layout) {
  if (layout.empty() || (!layouts_.empty() && layouts_.back() == layout)) return;
  layouts_.push_back(layout);
}

void WindowAccumulator::SetInitialLayout(const std::string& layout) {
  if (layouts_.empty()) AddLayout(layout);
}

void WindowAccumulator::Consume(const telemetry::Message& m) {
  const int64_t t = telemetry::EnvelopeOf(m).t_us;
  if (t < f_.from_us || t >= f_.to_us) return;
  if (const auto* s = std::get_if<telemetry::Step>(&m)) {
    ++f_.steps;
    prefill_tokens_ += s->prefill_tokens;
    decode_tokens_ += s->decode_tokens;
    batch_sum_ += s->batch_requests;
    dur_sum_ += s->dur_us;
  } else if (const auto* r = std::get_if<telemetry::RequestDone>(&m)) {
    ++f_.requests;
    // As the Collector: a request cancelled before its first token has no
    // latency, a one-token answer no time per output token.
    if (!(r->finish == "cancelled" && r->output_tokens == 0)) ttft_.push_back(r->ttft_us);
    if (r->output_tokens > 1) tpot_.push_back(r->tpot_us);
  } else if (const auto* k = std::get_if<telemetry::KernelStats>(&m)) {
    ++f_.kernel_steps;
    for (const telemetry::KernelStat& ks : k->kernels) {
      KernelSum& sum = kernels_[ks.name];
      sum.kind = ks.kind;
      sum.count += ks.count;
      sum.total_us += ks.total_us;
      sum.max_us = std::max(sum.max_us, ks.max_us);
    }
  } else if (const auto* meta = std::get_if<telemetry::Meta>(&m)) {
    AddLayout(meta->layout);
  }
}

WindowFigures WindowAccumulator::Finish() const {
  WindowFigures f = f_;
  const double seconds = static_cast<double>(f.to_us - f.from_us) / kUsPerS;
  if (seconds > 0) {
    f.prefill_tps = static_cast<double>(prefill_tokens_) / seconds;
    f.decode_tps = static_cast<double>(decode_tokens_) / seconds;
  }
  if (f.steps > 0) {
    f.batch_mean = static_cast<double>(batch_sum_) / static_cast<double>(f.steps);
    f.step_us_mean = static_cast<double>(dur_sum_) / static_cast<double>(f.steps);
  }
  f.ttft = {Percentile(ttft_, 50), Percentile(ttft_, 99), static_cast<int>(ttft_.size())};
  f.tpot = {Percentile(tpot_, 50), Percentile(tpot_, 99), static_cast<int>(tpot_.size())};
  for (const auto& l : layouts_) f.layout += (f.layout.empty() ? "" : ">") + l;
  int64_t all = 0, moe = 0;
  for (const auto& [name, k] : kernels_) {
    all += k.total_us;
    if (IsMoeKernel(name)) moe += k.total_us;
  }
  for (const auto& [name, k] : kernels_) {
    KernelRow row;
    row.name = name;
    row.kind = k.kind;
    row.count = static_cast<int>(std::min<int64_t>(k.count, INT32_MAX));
    row.total_us = k.total_us;
    row.mean_us = k.count > 0 ? k.total_us / k.count : 0;
    row.max_us = k.max_us;
    row.share = all > 0 ? static_cast<double>(k.total_us) / static_cast<double>(all) : 0;
    f.kernels.push_back(std::move(row));
  }
  std::stable_sort(f.kernels.begin(), f.kernels.end(),
                   [](const KernelRow& x, const KernelRow& y) { return x.share > y.share; });
  f.moe_share = all > 0 ? static_cast<double>(moe) / static_cast<double>(all) : 0;
  return f;
}

std::string PercentChange(double a, double b) {
  if (a == 0 || !std::isfinite(a) || !std::isfinite(b)) return "";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.0f%%", (b - a) / std::fabs(a) * 100);
  return buf;
}

Comparison Compare(const WindowFigures& a, const WindowFigures& b, int top) {
  using Unit = FigureDelta::Unit;
  Comparison c;
  c.a = a;
  c.b = b;
  // higher: +1 when a larger value is better, -1 when smaller is, 0 neither.
  auto number = [&](std::string name, Unit unit, double va, double vb, int higher) {
    FigureDelta d;
    d.name = std::move(name);
    d.unit = unit;
    d.a = va;
    d.b = vb;
    if (unit == Unit::kFraction) {
      if (va != vb || va != 0) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%+.1f pts", (vb - va) * 100);
        d.delta = buf;
      }
    } else {
      d.delta = PercentChange(va, vb);
    }
    if (va != 0 && higher != 0) {
      const double pct = (vb - va) / std::fabs(va) * 100;
      if (std::fabs(pct) >= kNeutralPct) d.verdict = (pct > 0) == (higher > 0) ? 1 : -1;
    }
    c.figures.push_back(std::move(d));
  };
  number("prefill tok/s", Unit::kRate, a.prefill_tps, b.prefill_tps, +1);
  number("decode tok/s", Unit::kRate, a.decode_tps, b.decode_tps, +1);
  number("batch (mean)", Unit::kCount, a.batch_mean, b.batch_mean, 0);
  number("step time", Unit::kUs, a.step_us_mean, b.step_us_mean, -1);
  number("TTFT p50", Unit::kUs, a.ttft.p50_us, b.ttft.p50_us, -1);
  number("TTFT p99", Unit::kUs, a.ttft.p99_us, b.ttft.p99_us, -1);
  number("TPOT p50", Unit::kUs, a.tpot.p50_us, b.tpot.p50_us, -1);
  number("TPOT p99", Unit::kUs, a.tpot.p99_us, b.tpot.p99_us, -1);
  number("requests done", Unit::kCount, a.requests, b.requests, 0);
  number("MoE share", Unit::kFraction, a.moe_share, b.moe_share, 0);
  FigureDelta layout;
  layout.name = "layout";
  layout.unit = Unit::kText;
  layout.text_a = a.layout.empty() ? "-" : a.layout;
  layout.text_b = b.layout.empty() ? "-" : b.layout;
  if (layout.text_a != layout.text_b) layout.delta = "changed";
  c.figures.push_back(std::move(layout));

  // Kernels: the union of both top lists, ordered by the larger share.
  std::set<std::string> names;
  for (int i = 0; i < top && i < static_cast<int>(a.kernels.size()); ++i)
    names.insert(a.kernels[i].name);
  for (int i = 0; i < top && i < static_cast<int>(b.kernels.size()); ++i)
    names.insert(b.kernels[i].name);
  auto find = [](const WindowFigures& f, const std::string& n) -> const KernelRow* {
    for (const KernelRow& k : f.kernels)
      if (k.name == n) return &k;
    return nullptr;
  };
  for (const std::string& n : names) {
    KernelDelta d;
    d.name = n;
    const KernelRow* ka = find(a, n);
    const KernelRow* kb = find(b, n);
    d.kind = ka ? ka->kind : kb->kind;
    if (ka) d.share_a = ka->share, d.mean_a_us = ka->mean_us;
    if (kb) d.share_b = kb->share, d.mean_b_us = kb->mean_us;
    c.kernels.push_back(std::move(d));
  }
  std::stable_sort(
      c.kernels.begin(), c.kernels.end(), [](const KernelDelta& x, const KernelDelta& y) {
        const double mx = std::max(x.share_a, x.share_b), my = std::max(y.share_a, y.share_b);
        return mx != my ? mx > my : x.name < y.name;
      });
  if (static_cast<int>(c.kernels.size()) > top) c.kernels.resize(top);

  // The one line: throughput, latency and MoE share, where both sides have them.
  std::string s;
  auto add = [&](const std::string& part) {
    if (!part.empty()) s += (s.empty() ? "" : ", ") + part;
  };
  if (auto d = PercentChange(a.decode_tps, b.decode_tps); !d.empty()) add("decode tok/s " + d);
  if (auto d = PercentChange(a.tpot.p50_us, b.tpot.p50_us); !d.empty()) add("TPOT " + d);
  if (auto d = PercentChange(a.ttft.p50_us, b.ttft.p50_us); !d.empty()) add("TTFT " + d);
  if (a.kernel_steps > 0 && b.kernel_steps > 0) {
    add("MoE share " + Pct(a.moe_share) + " -> " + Pct(b.moe_share));
  }
  if (a.layout != b.layout && !a.layout.empty() && !b.layout.empty()) {
    add("layout " + a.layout + " -> " + b.layout);
  }
  c.summary = "B vs A: " + (s.empty() ? std::string("no figures to compare") : s);
  return c;
}

}  // namespace sy::console
