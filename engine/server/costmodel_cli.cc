#include "engine/server/costmodel_cli.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/costmodel/cost_model.h"

namespace sy::engine {
namespace {

using namespace costmodel;  // NOLINT: this file is the cost model's front end
using nlohmann::json;

constexpr int kExitRuntime = 1;
constexpr int kExitUsage = 2;

std::string Fmt(const char* f, double a) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, a);
  return buf;
}

struct Flags {
  std::string catalog = DefaultCatalogDir();
  std::string hardware, model, phase = "prefill", dtype = "bf16", dispatch_dtype;
  std::string overlap = "serial", hops = "avg", shared_rows = "local";
  int64_t tokens = 0, context = 0;
  int ep = 1, tp = 1, devices = 0, bts = 0;
  double eff_compute = 1, eff_hbm = 1, eff_link = 1, switch_efficiency = 0.70;
  bool json = false;
};

json KernelJson(const KernelCost& k) {
  return {{"name", k.name},
          {"layers", k.layers},
          {"communication", k.communication},
          {"flops", k.flops},
          {"weight_bytes", k.weight_bytes},
          {"activation_bytes", k.activation_bytes},
          {"link_bytes", k.link_bytes},
          {"compute_s", k.compute_s},
          {"weight_hbm_s", k.weight_hbm_s},
          {"hbm_s", k.hbm_s},
          {"link_s", k.link_s},
          {"time_s", k.time_s},
          {"total_s", k.time_s * k.layers}};
}

std::string Topo(const HardwareSpec& hw, const Interconnect& ic) {
  if (hw.topology == Topology::kSwitch) return "switch";
  return "torus " + std::to_string(ic.torus[0]) + "x" + std::to_string(ic.torus[1]) + "x" +
         std::to_string(ic.torus[2]);
}

void PrintStep(const Flags& f, const HardwareSpec& hw, const ModelSpec& m, const StepOptions& o,
               const StepCost& c, std::ostream& out) {
  if (f.json) {
    json ks = json::array();
    for (const KernelCost& k : c.kernels) ks.push_back(KernelJson(k));
    json j = {{"hardware", hw.name},
              {"model", m.name},
              {"phase", f.phase},
              {"tokens", o.tokens},
              {"devices", c.devices},
              {"ep", o.ep},
              {"tp", o.tp},
              {"dp", c.dp},
              {"dtype", f.dtype},
              {"chips", c.interconnect.chips},
              {"topology", Topo(hw, c.interconnect)},
              {"injection_bandwidth", c.interconnect.injection_bandwidth},
              {"hop_factor", c.hop_factor},
              {"overlap", f.overlap},
              {"kernels", ks},
              {"moe_layer_s", c.moe_layer_s},
              {"step_s", c.step_s},
              {"weight_bytes_per_device", c.weight_bytes_per_device},
              {"hbm_capacity", c.hbm_capacity}};
    out << j.dump() << "\n";
    return;
  }
  out << "costmodel " << m.name << " on " << c.devices << " x " << hw.name << " ("
      << c.interconnect.chips << " chips, " << Topo(hw, c.interconnect) << "), " << f.phase << " "
      << o.tokens << " tokens, ep=" << o.ep << " tp=" << o.tp << " dp=" << c.dp << ", " << f.dtype
      << "\n";
  out << "interconnect: " << Fmt("%.1f", c.interconnect.injection_bandwidth / 1e9)
      << " GB/s injection per device, all-to-all hop factor " << Fmt("%.2f", c.hop_factor)
      << "; overlap " << f.overlap << "\n";
  char line[256];
  std::snprintf(line, sizeof line, "%-20s %6s %11s %10s %10s %10s %9s %9s %9s %9s %10s\n", "kernel",
                "layers", "GFLOP", "weight MB", "act MB", "link MB", "comp ms", "hbm ms", "link ms",
                "time ms", "total ms");
  out << line;
  for (const KernelCost& k : c.kernels) {
    std::snprintf(line, sizeof line,
                  "%-20s %6d %11.1f %10.1f %10.1f %10.1f %9.4f %9.4f %9.4f %9.4f %10.3f\n",
                  k.name.c_str(), k.layers, k.flops / 1e9, k.weight_bytes / 1e6,
                  k.activation_bytes / 1e6, k.link_bytes / 1e6, k.compute_s * 1e3, k.hbm_s * 1e3,
                  k.link_s * 1e3, k.time_s * 1e3, k.time_s * k.layers * 1e3);
    out << line;
  }
  out << "(per device; GFLOP .. time ms per layer; total ms = time x layers)\n";
  out << "MoE layer " << Fmt("%.4f", c.moe_layer_s * 1e3) << " ms; step "
      << Fmt("%.3f", c.step_s * 1e3) << " ms; weights per device "
      << Fmt("%.1f", c.weight_bytes_per_device / 1e9) << " GB of "
      << Fmt("%.1f", c.hbm_capacity / 1e9) << " GB HBM"
      << (c.weight_bytes_per_device > c.hbm_capacity ? " (DOES NOT FIT)" : "") << "\n";
}

