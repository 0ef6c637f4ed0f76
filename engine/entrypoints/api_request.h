// File: engine/entrypoints/api_request.h
//
// The hand-off between the HTTP front end (many client threads) and the
// engine loop (one thread), shaped so the engine never waits for a client:
//
//   HTTP thread                          engine loop (between steps)
//   -----------                          ---------------------------
//   stream = make_shared<TokenStream>()
//   inbox.Push({spec, stream})   ---->   for (s : inbox.Drain()) Submit...
//                                        stream->Started(id)  / ->Fail(status)
//   stream->Wait(...) <- tokens  <----   stream->PushToken(t)   (after each step)
//   stream->Wait(...) <- finish  <----   stream->Finish(reason, usage)
//   client gone: stream->Cancel() ---->  if (stream->cancelled()) Scheduler::Cancel
//
// Every engine-side call takes one short mutex and never blocks on the
// client: tokens queue in the stream until the client reads them (a request
// has at most max_new_tokens of them, so the queue is bounded by the request).
// The inbox is bounded: Push refuses (RESOURCE_EXHAUSTED) once pending
// submissions plus the engine's waiting queue reach max_queue, which the
// HTTP layer turns into 503, so overload is refused at the door instead of
// growing without bound.
//
// Thread-safety: all methods of both classes are safe from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/scheduler/request.h"

namespace sy::engine {

// What a client has not yet read, returned by TokenStream::Wait.
struct StreamUpdate {
  std::vector<int32_t> tokens;  // new generated tokens, in order (EOS excluded)
  bool started = false;         // the engine accepted the request (id valid)
  bool finished = false;        // no more tokens will come
  Status error;                 // not OK: the engine refused the request
  std::string finish_reason;    // FinishReasonName once finished
  int64_t id = 0;               // the engine's request id once started
  int prompt_tokens = 0;        // once finished
  int completion_tokens = 0;    // once finished
};

// One request's tokens, from the engine loop to its HTTP handler. The first
// end (Finish or Fail) wins; Started and PushToken after it are ignored, so
// a late engine call can never reopen a stream the client saw end.
class TokenStream {
 public:
  // Engine side.
  void Started(int64_t id);
  void PushToken(int32_t token);
  void Finish(std::string_view finish_reason, int prompt_tokens, int completion_tokens);
  void Fail(Status error);  // refused at submit; finishes the stream
  bool cancelled() const;

  // Client side. Returns what arrived since the last call, waiting up to
  // `timeout` for something new (returns at once if anything is pending or
  // the stream has finished). A finished stream keeps returning finished.
  // `started` and `id` are set in every update once the engine started it;
  // a start with no tokens yet wakes the waiter once.
  StreamUpdate Wait(std::chrono::milliseconds timeout);
  // The client went away (or timed out): the engine cancels the request at
  // its next loop turn and stops producing tokens for it.
  void Cancel();

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  StreamUpdate pending_;
  bool started_reported_ = false;
  bool cancelled_ = false;
};

struct ApiSubmission {
  RequestSpec spec;
  std::shared_ptr<TokenStream> stream;
};

class RequestInbox {
 public:
  // REQUIRES: max_queue >= 1.
  explicit RequestInbox(int max_queue);

  // RESOURCE_EXHAUSTED ("queue full: N requests waiting") when pending +
  // the engine's last reported waiting count >= max_queue; nothing queued then.
  Status Push(ApiSubmission submission);
  // Engine side: everything pushed so far, in push order.
  std::vector<ApiSubmission> Drain();
  // Engine side, once per loop turn: the scheduler's waiting queue length.
  void SetEngineWaiting(int waiting);
  int pending() const;
  int max_queue() const { return max_queue_; }

 private:
  const int max_queue_;
  mutable std::mutex mu_;
  std::deque<ApiSubmission> pending_;
  int engine_waiting_ = 0;
};

}  // namespace sy::engine
