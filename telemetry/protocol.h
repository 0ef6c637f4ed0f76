// File: telemetry/protocol.h
//
// The one vocabulary spoken between moe-engine and its observers (console,
// store, third-party clients). Mirrored entry for entry in docs/PROTOCOL.md;
// change both in the same commit.
//
// Streams travel on a ZeroMQ XPUB socket as two-frame messages:
//   frame 0: topic, ASCII, one of kTopic* below (consumers may prefix-filter)
//   frame 1: UTF-8 JSON object: the envelope fields {"v","run","seq","t"} plus
//            the stream's own fields.
// Commands travel on a ROUTER socket: a JSON request {"id","cmd","args"} and a
// JSON reply {"id","ok","result"} or {"id","ok":false,"error":{code,message}}.
//
// Encode* never fails (a non-finite double is sent as 0). Decode* validates
// every field and returns INVALID_ARGUMENT naming the stream and the
// offending field; it never throws. Fields added to a message after its first
// release (DeviceOccupancy::cache_*, RequestDone::cached_tokens and
// preemptions, ExpertLoad::phy2log, slot_device and balancedness) may be
// absent and then decode as 0 (empty for lists), so older engines and
// stored runs still decode; present, they are checked like the others.
// Thread-safety: pure functions over values.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace sy::telemetry {

// Bumped when a field changes meaning or is removed; adding a field does not.
inline constexpr int kSchemaVersion = 1;

inline constexpr std::string_view kTopicMeta = "meta";
inline constexpr std::string_view kTopicStep = "step";
inline constexpr std::string_view kTopicSpans = "spans";
inline constexpr std::string_view kTopicKernelStats = "kstats";
inline constexpr std::string_view kTopicOccupancy = "occupancy";
inline constexpr std::string_view kTopicExperts = "experts";
inline constexpr std::string_view kTopicRequest = "request";
inline constexpr std::string_view kTopicRequests = "requests";
inline constexpr std::string_view kTopicEvent = "event";
inline constexpr std::string_view kTopicHeartbeat = "heartbeat";

// Present on every stream message. `seq` counts per topic from 0, so a gap
// of n means n messages of that topic were dropped (by the engine at its
// high-water mark or by the transport). `t_us` is microseconds since the
// engine's run started (steady clock).
struct Envelope {
  int v = kSchemaVersion;
  std::string run;
  uint64_t seq = 0;
  int64_t t_us = 0;
};

struct ModelInfo {
  std::string preset;
  int vocab = 0;
  int hidden = 0;
  int layers = 0;
  int heads = 0;
  int head_dim = 0;
  int experts = 0;
  int top_k = 0;
  int expert_inter = 0;
  int shared_inter = 0;
  int max_seq = 0;
  int page_size = 0;  // tokens per KV page
  int64_t params = 0;
  std::string dtype = "fp32";
  std::string arch = "moe";  // "moe" | "bailing_hybrid" (ModelConfig::arch)
  // Attention kind of every layer, in layer order: "mha" | "mla" (full
  // attention, KV pool) or "kda" | "gla" (linear attention, state pool).
  std::vector<std::string> attention;
};

// The names ModelInfo::attention may hold.
inline constexpr std::string_view kAttentionKinds[] = {"mha", "mla", "kda", "gla"};

// Sent at start and every second thereafter, so late joiners learn the run.
struct Meta {
  Envelope env;
  ModelInfo model;
  int devices = 0;
  std::string layout = "EP";  // "EP" or "TP"
  std::string trace_level;    // "off" | "summary" | "full"
  bool paused = false;
  int64_t started_unix_ms = 0;     // wall clock at run start
  std::string workload;            // human-readable description
  std::vector<int> expert_device;  // expert id -> owning device
  int kv_pages_per_device = 0;
  // Recurrent-state slots per device (one per running request of a hybrid
  // model); 0 for a model without linear-attention layers.
  int state_slots_per_device = 0;
  // Optional on the wire: the TP/EP switch policy in force, as the `policy`
  // command returns it ({"mode", "t_high", "t_low", ...}); {} when absent.
  nlohmann::json policy = nlohmann::json::object();
  // Optional on the wire: the backend that produced the run. {"kind": "cpu",
  // "clock": "wall"}, or for the simulated cluster {"kind": "sim", "clock":
  // "virtual", "speed", "hardware", "model", "dtype", "efficiency": {...},
  // "overlap", "routing": {"skew", "drift_period_s", "drift_fraction",
  // "seed"}} (docs/SIMULATION.md). {} when absent (runs recorded before it: cpu).
  nlohmann::json backend = nlohmann::json::object();
};

