#include "console/app/live_session.h"

#include <optional>

#include "console/collect/parallel_text.h"
#include "console/collect/rebalance_text.h"

namespace sy::console {
namespace {

using namespace std::chrono_literals;

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// "pause: ok {...}" kept short enough for one line.
std::string Brief(const nlohmann::json& j) {
  std::string s = j.dump();
  if (s.size() > 200) s = s.substr(0, 197) + "...";
  return s;
}

}  // namespace

LiveSession::LiveSession(const LiveOptions& options)
    : options_(options), collector_(options.collector) {}

Result<std::unique_ptr<LiveSession>> LiveSession::Start(const LiveOptions& options) {
  auto s = std::unique_ptr<LiveSession>(new LiveSession(options));
  if (options.writer != nullptr) {
    s->writer_ = options.writer;
    s->collector_.SetStoreCounters(StoreCounters{0, 0, "", options.writer->path()});
  } else if (!options.db_path.empty()) {
    auto writer = store::Writer::Open(options.db_path);
    if (!writer.ok()) return writer.status().WithContext("store " + options.db_path);
    s->owned_writer_ = std::move(writer).value();
    s->writer_ = s->owned_writer_.get();
    s->collector_.SetStoreCounters(StoreCounters{0, 0, "", options.db_path});
  }
  telemetry::SubscriberOptions sub;
  sub.endpoint = options.connect;
  sub.curve = options.curve;
  auto subscriber = telemetry::Subscriber::Connect(sub);
  if (!subscriber.ok()) return subscriber.status().WithContext("--connect " + options.connect);
  s->subscriber_ = std::move(subscriber).value();
  LiveSession* self = s.get();
  auto sender = CommandSender::Start(
      options.control, options.command_timeout,
      [self](const CommandOutcome& o) { self->OnCommandDone(o); }, options.curve);
  if (!sender.ok()) return sender.status().WithContext("--control " + options.control);
  s->sender_ = std::move(sender).value();
  s->receiver_ = std::thread([self] { self->ReceiveLoop(); });
  return s;
}

LiveSession::~LiveSession() {
  stop_ = true;
  if (receiver_.joinable()) receiver_.join();
  sender_.reset();        // finishes a command in flight, which may still record
  owned_writer_.reset();  // drains and closes the store (a shared one: its owner does)
}

void LiveSession::ReceiveLoop() {
  auto last_update = std::chrono::steady_clock::now();
  std::string last_error;
  while (!stop_) {
    auto got = subscriber_->Receive(100ms);
    if (got.ok() && got->has_value()) {
      const telemetry::Message& m = **got;
      collector_.Consume(m);
      if (const auto* e = std::get_if<telemetry::Event>(&m);
          e && e->kind == "lifecycle" && e->name == "stop") {
        stop_seen_ = true;
      }
      if (writer_) writer_->Enqueue(m);
    } else if (!got.ok() && got.status().message() != last_error) {
      // Malformed input is counted by the Subscriber; show each new reason once.
      last_error = got.status().message();
      collector_.AddLog(LogLevel::kWarn, "malformed message skipped: " + last_error);
    }
    const auto now = std::chrono::steady_clock::now();
    if (now - last_update >= 200ms) {
      last_update = now;
      UpdateCounters();
    }
  }
  UpdateCounters();
}

void LiveSession::UpdateCounters() {
  const telemetry::SubscriberCounters& c = subscriber_->counters();
  TransportCounters t{c.received, c.gaps, c.malformed};
  collector_.SetTransportCounters(t);
  {
    std::lock_guard lock(mu_);
    transport_ = t;
  }
  if (writer_) {
    const store::WriterCounters wc = writer_->counters();
    const Status st = writer_->status();
    collector_.SetStoreCounters(
        StoreCounters{wc.written, wc.dropped, st.ok() ? "" : st.ToString(), writer_->path()});
  }
  // The run is over normally after its "stop" event, abnormally when
  // heartbeats have stopped for > 5 intervals; the store closes it once.
  const Snapshot s = collector_.TakeSnapshot();
  if (s.run.empty() || s.run == ended_run_) return;
  if (s.run_stopped || s.conn == ConnState::kLost) {
    run_over_ = true;
    if (!writer_) return;
    const bool abnormal = !s.run_stopped;
    writer_->EndRun(s.run, abnormal);
    ended_run_ = s.run;
    collector_.AddLog(abnormal ? LogLevel::kError : LogLevel::kInfo,
                      "run " + s.run + (abnormal ? " marked abnormal: engine lost" : " ended"));
  }
}

void LiveSession::SendCommand(ParsedCommand command) {
  collector_.AddLog(LogLevel::kCommand, "> :" + command.text);
  sender_->Send(std::move(command));
}

void LiveSession::OnCommandDone(const CommandOutcome& o) {
  std::string line;
  bool error = false;
  std::string reply_text;
  bool ok = false;
  if (!o.reply.ok()) {
    line = ":" + o.command.text + " failed: " + o.reply.status().ToString();
    error = true;
    reply_text = o.reply.status().ToString();
  } else if (!o.reply->ok) {
    line =
        ":" + o.command.text + " refused: " + o.reply->error_code + ": " + o.reply->error_message;
    error = true;
    reply_text = telemetry::EncodeReply(*o.reply);
  } else {
    ok = true;
    const std::string worded = ParallelReplyText(o.command.request.cmd, o.reply->result);
    line = ":" + o.command.text + " ok" +
           (worded.empty() ? " " + Brief(o.reply->result) : ": " + worded);
    reply_text = telemetry::EncodeReply(*o.reply);
    collector_.ApplyCommandResult(o.command.request.cmd, o.reply->result);
  }
  std::optional<Question> question;
  if (ok && o.command.name == "rebalance") {
    // The plan as a table in the Log rather than one long JSON line; after
    // a dry run, the question whether to apply it.
    const nlohmann::json& result = o.reply->result;
    const nlohmann::json plan =
        result.is_object() && result.contains("plan") ? result["plan"] : nlohmann::json::object();
    const PlanSummary p = SummarizePlan(plan);
    const auto it = result.is_object() ? result.find("started") : result.end();
    const bool started = it != result.end() && it->is_boolean() && it->get<bool>();
    line = ":" + o.command.text + " ok: " + (started ? "started, " : "dry run, ") +
           std::to_string(p.experts_moved) + " experts to move";
    collector_.AddLog(LogLevel::kCommand, "< " + line);
    for (std::string& l : PlanLines(plan)) collector_.AddLog(LogLevel::kCommand, std::move(l));
    if (o.command.preview && p.experts_moved > 0) {
      question = Question{PlanQuestion(p), ConfirmedRebalance(o.command)};
    } else if (o.command.preview) {
      line += "; nothing to apply";
    }
  } else {
    collector_.AddLog(error ? LogLevel::kError : LogLevel::kCommand, "< " + line);
  }
  if (writer_) {
    const Snapshot s = collector_.TakeSnapshot();
    store::CommandRecord rec;
    rec.run = s.run;
    rec.t_us = s.latest_t_us;
    rec.unix_ms = o.sent_unix_ms ? o.sent_unix_ms : NowUnixMs();
    rec.text = o.command.text;
    rec.request = o.request_json;
    rec.ok = ok;
    rec.reply = reply_text;
    writer_->RecordCommand(std::move(rec));
  }
  std::lock_guard lock(mu_);
  command_messages_.emplace_back(std::move(line), error);
  if (question) questions_.push_back(std::move(*question));
}

std::vector<LiveSession::Question> LiveSession::TakeQuestions() {
  std::lock_guard lock(mu_);
  return std::exchange(questions_, {});
}

std::vector<std::pair<std::string, bool>> LiveSession::TakeCommandMessages() {
  std::lock_guard lock(mu_);
  std::vector<std::pair<std::string, bool>> out(command_messages_.begin(), command_messages_.end());
  command_messages_.clear();
  return out;
}

LiveSummary LiveSession::summary() const {
  LiveSummary s;
  {
    std::lock_guard lock(mu_);
    s.received = transport_.received;
    s.gaps = transport_.gaps;
    s.malformed = transport_.malformed;
  }
  if (writer_) {
    const store::WriterCounters wc = writer_->counters();
    s.written = wc.written;
    s.dropped = wc.dropped;
    const Status st = writer_->status();
    if (!st.ok()) s.store_error = st.ToString();
  }
  return s;
}

LiveSummary LiveSession::Finish() {
  stop_ = true;
  if (receiver_.joinable()) receiver_.join();
  if (writer_) writer_->Flush();
  return summary();
}

}  // namespace sy::console
