// File: engine/server/api_bridge.cc
//
// The Engine's side of the HTTP hand-off (entrypoints/api_request.h):
// requests in from the inbox, tokens and ends out to their streams, and
// cancellation (by an HTTP client that went away or by the cancel command).
// Every call here is non-blocking for the loop.
#include <spdlog/spdlog.h>

#include <string>
#include <vector>

#include "engine/server/engine.h"

namespace sy::engine {

void Engine::AdmitApiRequests() {
  inbox_->SetEngineWaiting(scheduler_->waiting());
  for (ApiSubmission& s : inbox_->Drain()) {
    if (s.stream->cancelled()) continue;  // gone before it was admitted
    Result<int64_t> id = scheduler_->Submit(std::move(s.spec), NowUs());
    if (!id.ok()) {
      ++stats_.rejected;
      s.stream->Fail(id.status());
      continue;
    }
    s.stream->Started(*id);
    streams_.emplace(*id, std::move(s.stream));
  }
  inbox_->SetEngineWaiting(scheduler_->waiting());
}

void Engine::ReportDone(const Request& r) {
  telemetry::RequestDone done = DoneMessage(r);
  if (options_.observer) options_.observer->OnRequestDone(done);
  publisher_->Publish(std::move(done));
  const double ttft = r.first_token_us >= 0 ? r.ttft_us() / 1e6 : -1.0;
  const double tpot = r.first_token_us >= 0 && r.generated.size() > 1 ? r.tpot_us() / 1e6 : -1.0;
  metrics_->ObserveRequest(ttft, tpot, r.e2e_us() / 1e6, FinishReasonName(r.finish));
  auto it = streams_.find(r.id);
  if (it == streams_.end()) return;
  it->second->Finish(FinishReasonName(r.finish), r.prompt_len(),
                     static_cast<int>(r.generated.size()));
  streams_.erase(it);
}

void Engine::CancelAbandoned() {
  std::vector<int64_t> gone;
  for (const auto& [id, stream] : streams_) {
    if (stream->cancelled()) gone.push_back(id);
  }
  for (int64_t id : gone) {
    Result<Request> r = scheduler_->Cancel(id, NowUs());
    if (!r.ok()) {  // already finished: nothing to stop
      streams_.erase(id);
      continue;
    }
    spdlog::debug("request {} cancelled: its HTTP client went away", id);
    ReportDone(*r);
  }
}

void Engine::FeedStreams(const BatchInput& batch, const StepOutput& out,
                         const std::vector<Request>& finished) {
  if (streams_.empty()) return;
  for (size_t i = 0; i < out.outputs.size() && i < batch.seqs.size(); ++i) {
    const SeqOutput& o = out.outputs[i];
    if (!batch.seqs[i].sample || o.next_token < 0) continue;
    auto it = streams_.find(o.request_id);
    // EOS ends the text; it is not part of it.
    if (it != streams_.end() && o.next_token != options_.model.eos_token) {
      it->second->PushToken(o.next_token);
    }
  }
  for (const Request& r : finished) {
    auto it = streams_.find(r.id);
    if (it == streams_.end()) continue;
    it->second->Finish(FinishReasonName(r.finish), r.prompt_len(),
                       static_cast<int>(r.generated.size()));
    streams_.erase(it);
  }
}

void Engine::EndStreams(const Status& why) {
  for (auto& [id, stream] : streams_) stream->Fail(why);
  streams_.clear();
  for (ApiSubmission& s : inbox_->Drain()) s.stream->Fail(why);
}

Result<nlohmann::json> Engine::CancelCommand(const nlohmann::json& args) {
  auto it = args.find("id");
  if (it == args.end() || !it->is_number_integer()) {
    return InvalidArgument("cancel: args.id must be an integer request id");
  }
  ASSIGN_OR_RETURN(Request r, scheduler_->Cancel(it->get<int64_t>(), NowUs()));
  ReportDone(r);
  return nlohmann::json{{"id", r.id}, {"finish", std::string(FinishReasonName(r.finish))}};
}

}  // namespace sy::engine
