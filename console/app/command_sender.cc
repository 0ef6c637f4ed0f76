#include "console/app/command_sender.h"

namespace sy::console {

Result<std::unique_ptr<CommandSender>> CommandSender::Start(
    const std::string& endpoint, std::chrono::milliseconds timeout, OnDone on_done,
    std::optional<telemetry::CurveClient> curve) {
  ASSIGN_OR_RETURN(auto client, telemetry::ControlClient::Connect(endpoint, std::move(curve)));
  return std::unique_ptr<CommandSender>(
      new CommandSender(std::move(client), timeout, std::move(on_done)));
}

CommandSender::CommandSender(std::unique_ptr<telemetry::ControlClient> client,
                             std::chrono::milliseconds timeout, OnDone on_done)
    : client_(std::move(client)), timeout_(timeout), on_done_(std::move(on_done)) {
  thread_ = std::thread([this] { Run(); });
}

CommandSender::~CommandSender() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void CommandSender::Send(ParsedCommand command) {
  {
    std::lock_guard lock(mu_);
    queue_.push_back(std::move(command));
  }
  cv_.notify_all();
}

void CommandSender::Run() {
  while (true) {
    ParsedCommand cmd;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      cmd = std::move(queue_.front());
      queue_.pop_front();
    }
    CommandOutcome out;
    out.command = cmd;
    telemetry::CommandRequest req = cmd.request;
    req.id = next_id_++;
    out.request_json = telemetry::EncodeRequest(req);
    out.sent_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
    out.reply = client_->Call(std::move(req), timeout_);
    on_done_(out);
  }
}

}  // namespace sy::console
