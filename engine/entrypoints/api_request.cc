#include "engine/entrypoints/api_request.h"

#include <utility>

namespace sy::engine {

void TokenStream::Started(int64_t id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (pending_.finished || pending_.started) return;
    pending_.started = true;
    pending_.id = id;
  }
  cv_.notify_all();
}

void TokenStream::PushToken(int32_t token) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    // After Finish/Fail nothing more belongs to the request.
    if (pending_.finished) return;
    pending_.tokens.push_back(token);
  }
  cv_.notify_all();
}

void TokenStream::Finish(std::string_view finish_reason, int prompt_tokens, int completion_tokens) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (pending_.finished) return;  // the first end wins
    pending_.finished = true;
    pending_.finish_reason = std::string(finish_reason);
    pending_.prompt_tokens = prompt_tokens;
    pending_.completion_tokens = completion_tokens;
  }
  cv_.notify_all();
}

void TokenStream::Fail(Status error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (pending_.finished) return;
    pending_.finished = true;
    pending_.error = std::move(error);
  }
  cv_.notify_all();
}

bool TokenStream::cancelled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cancelled_;
}

StreamUpdate TokenStream::Wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  auto has_news = [this] {
    return !pending_.tokens.empty() || pending_.finished ||
           (pending_.started && !started_reported_);
  };
  cv_.wait_for(lock, timeout, has_news);
  StreamUpdate out;
  out.tokens = std::move(pending_.tokens);
  pending_.tokens.clear();
  out.started = pending_.started;
  out.id = pending_.id;
  out.finished = pending_.finished;
  out.error = pending_.error;
  out.finish_reason = pending_.finish_reason;
  out.prompt_tokens = pending_.prompt_tokens;
  out.completion_tokens = pending_.completion_tokens;
  if (pending_.started) started_reported_ = true;
  return out;
}

void TokenStream::Cancel() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
  }
  cv_.notify_all();
}

RequestInbox::RequestInbox(int max_queue) : max_queue_(max_queue) {}

Status RequestInbox::Push(ApiSubmission submission) {
  std::lock_guard<std::mutex> lock(mu_);
  const int waiting = static_cast<int>(pending_.size()) + engine_waiting_;
  if (waiting >= max_queue_) {
    return ResourceExhausted("queue full: " + std::to_string(waiting) + " requests waiting");
  }
  pending_.push_back(std::move(submission));
  return Status::Ok();
}

std::vector<ApiSubmission> RequestInbox::Drain() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<ApiSubmission> out(std::make_move_iterator(pending_.begin()),
                                 std::make_move_iterator(pending_.end()));
  pending_.clear();
  return out;
}

void RequestInbox::SetEngineWaiting(int waiting) {
  std::lock_guard<std::mutex> lock(mu_);
  engine_waiting_ = waiting;
}

int RequestInbox::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(pending_.size());
}

}  // namespace sy::engine
