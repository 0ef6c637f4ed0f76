// RowWriter::Put(const telemetry::Message&): one row, or a parent row and its
// children, per message, in the tables of docs/STORE.md section 3. The run
// lifecycle, transactions and prepared statements are in row_writer.cc.
#include <algorithm>
#include <cmath>
#include <variant>

#include "store/row_writer.h"
#include "store/schema.h"

namespace sy::store {

using nlohmann::json;
namespace tel = telemetry;

namespace {

template <class... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};
// C++20 deduces this for an aggregate; clang 14 (the sanitizer build) does not yet.
template <class... Ts>
Overloaded(Ts...) -> Overloaded<Ts...>;

// Binds the envelope columns shared by every message table: (run, seq, t_us, v).
Stmt& BindEnv(Stmt& st, int64_t rid, const tel::Envelope& e) {
  return st.Bind(1, rid).Bind(2, static_cast<int64_t>(e.seq)).Bind(3, e.t_us).Bind(4, e.v);
}

// Runs `parent` (bound by the caller) and then `child` once per element of
// `children`. Child tables share the leading columns (parent row id, idx, run,
// step); `bind_rest(child, element)` binds the columns after them and may
// fail (a name lookup).
template <typename T, typename BindRest>
Status InsertWithChildren(const Db& db, Stmt& parent, Stmt& child, int64_t rid, int64_t step,
                          const std::vector<T>& children, BindRest&& bind_rest) {
  RETURN_IF_ERROR(parent.Run());
  int64_t parent_id = sqlite3_last_insert_rowid(db.get());
  for (size_t i = 0; i < children.size(); ++i) {
    child.Bind(1, parent_id).Bind(2, static_cast<int64_t>(i)).Bind(3, rid).Bind(4, step);
    RETURN_IF_ERROR(bind_rest(child, children[i]));
    RETURN_IF_ERROR(child.Run());
  }
  return Status::Ok();
}

}  // namespace