void PrintReshard(const Flags& f, const HardwareSpec& hw, const ModelSpec& m, const ReshardCost& r,
                  std::ostream& out) {
  if (f.json) {
    out << json{{"hardware", hw.name},
                {"model", m.name},
                {"phase", "switch"},
                {"devices", r.devices},
                {"dtype", f.dtype},
                {"expert_bytes_per_device", r.expert_bytes_per_device},
                {"bytes_moved", r.bytes_moved},
                {"hop_factor", r.hop_factor},
                {"effective_bandwidth", r.effective_bandwidth},
                {"time_s", r.time_s}}
               .dump()
        << "\n";
    return;
  }
  out << "costmodel " << m.name << " TP<->EP expert reshard on " << r.devices << " x " << hw.name
      << ", " << f.dtype << " weights\n"
      << "expert bytes per device: " << Fmt("%.2f", r.expert_bytes_per_device / 1e9) << " GB\n"
      << "bytes moved per device:  " << Fmt("%.2f", r.bytes_moved / 1e9) << " GB ((P-1)/P)\n"
      << "effective bandwidth:     " << Fmt("%.1f", r.effective_bandwidth / 1e9)
      << " GB/s (hop factor " << Fmt("%.3f", r.hop_factor) << ")\n"
      << "time:                    " << Fmt("%.1f", r.time_s * 1e3) << " ms (weights only)\n";
}

}  // namespace

