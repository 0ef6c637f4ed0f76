#include "engine/eplb/eplb_cli.h"

#include <CLI/CLI.hpp>
#include <cmath>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>
#include <vector>

namespace sy::engine {
namespace {

constexpr int kExitUsage = 2;

// placement.h names its parameters as EplbOptions does; on the command line
// the user knows them as flags.
std::string WithFlagNames(std::string message) {
  static constexpr std::pair<std::string_view, std::string_view> kNames[] = {
      {"num_replicas", "--replicas"},
      {"num_groups", "--groups"},
      {"num_nodes", "--nodes"},
      {"num_devices", "--devices"},
  };
  for (const auto& [field, flag] : kNames) {
    for (size_t at = message.find(field); at != std::string::npos;
         at = message.find(field, at + flag.size())) {
      message.replace(at, field.size(), flag);
    }
  }
  return message;
}

}  // namespace

Result<EplbLoad> ParseEplbLoadJson(std::string_view text, std::string_view source) {
  const std::string src(source);
  nlohmann::json doc = nlohmann::json::parse(text, /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return InvalidArgument(src + ": not valid JSON");
  if (!doc.is_object()) return InvalidArgument(src + ": expected a JSON object {\"load\": [...]}");
  const auto it = doc.find("load");
  if (it == doc.end()) return InvalidArgument(src + ": missing key \"load\"");
  if (!it->is_array()) {
    return InvalidArgument(src + ": \"load\" must be an array of layers, got " + it->type_name());
  }
  if (it->empty()) return InvalidArgument(src + ": \"load\" has no layers");
  EplbLoad load;
  load.reserve(it->size());
  for (size_t l = 0; l < it->size(); ++l) {
    const nlohmann::json& row = (*it)[l];
    const std::string at = src + ": load[" + std::to_string(l) + "]";
    if (!row.is_array()) {
      return InvalidArgument(at + " must be an array of per-expert loads, got " + row.type_name());
    }
    if (row.empty()) return InvalidArgument(at + " has no experts");
    if (l > 0 && row.size() != load[0].size()) {
      return InvalidArgument(at + " has " + std::to_string(row.size()) +
                             " experts but load[0] has " + std::to_string(load[0].size()) +
                             " (ragged matrix)");
    }
    std::vector<double> values;
    values.reserve(row.size());
    for (size_t e = 0; e < row.size(); ++e) {
      const std::string cell = at + "[" + std::to_string(e) + "]";
      if (!row[e].is_number()) {
        return InvalidArgument(cell + " must be a number, got " + row[e].type_name());
      }
      const double w = row[e].get<double>();
      if (!std::isfinite(w))
        return InvalidArgument(cell + " is not finite (" + row[e].dump() + ")");
      if (w < 0) return InvalidArgument(cell + " is negative (" + row[e].dump() + ")");
      values.push_back(w);
    }
    load.push_back(std::move(values));
  }
  return load;
}

Result<EplbLoad> ReadEplbLoadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(path + ": cannot open the load file");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return InvalidArgument(path + ": read failed");
  return ParseEplbLoadJson(text.str(), path);
}

std::string EplbPlacementJson(const EplbPlacement& placement) {
  // ordered_json keeps the documented key order.
  nlohmann::ordered_json j;
  j["policy"] = EplbPolicyName(placement.policy);
  j["phy2log"] = placement.phy2log;
  j["log2phy"] = placement.log2phy;
  j["logcnt"] = placement.logcnt;
  j["balancedness"] = placement.balancedness;
  return j.dump();
}

int RunEplb(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  CLI::App app{
      "moe-engine eplb: compute an expert placement with redundant experts (DeepSeek's EPLB) "
      "from a JSON load matrix {\"load\": [[...per expert...] per layer]}; prints "
      "{\"policy\", \"phy2log\", \"log2phy\", \"logcnt\", \"balancedness\"} as JSON",
      "moe-engine eplb"};
  std::string stats;
  EplbOptions o;
  std::string policy = "auto";
  app.add_option("--stats", stats, "JSON load matrix file")->required();
  app.add_option("--replicas", o.num_replicas,
                 "physical expert slots per layer (>= experts, multiple of --devices)")
      ->required();
  app.add_option("--groups", o.num_groups, "expert groups (hierarchical policy)")
      ->capture_default_str();
  app.add_option("--nodes", o.num_nodes, "nodes (hierarchical policy)")->capture_default_str();
  app.add_option("--devices", o.num_devices, "devices (GPUs) holding --replicas / --devices slots")
      ->required();
  app.add_option("--policy", policy,
                 "auto: hierarchical when --groups is a multiple of --nodes, else global")
      ->check(CLI::IsMember({"auto", "hierarchical", "global"}))
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e, out, err);
  } catch (const CLI::ParseError& e) {
    app.exit(e, out, err);
    return kExitUsage;
  }
  // CLI::IsMember above guarantees a known name.
  o.policy = ParseEplbPolicy(policy).value();

  Result<EplbLoad> load = ReadEplbLoadFile(stats);
  if (!load.ok()) {
    err << "moe-engine eplb: --stats: " << load.status().message() << "\n";
    return kExitUsage;
  }
  Result<EplbPlacement> placement = RebalanceExperts(*load, o);
  if (!placement.ok()) {
    err << "moe-engine eplb: " << WithFlagNames(placement.status().message()) << "\n";
    return kExitUsage;
  }
  out << EplbPlacementJson(*placement) << "\n";
  return 0;
}

int EplbMain(int argc, char** argv) { return RunEplb(argc, argv, std::cout, std::cerr); }

}  // namespace sy::engine
