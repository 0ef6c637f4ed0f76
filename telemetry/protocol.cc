#include "telemetry/protocol.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <stdexcept>
#include <type_traits>

namespace sy::telemetry {

using nlohmann::json;

// Field-by-field codecs. Strict on decode: a missing key or a wrong type throws
// inside nlohmann and is turned into INVALID_ARGUMENT at Decode().
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ModelInfo, preset, vocab, hidden, layers, heads, head_dim,
                                   experts, top_k, expert_inter, shared_inter, max_seq, page_size,
                                   params, dtype, arch, attention)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Span, device, layer, name, kind, start_us, dur_us, tokens, flops,
                                   bytes)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(KernelStat, device, name, kind, count, total_us, max_us, flops,
                                   bytes)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(DeviceOccupancy, device, kv_pages_used, kv_pages_total, running,
                                   state_slots_used, state_slots_total, kv_bytes_used,
                                   kv_bytes_total, state_bytes_used, state_bytes_total)

namespace {

// Strict readers. nlohmann's get<> would turn 1.5 or true into an int and -1
// into a huge uint64, and its errors do not say which key was wrong. The wire
// contract says integers are JSON integers, so every field is checked here and
// every error names its path ("model.vocab", "spans[3].dur_us").
class FieldError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

[[noreturn]] void Fail(const std::string& path, const std::string& what) {
  throw FieldError("field '" + path + "' " + what);
}

std::string Got(const json& j) { return std::string(", got ") + j.type_name(); }

void Read(const json& j, const std::string& path, bool& out);
void Read(const json& j, const std::string& path, std::string& out);
void Read(const json& j, const std::string& path, json& out);
void Read(const json& j, const std::string& path, std::map<std::string, int64_t>& out);
void Read(const json& j, const std::string& path, ModelInfo& m);
void Read(const json& j, const std::string& path, Span& m);
void Read(const json& j, const std::string& path, KernelStat& m);
void Read(const json& j, const std::string& path, DeviceOccupancy& m);
template <typename T>
void Read(const json& j, const std::string& path, std::vector<T>& out);

template <typename T>
requires(std::is_integral_v<T> &&
         !std::is_same_v<T, bool>) void Read(const json& j, const std::string& path, T& out) {
  if (!j.is_number_integer()) Fail(path, "must be an integer" + Got(j));
  using Limits = std::numeric_limits<T>;
  if (j.is_number_unsigned()) {
    const auto u = j.get<uint64_t>();
    if (u > static_cast<uint64_t>(Limits::max())) Fail(path, "is out of range");
    out = static_cast<T>(u);
    return;
  }
  const auto v = j.get<int64_t>();
  if constexpr (std::is_unsigned_v<T>) {
    if (v < 0) Fail(path, "must not be negative");
  } else {
    if (v < static_cast<int64_t>(Limits::min()) || v > static_cast<int64_t>(Limits::max())) {
      Fail(path, "is out of range");
    }
  }
  out = static_cast<T>(v);
}

void Read(const json& j, const std::string& path, bool& out) {
  if (!j.is_boolean()) Fail(path, "must be a boolean" + Got(j));
  out = j.get<bool>();
}

void Read(const json& j, const std::string& path, std::string& out) {
  if (!j.is_string()) Fail(path, "must be a string" + Got(j));
  out = j.get<std::string>();
}

void Read(const json& j, const std::string& path, json& out) { out = j; }

template <typename T>
void Read(const json& j, const std::string& path, std::vector<T>& out) {
  if (!j.is_array()) Fail(path, "must be an array" + Got(j));
  out.clear();
  out.resize(j.size());
  for (size_t i = 0; i < j.size(); ++i) Read(j[i], path + "[" + std::to_string(i) + "]", out[i]);
}

void Read(const json& j, const std::string& path, std::map<std::string, int64_t>& out) {
  if (!j.is_object()) Fail(path, "must be an object" + Got(j));
  out.clear();
  for (const auto& [key, value] : j.items()) Read(value, path + "." + key, out[key]);
}

// Reads obj[key] into out; `prefix` is the path of obj ("" at top level).
template <typename T>
void Field(const json& obj, const std::string& prefix, const char* key, T& out) {
  std::string path = prefix.empty() ? std::string(key) : prefix + "." + key;
  auto it = obj.find(key);
  if (it == obj.end()) throw FieldError("missing field '" + path + "'");
  Read(*it, path, out);
}

void RequireObject(const json& j, const std::string& path) {
  if (!j.is_object()) Fail(path, "must be an object" + Got(j));
}

#define SY_FIELD(f) Field(j, path, #f, m.f)

void Read(const json& j, const std::string& path, ModelInfo& m) {
  RequireObject(j, path);
  SY_FIELD(preset);
  SY_FIELD(vocab);
  SY_FIELD(hidden);
  SY_FIELD(layers);
  SY_FIELD(heads);
  SY_FIELD(head_dim);
  SY_FIELD(experts);
  SY_FIELD(top_k);
  SY_FIELD(expert_inter);
  SY_FIELD(shared_inter);
  SY_FIELD(max_seq);
  SY_FIELD(page_size);
  SY_FIELD(params);
  SY_FIELD(dtype);
  SY_FIELD(arch);
  SY_FIELD(attention);
  if (m.attention.size() != static_cast<size_t>(m.layers)) {
    Fail(path + ".attention", "has " + std::to_string(m.attention.size()) +
                                  " entries, one per layer expected (" + path + ".layers is " +
                                  std::to_string(m.layers) + ")");
  }
  for (size_t i = 0; i < m.attention.size(); ++i) {
    const std::string& kind = m.attention[i];
    if (std::find(std::begin(kAttentionKinds), std::end(kAttentionKinds), kind) ==
        std::end(kAttentionKinds)) {
      Fail(path + ".attention[" + std::to_string(i) + "]",
           "must be one of \"mha\", \"mla\", \"kda\", \"gla\", got \"" + kind.substr(0, 32) + "\"");
    }
  }
}

void Read(const json& j, const std::string& path, Span& m) {
  RequireObject(j, path);
  SY_FIELD(device);
  SY_FIELD(layer);
  SY_FIELD(name);
  SY_FIELD(kind);
  SY_FIELD(start_us);
  SY_FIELD(dur_us);
  SY_FIELD(tokens);
  SY_FIELD(flops);
  SY_FIELD(bytes);
}

void Read(const json& j, const std::string& path, KernelStat& m) {
  RequireObject(j, path);
  SY_FIELD(device);
  SY_FIELD(name);
  SY_FIELD(kind);
  SY_FIELD(count);
  SY_FIELD(total_us);
  SY_FIELD(max_us);
  SY_FIELD(flops);
  SY_FIELD(bytes);
}

void Read(const json& j, const std::string& path, DeviceOccupancy& m) {
  RequireObject(j, path);
  SY_FIELD(device);
  SY_FIELD(kv_pages_used);
  SY_FIELD(kv_pages_total);
  SY_FIELD(running);
  SY_FIELD(state_slots_used);
  SY_FIELD(state_slots_total);
  SY_FIELD(kv_bytes_used);
  SY_FIELD(kv_bytes_total);
  SY_FIELD(state_bytes_used);
  SY_FIELD(state_bytes_total);
}

#undef SY_FIELD

void PutEnv(json& j, const Envelope& e) {
  j["v"] = e.v;
  j["run"] = e.run;
  j["seq"] = e.seq;
  j["t"] = e.t_us;
}

// The rest of the envelope is read after the version check (ParseAs), so a
// message from a newer schema is reported as that, not as a missing field.
void GetEnv(const json& j, Envelope& e) {
  Field(j, "", "run", e.run);
  Field(j, "", "seq", e.seq);
  Field(j, "", "t", e.t_us);
}

#define PUT(f) j[#f] = m.f
#define GET(f) Field(j, "", #f, m.f)

json Body(const Meta& m) {
  json j;
  PUT(model);
  PUT(devices);
  PUT(layout);
  PUT(trace_level);
  PUT(paused);
  PUT(started_unix_ms);
  PUT(workload);
  PUT(expert_device);
  PUT(kv_pages_per_device);
  PUT(state_slots_per_device);
  return j;
}
void Parse(const json& j, Meta& m) {
  GET(model);
  GET(devices);
  GET(layout);
  GET(trace_level);
  GET(paused);
  GET(started_unix_ms);
  GET(workload);
  GET(expert_device);
  GET(kv_pages_per_device);
  GET(state_slots_per_device);
}

json Body(const Step& m) {
  json j;
  PUT(step);
  PUT(start_us);
  PUT(dur_us);
  PUT(prefill_tokens);
  PUT(decode_tokens);
  PUT(batch_requests);
  PUT(running);
  PUT(waiting);
  PUT(finished_total);
  PUT(generated_total);
  return j;
}
void Parse(const json& j, Step& m) {
  GET(step);
  GET(start_us);
  GET(dur_us);
  GET(prefill_tokens);
  GET(decode_tokens);
  GET(batch_requests);
  GET(running);
  GET(waiting);
  GET(finished_total);
  GET(generated_total);
}

json Body(const Spans& m) {
  json j;
  PUT(step);
  PUT(spans);
  return j;
}
void Parse(const json& j, Spans& m) {
  GET(step);
  GET(spans);
}

json Body(const KernelStats& m) {
  json j;
  PUT(step);
  PUT(kernels);
  return j;
}
void Parse(const json& j, KernelStats& m) {
  GET(step);
  GET(kernels);
}

json Body(const Occupancy& m) {
  json j;
  PUT(step);
  PUT(devices);
  PUT(running);
  PUT(waiting);
  PUT(prefill_tokens);
  PUT(decode_tokens);
  return j;
}
void Parse(const json& j, Occupancy& m) {
  GET(step);
  GET(devices);
  GET(running);
  GET(waiting);
  GET(prefill_tokens);
  GET(decode_tokens);
}

json Body(const ExpertLoad& m) {
  json j;
  PUT(step);
  PUT(counts);
  PUT(expert_device);
  return j;
}
void Parse(const json& j, ExpertLoad& m) {
  GET(step);
  GET(counts);
  GET(expert_device);
}

json Body(const RequestDone& m) {
  json j;
  PUT(id);
  PUT(device);
  PUT(prompt_tokens);
  PUT(output_tokens);
  PUT(arrival_us);
  PUT(ttft_us);
  PUT(tpot_us);
  PUT(e2e_us);
  PUT(finish);
  return j;
}
void Parse(const json& j, RequestDone& m) {
  GET(id);
  GET(device);
  GET(prompt_tokens);
  GET(output_tokens);
  GET(arrival_us);
  GET(ttft_us);
  GET(tpot_us);
  GET(e2e_us);
  GET(finish);
}

json Body(const Event& m) {
  json j;
  PUT(kind);
  PUT(name);
  PUT(phase);
  PUT(message);
  PUT(detail);
  return j;
}
void Parse(const json& j, Event& m) {
  GET(kind);
  GET(name);
  GET(phase);
  GET(message);
  GET(detail);
  RequireObject(m.detail, "detail");
}

json Body(const Heartbeat& m) {
  json j;
  PUT(interval_ms);
  PUT(state);
  PUT(sent_total);
  PUT(dropped_total);
  PUT(dropped);
  PUT(step);
  return j;
}
void Parse(const json& j, Heartbeat& m) {
  GET(interval_ms);
  GET(state);
  GET(sent_total);
  GET(dropped_total);
  GET(dropped);
  GET(step);
}

#undef PUT
#undef GET

template <typename T>
constexpr std::string_view TopicFor() {
  if constexpr (std::is_same_v<T, Meta>) return kTopicMeta;
  if constexpr (std::is_same_v<T, Step>) return kTopicStep;
  if constexpr (std::is_same_v<T, Spans>) return kTopicSpans;
  if constexpr (std::is_same_v<T, KernelStats>) return kTopicKernelStats;
  if constexpr (std::is_same_v<T, Occupancy>) return kTopicOccupancy;
  if constexpr (std::is_same_v<T, ExpertLoad>) return kTopicExperts;
  if constexpr (std::is_same_v<T, RequestDone>) return kTopicRequest;
  if constexpr (std::is_same_v<T, Event>) return kTopicEvent;
  if constexpr (std::is_same_v<T, Heartbeat>) return kTopicHeartbeat;
}

template <typename T>
Result<Message> ParseAs(std::string_view topic, const json& j) {
  T m;
  try {
    Field(j, "", "v", m.env.v);
    if (m.env.v != kSchemaVersion) {
      return InvalidArgument("'" + std::string(topic) + "' message has schema version " +
                             std::to_string(m.env.v) + ", this build speaks " +
                             std::to_string(kSchemaVersion));
    }
    GetEnv(j, m.env);
    Parse(j, m);
  } catch (const std::exception& e) {
    return InvalidArgument("malformed '" + std::string(topic) + "' message: " + e.what());
  }
  return Message(std::move(m));
}

}  // namespace

