// File: tests/telemetry/samples.h
//
// One plausible, fully populated message of every topic, shared by the codec
// tests and the fixture server that the Python client is checked against.
// Envelopes are left default: Publisher stamps them, codec tests set them.
#pragma once

#include <vector>

#include "telemetry/protocol.h"

namespace sy::telemetry::testing {

inline Meta SampleMeta() {
  Meta m;
  // A two-layer hybrid, so the state-pool fields carry real values.
  m.model = ModelInfo{.preset = "tiny-hybrid",
                      .vocab = 256,
                      .hidden = 64,
                      .layers = 2,
                      .heads = 4,
                      .head_dim = 16,
                      .experts = 4,
                      .top_k = 2,
                      .expert_inter = 128,
                      .shared_inter = 64,
                      .max_seq = 512,
                      .page_size = 16,
                      .params = 1234567,
                      .dtype = "fp32",
                      .arch = "bailing_hybrid",
                      .attention = {"kda", "mla"}};
  m.devices = 2;
  m.layout = "EP";
  m.trace_level = "summary";
  m.paused = false;
  m.started_unix_ms = 1700000000000;
  m.workload = "fixture: 4 requests/s, prompt 32, output 16";
  m.expert_device = {0, 0, 1, 1};
  m.kv_pages_per_device = 64;
  m.state_slots_per_device = 8;
  return m;
}

inline std::vector<Message> SampleMessages() {
  std::vector<Message> out;
  out.push_back(SampleMeta());

  Step step;
  step.step = 7;
  step.start_us = 1000;
  step.dur_us = 250;
  step.prefill_tokens = 32;
  step.decode_tokens = 3;
  step.batch_requests = 4;
  step.running = 4;
  step.waiting = 1;
  step.finished_total = 2;
  step.generated_total = 40;
  out.push_back(step);

  Spans spans;
  spans.step = 7;
  spans.spans = {Span{.device = 0,
                      .layer = 0,
                      .name = "attn",
                      .kind = "compute",
                      .start_us = 1000,
                      .dur_us = 40,
                      .tokens = 35,
                      .flops = 900000,
                      .bytes = 40000},
                 Span{.device = 1,
                      .layer = 0,
                      .name = "all_to_all",
                      .kind = "comm",
                      .start_us = 1040,
                      .dur_us = 12,
                      .tokens = 35,
                      .flops = 0,
                      .bytes = 8960},
                 Span{.device = 0,
                      .layer = -1,
                      .name = "lm_head",
                      .kind = "compute",
                      .start_us = 1200,
                      .dur_us = 30,
                      .tokens = 4,
                      .flops = 131072,
                      .bytes = 65536}};
  out.push_back(spans);

  KernelStats ks;
  ks.step = 7;
  ks.kernels = {KernelStat{.device = 0,
                           .name = "attn",
                           .kind = "compute",
                           .count = 2,
                           .total_us = 80,
                           .max_us = 41,
                           .flops = 1800000,
                           .bytes = 80000},
                KernelStat{.device = 1,
                           .name = "all_to_all",
                           .kind = "comm",
                           .count = 4,
                           .total_us = 48,
                           .max_us = 13,
                           .flops = 0,
                           .bytes = 35840}};
  out.push_back(ks);

  Occupancy occ;
  occ.step = 7;
  occ.devices = {DeviceOccupancy{.device = 0,
                                 .kv_pages_used = 10,
                                 .kv_pages_total = 64,
                                 .running = 2,
                                 .state_slots_used = 2,
                                 .state_slots_total = 8,
                                 .kv_bytes_used = 10 * 20480,
                                 .kv_bytes_total = 64 * 20480,
                                 .state_bytes_used = 2 * 74752,
                                 .state_bytes_total = 8 * 74752,
                                 .cache_tokens = 96,
                                 .cache_nodes = 5,
                                 .cache_slots = 1,
                                 .cache_hit_rate = 0.375,
                                 .cache_evicted_pages = 12},
                 DeviceOccupancy{.device = 1,
                                 .kv_pages_used = 7,
                                 .kv_pages_total = 64,
                                 .running = 2,
                                 .state_slots_used = 2,
                                 .state_slots_total = 8,
                                 .kv_bytes_used = 7 * 20480,
                                 .kv_bytes_total = 64 * 20480,
                                 .state_bytes_used = 2 * 74752,
                                 .state_bytes_total = 8 * 74752,
                                 .cache_tokens = 0,
                                 .cache_nodes = 1,
                                 .cache_slots = 0,
                                 .cache_hit_rate = 0,
                                 .cache_evicted_pages = 0}};
  occ.running = 4;
  occ.waiting = 1;
  occ.prefill_tokens = 32;
  occ.decode_tokens = 3;
  out.push_back(occ);

  ExpertLoad load;
  load.step = 7;
  load.counts = {{10, 20, 30, 10}, {5, 25, 25, 15}};
  load.expert_device = {0, 0, 1, 1};
  // 4 experts + 2 redundant slots over 2 devices: expert 2 (hottest of
  // layer 0) and expert 1 (of layer 1) have a replica on the other device.
  load.phy2log = {{0, 1, 2, 2, 3, 0}, {0, 1, 1, 2, 3, 1}};
  load.slot_device = {0, 0, 0, 1, 1, 1};
  load.balancedness = {0.875, 105.0 / 145.0};  // 35/40 and 35/48.33
  out.push_back(load);

  RequestDone req;
  req.id = 42;
  req.device = 1;
  req.prompt_tokens = 32;
  req.output_tokens = 16;
  req.arrival_us = 500;
  req.ttft_us = 900;
  req.tpot_us = 210;
  req.e2e_us = 4050;
  req.finish = "length";
  req.cached_tokens = 16;
  req.preemptions = 1;
  out.push_back(req);

  Event ev;
  ev.kind = "command";
  ev.name = "pause";
  ev.phase = "done";
  ev.message = "paused at step 7";
  ev.detail = {{"id", 3}, {"args", nlohmann::json::object()}, {"result", {{"state", "paused"}}}};
  out.push_back(ev);

  Heartbeat hb;
  hb.interval_ms = 500;
  hb.state = "running";
  hb.sent_total = 120;
  hb.dropped_total = 3;
  hb.dropped = {{"spans", 3}};
  hb.step = 7;
  out.push_back(hb);

  // Last, as in Message's alternatives. One request decoding, one in prefill
  // after a retraction (its prompt grew by what it had generated), one
  // waiting; the totals say the lists were capped.
  Requests rq;
  rq.step = 7;
  rq.running = {RequestProgress{.id = 40,
                                .device = 0,
                                .prompt_tokens = 32,
                                .computed = 40,
                                .generated = 9,
                                .max_new_tokens = 16,
                                .cached_tokens = 16,
                                .preemptions = 0,
                                .arrival_us = 300,
                                .first_token_us = 700},
                RequestProgress{.id = 41,
                                .device = 1,
                                .prompt_tokens = 36,
                                .computed = 20,
                                .generated = 4,
                                .max_new_tokens = 16,
                                .cached_tokens = 0,
                                .preemptions = 1,
                                .arrival_us = 450,
                                .first_token_us = 820}};
  rq.waiting = {RequestProgress{.id = 43,
                                .device = -1,
                                .prompt_tokens = 32,
                                .computed = 0,
                                .generated = 0,
                                .max_new_tokens = 16,
                                .cached_tokens = 0,
                                .preemptions = 0,
                                .arrival_us = 990,
                                .first_token_us = -1}};
  rq.running_total = 2;
  rq.waiting_total = 3;
  out.push_back(rq);
  return out;
}

}  // namespace sy::telemetry::testing