int RunCostModel(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  CLI::App app{
      "moe-engine costmodel: analytic per-kernel cost of one MoE serving step on a catalogued\n"
      "accelerator, or of the TP<->EP expert reshard (docs/COSTMODEL.md).",
      "moe-engine costmodel"};
  Flags f;
  app.add_option("--hardware", f.hardware, "hardware name in the catalogue")->required();
  app.add_option("--model", f.model, "model name in the catalogue, or an HF config.json path")
      ->required();
  app.add_option("--catalog", f.catalog, "catalogue directory (hardware/, models/)")
      ->capture_default_str();
  app.add_option("--phase", f.phase, "prefill | decode | switch")
      ->check(CLI::IsMember({"prefill", "decode", "switch"}))
      ->capture_default_str();
  app.add_option("--tokens", f.tokens, "tokens in the step over all devices (decode: sequences)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  app.add_option("--context", f.context,
                 "prefill: prompt length (default: one prompt of --tokens); decode: KV tokens "
                 "per sequence (default 4096)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  app.add_option("--ep", f.ep, "expert parallel degree: 1 (TP experts) or the devices")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  app.add_option("--tp", f.tp, "attention tensor parallel degree")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  app.add_option("--devices", f.devices, "devices P (default max(ep, tp); required for switch)")
      ->check(CLI::Range(1, 1 << 16));
  app.add_option("--dtype", f.dtype, "compute, expert-weight and dispatch dtype")
      ->check(CLI::IsMember({"fp8", "bf16"}))
      ->capture_default_str();
  app.add_option("--dispatch-dtype", f.dispatch_dtype, "dispatch/combine rows (default --dtype)")
      ->check(CLI::IsMember({"fp8", "bf16"}));
  app.add_option("--bts", f.bts, "token-staging tile; 0: expert weights read once")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  app.add_option("--overlap", f.overlap, "serial | hide-comm")
      ->check(CLI::IsMember({"serial", "hide-comm"}))
      ->capture_default_str();
  app.add_option("--hops", f.hops, "avg (topology hop factor) | injection (hop factor 1)")
      ->check(CLI::IsMember({"avg", "injection"}))
      ->capture_default_str();
  app.add_option("--shared-rows", f.shared_rows,
                 "shared-expert rows: local (N/P tokens) | routed (N*top_k/P, seed 000)")
      ->check(CLI::IsMember({"local", "routed"}))
      ->capture_default_str();
  app.add_option("--eff-compute", f.eff_compute, "fraction of peak FLOP/s")
      ->check(CLI::Range(1e-6, 1.0))
      ->capture_default_str();
  app.add_option("--eff-hbm", f.eff_hbm, "fraction of peak HBM bandwidth")
      ->check(CLI::Range(1e-6, 1.0))
      ->capture_default_str();
  app.add_option("--eff-link", f.eff_link, "fraction of peak link bandwidth")
      ->check(CLI::Range(1e-6, 1.0))
      ->capture_default_str();
  app.add_option("--switch-efficiency", f.switch_efficiency,
                 "fraction of link bandwidth the reshard reaches (seed 003: 0.70)")
      ->check(CLI::Range(1e-6, 1.0))
      ->capture_default_str();
  app.add_flag("--json", f.json, "one JSON object instead of the table");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e, out, err);
    return code == 0 ? 0 : kExitUsage;
  }
  auto fail = [&](const Status& s) {
    err << "moe-engine costmodel: " << s.ToString() << "\n";
    return s.code() == StatusCode::kNotFound || s.code() == StatusCode::kInvalidArgument
               ? kExitUsage
               : kExitRuntime;
  };
  Result<HardwareSpec> hw = LoadHardware(f.catalog, f.hardware);
  if (!hw.ok()) return fail(hw.status());
  Result<ModelSpec> model = LoadModel(f.catalog, f.model);
  if (!model.ok()) return fail(model.status());
  const Dtype dtype = f.dtype == "fp8" ? Dtype::kFp8 : Dtype::kBf16;

  if (f.phase == "switch") {
    if (f.devices == 0) return fail(InvalidArgument("--phase switch needs --devices P"));
    Result<ReshardCost> r = EstimateReshard(
        *hw, *model,
        {.devices = f.devices, .weight_dtype = dtype, .link_efficiency = f.switch_efficiency});
    if (!r.ok()) return fail(r.status());
    PrintReshard(f, *hw, *model, *r, out);
    return 0;
  }
  if (f.tokens == 0) return fail(InvalidArgument("--phase " + f.phase + " needs --tokens N"));
  StepOptions o;
  o.phase = f.phase == "prefill" ? Phase::kPrefill : Phase::kDecode;
  o.tokens = f.tokens;
  o.context = f.context;
  o.ep = f.ep;
  o.tp = f.tp;
  o.devices = f.devices;
  o.compute_dtype = o.weight_dtype = dtype;
  o.dispatch_dtype = f.dispatch_dtype.empty()    ? dtype
                     : f.dispatch_dtype == "fp8" ? Dtype::kFp8
                                                 : Dtype::kBf16;
  o.bts = f.bts;
  o.efficiency = {f.eff_compute, f.eff_hbm, f.eff_link};
  o.overlap = f.overlap == "serial" ? Overlap::kSerial : Overlap::kHideComm;
  o.hops = f.hops == "avg" ? HopModel::kAverageHops : HopModel::kInjectionOnly;
  o.shared_rows = f.shared_rows == "local" ? SharedRows::kLocalTokens : SharedRows::kRoutedRows;
  Result<StepCost> c = EstimateStep(*hw, *model, o);
  if (!c.ok()) return fail(c.status());
  PrintStep(f, *hw, *model, o, *c, out);
  return 0;
}

int CostModelMain(int argc, char** argv) { return RunCostModel(argc, argv, std::cout, std::cerr); }

}  // namespace sy::engine
