// File: tests/engine/server/soak_commands.h
//
// The soak test's side of the control socket: a raw REQ client (so it can
// send bytes no well-behaved client would) and a generator of random
// commands, each with the replies it accepts. Valid commands must succeed
// (or be refused for a reason the engine's state explains); invalid ones
// must be refused as INVALID_ARGUMENT / NOT_FOUND. No command may go
// unanswered or fail INTERNAL.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>
#include <zmq.hpp>

#include <nlohmann/json.hpp>

namespace sy::engine {

// One REQ socket to the engine's ROUTER. Thread-compatible.
class RawControl {
 public:
  explicit RawControl(std::string endpoint) : ctx_(1), endpoint_(std::move(endpoint)) { Open(); }

  // Sends `body` as one frame; the parsed reply, or nullopt (with a test
  // failure) when none came within `timeout` or it was not JSON.
  std::optional<nlohmann::json> Send(const std::string& body,
                                     std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
    sock_->set(zmq::sockopt::rcvtimeo, static_cast<int>(timeout.count()));
    (void)sock_->send(zmq::buffer(body), zmq::send_flags::none);
    zmq::message_t reply;
    if (!sock_->recv(reply, zmq::recv_flags::none)) {
      ADD_FAILURE() << "no reply within " << timeout.count() << " ms to " << body.substr(0, 80);
      Open();  // a REQ socket that lost its reply is stuck
      return std::nullopt;
    }
    nlohmann::json j =
        nlohmann::json::parse(reply.to_string(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("ok")) {
      ADD_FAILURE() << "reply is not a command reply: " << reply.to_string();
      return std::nullopt;
    }
    return j;
  }

  // A well-formed request with a fresh id.
  std::optional<nlohmann::json> Call(const std::string& cmd,
                                     nlohmann::json args = nlohmann::json::object()) {
    return Send(Body(cmd, std::move(args)));
  }

  std::string Body(const std::string& cmd, nlohmann::json args = nlohmann::json::object()) {
    return nlohmann::json{{"id", next_id_++}, {"cmd", cmd}, {"args", std::move(args)}}.dump();
  }

 private:
  void Open() {
    sock_.emplace(ctx_, zmq::socket_type::req);
    sock_->set(zmq::sockopt::linger, 0);
    sock_->connect(endpoint_);
  }
  zmq::context_t ctx_;
  std::string endpoint_;
  std::optional<zmq::socket_t> sock_;
  int64_t next_id_ = 1;
};

// Random commands for the soak test. The ids of valid ones come from `ctl`.
class SoakCommands {
 public:
  struct Sent {
    std::string what;  // for failure messages
    std::string body;
    bool valid = true;
    std::set<std::string>
        refusals;              // error codes accepted besides ok (valid) or required (invalid)
    bool then_resume = false;  // a pause: the caller resumes shortly after

    bool Accepts(const nlohmann::json& reply) const {
      const bool ok = reply.value("ok", false);
      if (ok) return valid;
      const std::string code = reply["error"].value("code", "");
      return refusals.count(code) > 0;
    }
  };

  SoakCommands(RawControl* ctl, std::mt19937_64* rng) : ctl_(ctl), rng_(rng) {}

  // `max_id`: the highest request id seen so far (cancel aims near it).
  Sent Random(int64_t max_id) {
    using nlohmann::json;
    const auto pick = [&](int n) { return static_cast<int>((*rng_)() % n); };
    const auto valid = [&](std::string cmd, json args, std::set<std::string> refusals = {}) {
      return Sent{cmd + " " + args.dump(), ctl_->Body(cmd, args), true, std::move(refusals)};
    };
    const auto invalid = [&](std::string what, std::string body,
                             std::set<std::string> codes = {"INVALID_ARGUMENT"}) {
      return Sent{std::move(what), std::move(body), false, std::move(codes)};
    };
    switch (pick(22)) {
      case 0:
        return valid("status", json::object());
      case 1:
        return valid("describe", json::object());
      case 2:
        return valid("expert_stats", {{"window", pick(50)}, {"top", pick(20)}});
      case 3: {
        const char* levels[] = {"off", "summary", "full"};
        return valid("trace", {{"level", levels[pick(3)]}});
      }
      case 4: {
        Sent s = valid("pause", json::object());
        s.then_resume = true;
        return s;
      }
      case 5:
        return valid("flush_cache", json::object());
      case 6:  // a live request, a finished one or one not yet born
        return valid("cancel", {{"id", std::max<int64_t>(1, max_id - pick(8) + 2)}}, {"NOT_FOUND"});
      case 7:  // refused in TP (nothing to balance)
        return valid("rebalance", {{"dry_run", true}, {"window", pick(30)}},
                     {"FAILED_PRECONDITION"});
      case 8:
        return valid("rebalance_auto", {{"every", 0}, {"min_gain", 0.01 * (1 + pick(50))}});
      case 9:
        return valid("policy", {{"mode", "manual"}});
      case 10:
        return valid("resume", json::object());
      case 11:
        return invalid("not JSON", "this is not json");
      case 12: {
        std::string junk(static_cast<size_t>(pick(64)), '\0');
        for (char& c : junk) c = static_cast<char>((*rng_)() & 0xff);
        return invalid("random bytes", junk);
      }
      case 13: {  // a valid request cut short
        const std::string whole = ctl_->Body("status");
        return invalid("truncated", whole.substr(0, 1 + pick(static_cast<int>(whole.size()) - 2)));
      }
      case 14:
        return invalid("not an object", "[1,2,3]");
      case 15:
        return invalid("no cmd", R"({"id": 1, "args": {}})");
      case 16:
        return invalid("cmd not a string", R"({"id": 2, "cmd": 7})");
      case 17:
        return invalid("unknown command", ctl_->Body("explode"), {"NOT_FOUND"});
      case 18:
        return invalid("deep nesting", std::string(100000, '['));
      case 19: {
        const std::pair<const char*, json> bad[] = {
            {"trace", {{"level", "loud"}}},      {"switch", {{"to", "xp"}}},
            {"cancel", {{"id", "seven"}}},       {"rebalance", {{"dry_run", "yes"}}},
            {"expert_stats", {{"window", -1}}},  {"policy", {{"t_high", 0}}},
            {"rebalance_auto", {{"every", -1}}}, {"switch", json::object()},
            {"calibrate", {{"batches", {1}}}}};
        const auto& [cmd, args] = bad[pick(std::size(bad))];
        return invalid(std::string("bad args: ") + cmd + " " + args.dump(), ctl_->Body(cmd, args));
      }
      case 20:
        return invalid("args not an object", R"({"id": 3, "cmd": "pause", "args": [1]})");
      default:
        return invalid("empty body", "");
    }
  }

 private:
  RawControl* ctl_;
  std::mt19937_64* rng_;
};

}  // namespace sy::engine