std::string_view TopicOf(const Message& m) {
  return std::visit([](const auto& x) { return TopicFor<std::decay_t<decltype(x)>>(); }, m);
}

const Envelope& EnvelopeOf(const Message& m) {
  return std::visit([](const auto& x) -> const Envelope& { return x.env; }, m);
}

Envelope& MutableEnvelopeOf(Message& m) {
  return std::visit([](auto& x) -> Envelope& { return x.env; }, m);
}

json ToJson(const Message& m) {
  return std::visit(
      [](const auto& x) {
        json j = Body(x);
        PutEnv(j, x.env);
        return j;
      },
      m);
}

WireMessage Encode(const Message& m) {
  return {std::string(TopicOf(m)), ToJson(m).dump(-1, ' ', false, json::error_handler_t::replace)};
}

Result<Message> FromJson(std::string_view topic, const json& j) {
  if (!j.is_object()) {
    return InvalidArgument("malformed '" + std::string(topic) +
                           "' message: body is not a JSON object");
  }
  if (topic == kTopicMeta) return ParseAs<Meta>(topic, j);
  if (topic == kTopicStep) return ParseAs<Step>(topic, j);
  if (topic == kTopicSpans) return ParseAs<Spans>(topic, j);
  if (topic == kTopicKernelStats) return ParseAs<KernelStats>(topic, j);
  if (topic == kTopicOccupancy) return ParseAs<Occupancy>(topic, j);
  if (topic == kTopicExperts) return ParseAs<ExpertLoad>(topic, j);
  if (topic == kTopicRequest) return ParseAs<RequestDone>(topic, j);
  if (topic == kTopicEvent) return ParseAs<Event>(topic, j);
  if (topic == kTopicHeartbeat) return ParseAs<Heartbeat>(topic, j);
  std::string shown(topic.substr(0, 64));
  return InvalidArgument("unknown topic '" + shown + "'");
}

