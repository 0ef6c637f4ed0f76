#include "telemetry/protocol.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <stdexcept>
#include <type_traits>

namespace sy::telemetry {

using nlohmann::json;

// One field list per struct, in wire order: encoding and decoding both expand
// it, so a field cannot be written without being read. *_OPTIONAL lists hold
// fields added after the first release of their message: decoding accepts
// their absence (the struct default, 0) so runs recorded by, and engines of,
// an older build still decode; present, they are as strictly typed as any.
// clang-format off
#define SY_MODEL_INFO(X)                                                                \
  X(preset) X(vocab) X(hidden) X(layers) X(heads) X(head_dim) X(experts) X(top_k)      \
  X(expert_inter) X(shared_inter) X(max_seq) X(page_size) X(params) X(dtype) X(arch)   \
  X(attention)
#define SY_SPAN(X)                                                                      \
  X(device) X(layer) X(name) X(kind) X(start_us) X(dur_us) X(tokens) X(flops) X(bytes)
#define SY_KERNEL_STAT(X)                                                               \
  X(device) X(name) X(kind) X(count) X(total_us) X(max_us) X(flops) X(bytes)
#define SY_DEVICE_OCCUPANCY(X)                                                          \
  X(device) X(kv_pages_used) X(kv_pages_total) X(running) X(state_slots_used)          \
  X(state_slots_total) X(kv_bytes_used) X(kv_bytes_total) X(state_bytes_used)          \
  X(state_bytes_total)
#define SY_DEVICE_OCCUPANCY_OPTIONAL(X)                                                 \
  X(cache_tokens) X(cache_nodes) X(cache_slots) X(cache_hit_rate) X(cache_evicted_pages)
#define SY_REQUEST_PROGRESS(X)                                                          \
  X(id) X(device) X(prompt_tokens) X(computed) X(generated) X(max_new_tokens)           \
  X(cached_tokens) X(preemptions) X(arrival_us) X(first_token_us)
#define SY_META(X)                                                                      \
  X(model) X(devices) X(layout) X(trace_level) X(paused) X(started_unix_ms) X(workload) \
  X(expert_device) X(kv_pages_per_device) X(state_slots_per_device)
#define SY_META_OPTIONAL(X) X(policy) X(backend)
#define SY_STEP(X)                                                                      \
  X(step) X(start_us) X(dur_us) X(prefill_tokens) X(decode_tokens) X(batch_requests)    \
  X(running) X(waiting) X(finished_total) X(generated_total)
#define SY_SPANS(X) X(step) X(spans)
#define SY_KERNEL_STATS(X) X(step) X(kernels)
#define SY_OCCUPANCY(X)                                                                 \
  X(step) X(devices) X(running) X(waiting) X(prefill_tokens) X(decode_tokens)
#define SY_EXPERT_LOAD(X) X(step) X(counts) X(expert_device)
#define SY_EXPERT_LOAD_OPTIONAL(X) X(phy2log) X(slot_device) X(balancedness) X(steps)
#define SY_REQUEST_DONE(X)                                                              \
  X(id) X(device) X(prompt_tokens) X(output_tokens) X(arrival_us) X(ttft_us) X(tpot_us) \
  X(e2e_us) X(finish)
#define SY_REQUEST_DONE_OPTIONAL(X) X(cached_tokens) X(preemptions)
#define SY_REQUESTS(X) X(step) X(running) X(waiting) X(running_total) X(waiting_total)
#define SY_EVENT(X) X(kind) X(name) X(phase) X(message) X(detail)
#define SY_HEARTBEAT(X)                                                                 \
  X(interval_ms) X(state) X(sent_total) X(dropped_total) X(dropped) X(step)
// clang-format on
#define SY_NO_FIELDS(X)

#define SY_PUT(f) j[#f] = Wire(m.f);
#define SY_GET(f) Field(j, path, #f, m.f);
#define SY_GET_OPTIONAL(f) OptionalField(j, path, #f, m.f);

namespace {
// JSON has no NaN or infinity (nlohmann would write null, which no decoder
// accepts as a number): a non-finite double goes out as 0.
template <typename T>
const T& Wire(const T& v) {
  return v;
}
double Wire(double v) { return std::isfinite(v) ? v : 0.0; }
std::vector<double> Wire(const std::vector<double>& v) {
  std::vector<double> out(v);
  for (double& x : out) x = Wire(x);
  return out;
}
}  // namespace

// Nested structs are written through nlohmann's to_json, found by ADL, so
// these live in sy::telemetry proper.
#define SY_TO_JSON(T, LIST, OPTIONAL) \
  void to_json(json& j, const T& m) { \
    j = json::object();               \
    LIST(SY_PUT)                      \
    OPTIONAL(SY_PUT)                  \
  }
SY_TO_JSON(ModelInfo, SY_MODEL_INFO, SY_NO_FIELDS)
SY_TO_JSON(Span, SY_SPAN, SY_NO_FIELDS)
SY_TO_JSON(KernelStat, SY_KERNEL_STAT, SY_NO_FIELDS)
SY_TO_JSON(DeviceOccupancy, SY_DEVICE_OCCUPANCY, SY_DEVICE_OCCUPANCY_OPTIONAL)
SY_TO_JSON(RequestProgress, SY_REQUEST_PROGRESS, SY_NO_FIELDS)
#undef SY_TO_JSON

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
void Read(const json& j, const std::string& path, double& out);
void Read(const json& j, const std::string& path, std::string& out);
void Read(const json& j, const std::string& path, json& out);
void Read(const json& j, const std::string& path, std::map<std::string, int64_t>& out);
void Read(const json& j, const std::string& path, ModelInfo& m);
void Read(const json& j, const std::string& path, Span& m);
void Read(const json& j, const std::string& path, KernelStat& m);
void Read(const json& j, const std::string& path, DeviceOccupancy& m);
void Read(const json& j, const std::string& path, RequestProgress& m);
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

// Free-form fields (event detail, meta policy) are objects on the wire.
void Read(const json& j, const std::string& path, json& out) {
  if (!j.is_object()) Fail(path, "must be an object" + Got(j));
  out = j;
}

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

// A JSON number of either kind; a double field has no integer rule to keep.
void Read(const json& j, const std::string& path, double& out) {
  if (!j.is_number()) Fail(path, "must be a number" + Got(j));
  out = j.get<double>();
}

// As Field, but an absent key leaves `out` as it was (its default).
template <typename T>
void OptionalField(const json& obj, const std::string& prefix, const char* key, T& out) {
  auto it = obj.find(key);
  if (it == obj.end()) return;
  Read(*it, prefix.empty() ? std::string(key) : prefix + "." + key, out);
}

// Nested objects: every listed field, then what ModelInfo checks beyond types.
#define SY_READ_STRUCT(T, LIST, OPTIONAL)                   \
  void Read(const json& j, const std::string& path, T& m) { \
    RequireObject(j, path);                                 \
    LIST(SY_GET)                                            \
    OPTIONAL(SY_GET_OPTIONAL)                               \
  }
SY_READ_STRUCT(Span, SY_SPAN, SY_NO_FIELDS)
SY_READ_STRUCT(KernelStat, SY_KERNEL_STAT, SY_NO_FIELDS)
SY_READ_STRUCT(DeviceOccupancy, SY_DEVICE_OCCUPANCY, SY_DEVICE_OCCUPANCY_OPTIONAL)
SY_READ_STRUCT(RequestProgress, SY_REQUEST_PROGRESS, SY_NO_FIELDS)
#undef SY_READ_STRUCT

void Read(const json& j, const std::string& path, ModelInfo& m) {
  RequireObject(j, path);
  SY_MODEL_INFO(SY_GET)
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

// Top-level messages: Body() writes the fields after the envelope, Parse()
// reads them (path "" names top-level keys bare).
#define SY_MESSAGE(T, LIST, OPTIONAL)     \
  json Body(const T& m) {                 \
    json j = json::object();              \
    LIST(SY_PUT)                          \
    OPTIONAL(SY_PUT)                      \
    return j;                             \
  }                                       \
  void ParseFields(const json& j, T& m) { \
    const std::string path;               \
    LIST(SY_GET)                          \
    OPTIONAL(SY_GET_OPTIONAL)             \
  }
SY_MESSAGE(Meta, SY_META, SY_META_OPTIONAL)
SY_MESSAGE(Step, SY_STEP, SY_NO_FIELDS)
SY_MESSAGE(Spans, SY_SPANS, SY_NO_FIELDS)
SY_MESSAGE(KernelStats, SY_KERNEL_STATS, SY_NO_FIELDS)
SY_MESSAGE(Occupancy, SY_OCCUPANCY, SY_NO_FIELDS)
SY_MESSAGE(ExpertLoad, SY_EXPERT_LOAD, SY_EXPERT_LOAD_OPTIONAL)
SY_MESSAGE(RequestDone, SY_REQUEST_DONE, SY_REQUEST_DONE_OPTIONAL)
SY_MESSAGE(Requests, SY_REQUESTS, SY_NO_FIELDS)
SY_MESSAGE(Event, SY_EVENT, SY_NO_FIELDS)
SY_MESSAGE(Heartbeat, SY_HEARTBEAT, SY_NO_FIELDS)
#undef SY_MESSAGE

// Checks beyond field types, per message.
template <typename T>
void Parse(const json& j, T& m) {
  ParseFields(j, m);
}

template <>
void Parse(const json& j, Event& m) {
  ParseFields(j, m);
  RequireObject(m.detail, "detail");
}

// The lists are capped, the totals are not: a total below its list is a
// message that contradicts itself.
template <>
void Parse(const json& j, Requests& m) {
  ParseFields(j, m);
  auto check = [](const char* list, size_t n, int total) {
    if (total < 0 || static_cast<size_t>(total) < n) {
      Fail(std::string(list) + "_total", "is " + std::to_string(total) + ", below the " +
                                             std::to_string(n) + " entries of '" + list + "'");
    }
  };
  check("running", m.running.size(), m.running_total);
  check("waiting", m.waiting.size(), m.waiting_total);
}

#undef SY_PUT
#undef SY_GET
#undef SY_GET_OPTIONAL

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
  if constexpr (std::is_same_v<T, Requests>) return kTopicRequests;
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
  if (topic == kTopicRequests) return ParseAs<Requests>(topic, j);
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