Status RowWriter::Put(const tel::Message& m) {
  const tel::Envelope& env = tel::EnvelopeOf(m);
  ASSIGN_OR_RETURN(int64_t rid, RunRid(env.run, /*revive=*/true));
  RunAgg& agg = agg_[rid];
  agg.last_t_us = std::max(agg.last_t_us, env.t_us);
  return std::visit(
      Overloaded{
          [&](const tel::Meta& x) -> Status {
            json body = tel::ToJson(m);
            for (const char* k : {"v", "run", "seq", "t"}) body.erase(k);
            agg.meta = x;
            return BindEnv(ins_meta_, rid, env).Bind(5, DumpJson(body)).Run();
          },
          [&](const tel::Step& x) -> Status {
            ++agg.steps;
            return BindEnv(ins_step_, rid, env)
                .Bind(5, x.step)
                .Bind(6, x.start_us)
                .Bind(7, x.dur_us)
                .Bind(8, x.prefill_tokens)
                .Bind(9, x.decode_tokens)
                .Bind(10, x.batch_requests)
                .Bind(11, x.running)
                .Bind(12, x.waiting)
                .Bind(13, x.finished_total)
                .Bind(14, x.generated_total)
                .Run();
          },
          [&](const tel::Spans& x) -> Status {
            agg.spans += static_cast<int64_t>(x.spans.size());
            BindEnv(ins_span_batch_, rid, env)
                .Bind(5, x.step)
                .Bind(6, static_cast<int64_t>(x.spans.size()));
            return InsertWithChildren(db_, ins_span_batch_, ins_span_, rid, x.step, x.spans,
                                      [&](Stmt& st, const tel::Span& s) -> Status {
                                        ASSIGN_OR_RETURN(int64_t name, NameId(s.name));
                                        ASSIGN_OR_RETURN(int64_t kind, NameId(s.kind));
                                        st.Bind(5, env.t_us)
                                            .Bind(6, s.device)
                                            .Bind(7, s.layer)
                                            .Bind(8, name)
                                            .Bind(9, kind)
                                            .Bind(10, s.start_us)
                                            .Bind(11, s.dur_us)
                                            .Bind(12, s.tokens)
                                            .Bind(13, s.flops)
                                            .Bind(14, s.bytes);
                                        return Status::Ok();
                                      });
          },
          [&](const tel::KernelStats& x) -> Status {
            BindEnv(ins_kstat_batch_, rid, env)
                .Bind(5, x.step)
                .Bind(6, static_cast<int64_t>(x.kernels.size()));
            return InsertWithChildren(db_, ins_kstat_batch_, ins_kstat_, rid, x.step, x.kernels,
                                      [&](Stmt& st, const tel::KernelStat& k) -> Status {
                                        ASSIGN_OR_RETURN(int64_t name, NameId(k.name));
                                        ASSIGN_OR_RETURN(int64_t kind, NameId(k.kind));
                                        st.Bind(5, env.t_us)
                                            .Bind(6, k.device)
                                            .Bind(7, name)
                                            .Bind(8, kind)
                                            .Bind(9, k.count)
                                            .Bind(10, k.total_us)
                                            .Bind(11, k.max_us)
                                            .Bind(12, k.flops)
                                            .Bind(13, k.bytes);
                                        return Status::Ok();
                                      });
          },
          [&](const tel::Occupancy& x) -> Status {
            BindEnv(ins_occ_, rid, env)
                .Bind(5, x.step)
                .Bind(6, x.running)
                .Bind(7, x.waiting)
                .Bind(8, x.prefill_tokens)
                .Bind(9, x.decode_tokens)
                .Bind(10, static_cast<int64_t>(x.devices.size()));
            return InsertWithChildren(db_, ins_occ_, ins_occ_dev_, rid, x.step, x.devices,
                                      [](Stmt& st, const tel::DeviceOccupancy& d) -> Status {
                                        st.Bind(5, d.device)
                                            .Bind(6, d.kv_pages_used)
                                            .Bind(7, d.kv_pages_total)
                                            .Bind(8, d.running)
                                            .Bind(9, d.state_slots_used)
                                            .Bind(10, d.state_slots_total)
                                            .Bind(11, d.kv_bytes_used)
                                            .Bind(12, d.kv_bytes_total)
                                            .Bind(13, d.state_bytes_used)
                                            .Bind(14, d.state_bytes_total)
                                            .Bind(15, d.cache_tokens)
                                            .Bind(16, d.cache_nodes)
                                            .Bind(17, d.cache_slots)
                                            .Bind(18, d.cache_hit_rate)
                                            .Bind(19, d.cache_evicted_pages);
                                        return Status::Ok();
                                      });
          },
          [&](const tel::ExpertLoad& x) -> Status {
            std::vector<std::vector<int64_t>> devices(1);
            devices[0].assign(x.expert_device.begin(), x.expert_device.end());
            int64_t experts = x.counts.empty() ? 0 : static_cast<int64_t>(x.counts[0].size());
            // Placement (v4): zero rows when the engine sent none, so the
            // absent and the empty list read back alike, as on the wire.
            std::vector<std::vector<int64_t>> phy2log;
            for (const auto& layer : x.phy2log) phy2log.emplace_back(layer.begin(), layer.end());
            std::vector<std::vector<int64_t>> slot_device;
            if (!x.slot_device.empty()) {
              slot_device.emplace_back(x.slot_device.begin(), x.slot_device.end());
            }
            int64_t slots = x.phy2log.empty() ? static_cast<int64_t>(x.slot_device.size())
                                              : static_cast<int64_t>(x.phy2log[0].size());
            json balancedness = json::array();
            for (double b : x.balancedness) balancedness.push_back(std::isfinite(b) ? b : 0.0);
            return BindEnv(ins_experts_, rid, env)
                .Bind(5, x.step)
                .Bind(6, static_cast<int64_t>(x.counts.size()))
                .Bind(7, experts)
                .BindBlob(8, EncodeRows(x.counts))
                .BindBlob(9, EncodeRows(devices))
                .Bind(10, slots)
                .BindBlob(11, EncodeRows(phy2log))
                .BindBlob(12, EncodeRows(slot_device))
                .Bind(13, DumpJson(balancedness))
                .Run();
          },
          [&](const tel::RequestDone& x) -> Status {
            ++agg.requests;
            return BindEnv(ins_request_, rid, env)
                .Bind(5, x.id)
                .Bind(6, x.device)
                .Bind(7, x.prompt_tokens)
                .Bind(8, x.output_tokens)
                .Bind(9, x.arrival_us)
                .Bind(10, x.ttft_us)
                .Bind(11, x.tpot_us)
                .Bind(12, x.e2e_us)
                .Bind(13, x.finish)
                .Bind(14, x.cached_tokens)
                .Bind(15, x.preemptions)
                .Run();
          },
          [&](const tel::Event& x) -> Status {
            return BindEnv(ins_event_, rid, env)
                .Bind(5, x.kind)
                .Bind(6, x.name)
                .Bind(7, x.phase)
                .Bind(8, x.message)
                .Bind(9, DumpJson(x.detail))
                .Run();
          },
          [&](const tel::Requests& x) -> Status {
            // One parent per snapshot; its running then its waiting requests
            // are children numbered 0..n-1, `waiting` telling the lists apart.
            const auto n = static_cast<int64_t>(x.running.size() + x.waiting.size());
            RETURN_IF_ERROR(BindEnv(ins_req_snap_, rid, env)
                                .Bind(5, x.step)
                                .Bind(6, x.running_total)
                                .Bind(7, x.waiting_total)
                                .Bind(8, n)
                                .Run());
            const int64_t snap = sqlite3_last_insert_rowid(db_.get());
            int64_t idx = 0;
            for (const auto* list : {&x.running, &x.waiting}) {
              const int waiting = list == &x.waiting ? 1 : 0;
              for (const tel::RequestProgress& p : *list) {
                RETURN_IF_ERROR(ins_req_progress_.Bind(1, snap)
                                    .Bind(2, idx++)
                                    .Bind(3, rid)
                                    .Bind(4, x.step)
                                    .Bind(5, waiting)
                                    .Bind(6, p.id)
                                    .Bind(7, p.device)
                                    .Bind(8, p.prompt_tokens)
                                    .Bind(9, p.computed)
                                    .Bind(10, p.generated)
                                    .Bind(11, p.max_new_tokens)
                                    .Bind(12, p.cached_tokens)
                                    .Bind(13, p.preemptions)
                                    .Bind(14, p.arrival_us)
                                    .Bind(15, p.first_token_us)
                                    .Run());
              }
            }
            return Status::Ok();
          },
          [&](const tel::Heartbeat& x) -> Status {
            agg.heartbeat = x;
            return BindEnv(ins_heartbeat_, rid, env)
                .Bind(5, x.interval_ms)
                .Bind(6, x.state)
                .Bind(7, x.sent_total)
                .Bind(8, x.dropped_total)
                .Bind(9, DumpJson(json(x.dropped)))
                .Bind(10, x.step)
                .Run();
          },
      },
      m);
}

}  // namespace sy::store