// One per scheduler step that ran a batch.
struct Step {
  Envelope env;
  int64_t step = 0;
  int64_t start_us = 0;
  int64_t dur_us = 0;
  int prefill_tokens = 0;
  int decode_tokens = 0;
  int batch_requests = 0;
  int running = 0;
  int waiting = 0;
  int64_t finished_total = 0;
  int64_t generated_total = 0;
};

// "compute" kernels run on a device; "comm" spans are collectives.
struct Span {
  int device = 0;
  int layer = -1;  // -1 for kernels outside the layer stack (embed, lm_head, sample)
  std::string name;
  std::string kind;  // "compute" | "comm"
  int64_t start_us = 0;
  int64_t dur_us = 0;
  int64_t tokens = 0;
  int64_t flops = 0;
  int64_t bytes = 0;
};

// Trace level "full": every span of one step.
struct Spans {
  Envelope env;
  int64_t step = 0;
  std::vector<Span> spans;
};

struct KernelStat {
  int device = 0;
  std::string name;
  std::string kind;
  int count = 0;
  int64_t total_us = 0;
  int64_t max_us = 0;
  int64_t flops = 0;
  int64_t bytes = 0;
};

// Trace level "summary" and "full": per-(device, kernel name) aggregates of one step.
struct KernelStats {
  Envelope env;
  int64_t step = 0;
  std::vector<KernelStat> kernels;
};

// Both memory pools of one device (seed 000 "Hybrid Memory Pools"): the
// paged KV pool of the full-attention layers and the recurrent-state pool of
// the linear-attention layers (one slot per running request). The state
// fields are 0 for a model without linear layers.
struct DeviceOccupancy {
  int device = 0;
  int kv_pages_used = 0;
  int kv_pages_total = 0;
  int running = 0;  // requests whose attention state lives on this device
  int state_slots_used = 0;
  int state_slots_total = 0;
  int64_t kv_bytes_used = 0;  // kv_pages_used * bytes per page
  int64_t kv_bytes_total = 0;
  int64_t state_bytes_used = 0;  // state_slots_used * bytes per slot
  int64_t state_bytes_total = 0;
  // This rank's prefix cache (zeros when it is off). Its pages and checkpoint
  // slots are included in the *_used figures above.
  int64_t cache_tokens = 0;         // tokens whose KV the radix tree holds
  int cache_nodes = 0;              // tree nodes
  int cache_slots = 0;              // checkpoint slots the tree holds (hybrid)
  double cache_hit_rate = 0;        // hit / prompt tokens admitted over the last 100 steps
  int64_t cache_evicted_pages = 0;  // since the run started
};

struct Occupancy {
  Envelope env;
  int64_t step = 0;
  std::vector<DeviceOccupancy> devices;
  int running = 0;
  int waiting = 0;
  int prefill_tokens = 0;
  int decode_tokens = 0;
};

// Routed-token counts of one step: counts[layer][expert].
struct ExpertLoad {
  Envelope env;
  int64_t step = 0;
  std::vector<std::vector<int64_t>> counts;  // [layer][logical expert] routed tokens this step
  std::vector<int> expert_device;            // expert -> device of its first replica
  // Optional on the wire (absent from older engines; empty when absent):
  // the live placement, [layer][physical slot] -> logical expert, slots
  // device-major (slot_device[slot] is the device holding the slot), and
  // this step's balancedness per layer: mean / max over devices of the
  // tokens the device's slots received (1.0 = perfect; 1.0 for a layer
  // without tokens or a dense layer).
  std::vector<std::vector<int>> phy2log;
  std::vector<int> slot_device;
  std::vector<double> balancedness;
  // Optional (1 when absent): steps whose counts this message sums; `step`
  // is the last of them and balancedness their mean.
  int steps = 1;
};