Result<Message> Decode(std::string_view topic, std::string_view body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return InvalidArgument("malformed '" + std::string(topic.substr(0, 64)) +
                           "' message: body is not valid JSON");
  }
  return FromJson(topic, j);
}

// ---- Commands ----

std::string EncodeRequest(const CommandRequest& r) {
  json j{{"id", r.id}, {"cmd", r.cmd}, {"args", r.args}};
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<CommandRequest> DecodeRequest(std::string_view body) {
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded()) return InvalidArgument("request is not valid JSON");
  if (!j.is_object()) return InvalidArgument("request must be a JSON object");
  CommandRequest r;
  if (j.contains("id")) {
    r.id = j["id"];
    if (!r.id.is_null() && !r.id.is_number() && !r.id.is_string()) {
      return InvalidArgument("field 'id' must be a number, a string or null");
    }
  }
  if (!j.contains("cmd")) return InvalidArgument("request has no 'cmd' field");
  if (!j["cmd"].is_string()) return InvalidArgument("field 'cmd' must be a string");
  r.cmd = j["cmd"].get<std::string>();
  if (j.contains("args") && !j["args"].is_null()) {
    if (!j["args"].is_object()) return InvalidArgument("field 'args' must be an object");
    r.args = j["args"];
  }
  return r;
}

std::string EncodeReply(const CommandReply& r) {
  json j{{"id", r.id}, {"ok", r.ok}};
  if (r.ok) {
    j["result"] = r.result;
  } else {
    j["error"] = {{"code", r.error_code}, {"message", r.error_message}};
  }
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<CommandReply> DecodeReply(std::string_view body) {
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument("reply is not a JSON object");
  CommandReply r;
  try {
    r.id = j.contains("id") ? j["id"] : json();
    r.ok = j.at("ok").get<bool>();
    if (r.ok) {
      r.result = j.contains("result") ? j["result"] : json();
    } else {
      r.error_code = j.at("error").at("code").get<std::string>();
      r.error_message = j.at("error").at("message").get<std::string>();
    }
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("malformed reply: ") + e.what());
  }
  return r;
}

CommandReply ErrorReply(const json& id, const Status& s) {
  CommandReply r;
  r.id = id;
  r.ok = false;
  r.error_code = std::string(StatusCodeName(s.code()));
  r.error_message = s.message();
  return r;
}

CommandReply OkReply(const json& id, json result) {
  CommandReply r;
  r.id = id;
  r.ok = true;
  r.result = std::move(result);
  return r;
}

}  // namespace sy::telemetry
