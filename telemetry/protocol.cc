#include "telemetry/protocol.h"

#include <type_traits>

namespace sy::telemetry {

using nlohmann::json;

// Field-by-field codecs. Strict on decode: a missing key or a wrong type throws
// inside nlohmann and is turned into INVALID_ARGUMENT at Decode().
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ModelInfo, preset, vocab, hidden, layers, heads, head_dim,
                                   experts, top_k, expert_inter, shared_inter, max_seq, page_size,
                                   params, dtype)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Span, device, layer, name, kind, start_us, dur_us, tokens,
                                   flops, bytes)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(KernelStat, device, name, kind, count, total_us, max_us, flops,
                                   bytes)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(DeviceOccupancy, device, kv_pages_used, kv_pages_total, running)

namespace {

void PutEnv(json& j, const Envelope& e) {
  j["v"] = e.v;
  j["run"] = e.run;
  j["seq"] = e.seq;
  j["t"] = e.t_us;
}

void GetEnv(const json& j, Envelope& e) {
  j.at("v").get_to(e.v);
  j.at("run").get_to(e.run);
  j.at("seq").get_to(e.seq);
  j.at("t").get_to(e.t_us);
}

#define PUT(f) j[#f] = m.f
#define GET(f) j.at(#f).get_to(m.f)

json Body(const Meta& m) {
  json j;
  PUT(model); PUT(devices); PUT(layout); PUT(trace_level); PUT(paused);
  PUT(started_unix_ms); PUT(workload); PUT(expert_device); PUT(kv_pages_per_device);
  return j;
}
void Parse(const json& j, Meta& m) {
  GET(model); GET(devices); GET(layout); GET(trace_level); GET(paused);
  GET(started_unix_ms); GET(workload); GET(expert_device); GET(kv_pages_per_device);
}

json Body(const Step& m) {
  json j;
  PUT(step); PUT(start_us); PUT(dur_us); PUT(prefill_tokens); PUT(decode_tokens);
  PUT(batch_requests); PUT(running); PUT(waiting); PUT(finished_total); PUT(generated_total);
  return j;
}
void Parse(const json& j, Step& m) {
  GET(step); GET(start_us); GET(dur_us); GET(prefill_tokens); GET(decode_tokens);
  GET(batch_requests); GET(running); GET(waiting); GET(finished_total); GET(generated_total);
}

json Body(const Spans& m) {
  json j;
  PUT(step); PUT(spans);
  return j;
}
void Parse(const json& j, Spans& m) { GET(step); GET(spans); }

json Body(const KernelStats& m) {
  json j;
  PUT(step); PUT(kernels);
  return j;
}
void Parse(const json& j, KernelStats& m) { GET(step); GET(kernels); }

json Body(const Occupancy& m) {
  json j;
  PUT(step); PUT(devices); PUT(running); PUT(waiting); PUT(prefill_tokens); PUT(decode_tokens);
  return j;
}
void Parse(const json& j, Occupancy& m) {
  GET(step); GET(devices); GET(running); GET(waiting); GET(prefill_tokens); GET(decode_tokens);
}

json Body(const ExpertLoad& m) {
  json j;
  PUT(step); PUT(counts); PUT(expert_device);
  return j;
}
void Parse(const json& j, ExpertLoad& m) { GET(step); GET(counts); GET(expert_device); }

json Body(const RequestDone& m) {
  json j;
  PUT(id); PUT(device); PUT(prompt_tokens); PUT(output_tokens); PUT(arrival_us);
  PUT(ttft_us); PUT(tpot_us); PUT(e2e_us); PUT(finish);
  return j;
}
void Parse(const json& j, RequestDone& m) {
  GET(id); GET(device); GET(prompt_tokens); GET(output_tokens); GET(arrival_us);
  GET(ttft_us); GET(tpot_us); GET(e2e_us); GET(finish);
}

json Body(const Event& m) {
  json j;
  PUT(kind); PUT(name); PUT(phase); PUT(message); PUT(detail);
  return j;
}
void Parse(const json& j, Event& m) {
  GET(kind); GET(name); GET(phase); GET(message);
  m.detail = j.at("detail");
  if (!m.detail.is_object()) throw std::invalid_argument("field 'detail' must be an object");
}

json Body(const Heartbeat& m) {
  json j;
  PUT(interval_ms); PUT(state); PUT(sent_total); PUT(dropped_total); PUT(dropped); PUT(step);
  return j;
}
void Parse(const json& j, Heartbeat& m) {
  GET(interval_ms); GET(state); GET(sent_total); GET(dropped_total); GET(dropped); GET(step);
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
    GetEnv(j, m.env);
    if (m.env.v != kSchemaVersion) {
      return InvalidArgument("'" + std::string(topic) + "' message has schema version " +
                             std::to_string(m.env.v) + ", this build speaks " +
                             std::to_string(kSchemaVersion));
    }
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
    return InvalidArgument("malformed '" + std::string(topic) + "' message: body is not a JSON object");
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
  if (j.contains("id")) r.id = j["id"];
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
