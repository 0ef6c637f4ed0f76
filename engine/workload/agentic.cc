// File: engine/workload/agentic.cc
//
// The agentic scenario: multi-turn sessions whose prompts grow turn by turn,
// as an agent's context does (the previous answer and a tool result appended
// to everything before). Consecutive turns of a session share their whole
// previous prompt as an exact token prefix, which is what a radix prefix
// cache reuses.
//
// Open loop: turn k+1 arrives think_s after turn k *arrives*, whether or not
// the engine has answered turn k yet.
#include <algorithm>
#include <queue>
#include <vector>

#include "engine/workload/scenarios.h"

namespace sy::engine::workload_internal {
namespace {

struct Session {
  int64_t next_us = 0;          // arrival of the session's next turn
  int64_t id = 0;               // start order; breaks ties so the order is fixed
  int turns_left = 0;           // turns still to send
  std::vector<int32_t> prompt;  // the prompt of the last turn sent
};

// Earliest next turn on top; equal times in start order.
struct Later {
  bool operator()(const Session& a, const Session& b) const {
    return a.next_us != b.next_us ? a.next_us > b.next_us : a.id > b.id;
  }
};

class Agentic final : public Scenario {
 public:
  explicit Agentic(const WorkloadOptions& o) : o_(o), think_us_(ToUs(o.think_s)) {}

  bool Next(TokenSource& src, Arrival* a) override {
    if (!start_drawn_) {
      start_s_ += src.Exponential(o_.rate);
      start_drawn_ = true;
    }
    for (;;) {
      const int64_t start_us = ToUs(start_s_);
      // A turn of a running session first when it is due no later than the
      // next session start.
      if (!active_.empty() && active_.top().next_us <= start_us) {
        Session s = active_.top();
        active_.pop();
        if (static_cast<int>(s.prompt.size()) + o_.append_tokens > o_.max_prompt_tokens) {
          continue;  // the context is full: the session ends
        }
        std::vector<int32_t> more = src.Text(o_.append_tokens, false, "\n");
        s.prompt.insert(s.prompt.end(), more.begin(), more.end());
        Emit(src, s, a);
        return true;
      }
      Session s;
      s.id = next_id_++;
      s.next_us = start_us;
      s.turns_left = std::uniform_int_distribution<int>(o_.turns_min, o_.turns_max)(src.rng());
      s.prompt = src.Prompt(std::min(src.Draw(o_.first_turn_len), o_.max_prompt_tokens));
      start_s_ += src.Exponential(o_.rate);
      Emit(src, s, a);
      return true;
    }
  }

 private:
  // Sends the session's current prompt at s.next_us and queues its next turn.
  void Emit(TokenSource& src, Session& s, Arrival* a) {
    a->time_us = s.next_us;
    a->spec.prompt = s.prompt;
    a->spec.max_new_tokens = src.Draw(o_.output_len);
    if (--s.turns_left > 0) {
      s.next_us += think_us_;
      active_.push(std::move(s));
    }
  }

  const WorkloadOptions& o_;
  const int64_t think_us_;
  double start_s_ = 0;  // the next session's start
  bool start_drawn_ = false;
  int64_t next_id_ = 0;
  std::priority_queue<Session, std::vector<Session>, Later> active_;
};

}  // namespace

std::unique_ptr<Scenario> MakeAgentic(const WorkloadOptions& o) {
  return std::make_unique<Agentic>(o);
}

}  // namespace sy::engine::workload_internal