struct RequestDone {
  Envelope env;
  int64_t id = 0;
  int device = 0;
  int prompt_tokens = 0;
  int output_tokens = 0;
  int64_t arrival_us = 0;
  int64_t ttft_us = 0;
  int64_t tpot_us = 0;  // mean time per output token after the first
  int64_t e2e_us = 0;
  std::string finish;     // "eos" | "length" | "cancelled"
  int cached_tokens = 0;  // prompt tokens reused from the prefix cache (last admission)
  int preemptions = 0;    // times it was retracted and recomputed
};

// One request in a Requests snapshot.
struct RequestProgress {
  int64_t id = 0;
  int device = -1;        // -1 while waiting
  int prompt_tokens = 0;  // prompt (plus, after a retraction, what it had generated)
  int computed = 0;       // tokens folded into its KV / state
  int generated = 0;
  int max_new_tokens = 0;
  int cached_tokens = 0;  // reused from the prefix cache at admission
  int preemptions = 0;
  int64_t arrival_us = 0;
  int64_t first_token_us = -1;  // -1 before the first token
};

// Running and waiting requests, at most every 200 ms (not every step: the
// lists are long and the console redraws at a few Hz). Lists are capped at
// 256 entries each (oldest first); *_total give the real counts, and a total
// below its list's length is refused on decode.
struct Requests {
  Envelope env;
  int64_t step = 0;
  std::vector<RequestProgress> running;
  std::vector<RequestProgress> waiting;
  int running_total = 0;
  int waiting_total = 0;
};

struct Event {
  Envelope env;
  std::string kind;     // "command" | "lifecycle" | "warning" | "scheduler"
  std::string name;     // command name or lifecycle name ("start", "stop", ...)
  std::string phase;    // "received" | "done" | "failed" | "" (instant)
  std::string message;  // human-readable
  nlohmann::json detail = nlohmann::json::object();
};

struct Heartbeat {
  Envelope env;
  int interval_ms = 0;
  std::string state;  // "running" | "paused" | "stopping"
  int64_t sent_total = 0;
  int64_t dropped_total = 0;
  std::map<std::string, int64_t> dropped;  // per topic
  int64_t step = 0;
};

using Message = std::variant<Meta, Step, Spans, KernelStats, Occupancy, ExpertLoad, RequestDone,
                             Event, Heartbeat, Requests>;

struct WireMessage {
  std::string topic;
  std::string body;
};

std::string_view TopicOf(const Message& m);
const Envelope& EnvelopeOf(const Message& m);
Envelope& MutableEnvelopeOf(Message& m);

WireMessage Encode(const Message& m);
nlohmann::json ToJson(const Message& m);
// INVALID_ARGUMENT for an unknown topic, malformed JSON, a missing or
// mistyped field, or a schema version this build does not speak.
Result<Message> Decode(std::string_view topic, std::string_view body);
Result<Message> FromJson(std::string_view topic, const nlohmann::json& j);

// ---- Commands ----

// Known commands; the engine refuses others with NOT_FOUND.
inline constexpr std::string_view kCommands[] = {
    "describe",    "status",       "pause",     "resume",         "trace",  "stop",   "cancel",
    "flush_cache", "expert_stats", "rebalance", "rebalance_auto", "switch", "policy", "calibrate"};

struct CommandRequest {
  nlohmann::json id;  // number or string chosen by the client; echoed back
  std::string cmd;
  nlohmann::json args = nlohmann::json::object();
  // Never on the wire: the ZAP User-Id the ControlServer read off the
  // request's frames ("operator:alice", telemetry/access.h); empty on a
  // socket without CURVE.
  std::string user_id = {};
};

struct CommandReply {
  nlohmann::json id;
  bool ok = false;
  nlohmann::json result;   // when ok
  std::string error_code;  // StatusCodeName(...) when !ok
  std::string error_message;
};

std::string EncodeRequest(const CommandRequest& r);
// INVALID_ARGUMENT if not a JSON object, `cmd` missing or not a string, or
// `args` present but not an object. `id` may be absent (null is echoed).
Result<CommandRequest> DecodeRequest(std::string_view body);
std::string EncodeReply(const CommandReply& r);
Result<CommandReply> DecodeReply(std::string_view body);
CommandReply ErrorReply(const nlohmann::json& id, const Status& s);
CommandReply OkReply(const nlohmann::json& id, nlohmann::json result);

}  // namespace sy::telemetry
