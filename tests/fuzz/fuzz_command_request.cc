// Fuzz target: command requests the engine's control socket receives and the
// replies a console receives (telemetry/protocol.h DecodeRequest, DecodeReply).
// Input: one JSON body, tried as both.
//
// Contract checked: both fail only with INVALID_ARGUMENT; a decoded request
// has an id that is null, a number or a string and args that are an object,
// and it survives EncodeRequest -> DecodeRequest unchanged (compared as
// encoded text); a decoded reply survives EncodeReply -> DecodeReply likewise.
#include <cstdint>
#include <string>
#include <string_view>

#include "telemetry/protocol.h"
#include "tests/fuzz/fuzz_util.h"

using sy::StatusCode;
namespace tel = sy::telemetry;

namespace {

void Request(std::string_view body) {
  sy::Result<tel::CommandRequest> r = tel::DecodeRequest(body);
  if (!r.ok()) {
    SY_FUZZ_CHECK(r.status().code() == StatusCode::kInvalidArgument, r.status().ToString());
    return;
  }
  SY_FUZZ_CHECK(r->id.is_null() || r->id.is_number() || r->id.is_string(), r->id.dump());
  SY_FUZZ_CHECK(r->args.is_object(), r->args.dump());
  const std::string wire = tel::EncodeRequest(*r);
  sy::Result<tel::CommandRequest> back = tel::DecodeRequest(wire);
  SY_FUZZ_CHECK(back.ok(), back.status().ToString() + "\n  encoded: " + wire);
  // Compared as text: JSON has no infinity, so a number too large for a
  // double (1e999) is written as null by both sides alike.
  SY_FUZZ_CHECK(back->cmd == r->cmd && tel::EncodeRequest(*back) == wire, wire);
}

void Reply(std::string_view body) {
  sy::Result<tel::CommandReply> r = tel::DecodeReply(body);
  if (!r.ok()) {
    SY_FUZZ_CHECK(r.status().code() == StatusCode::kInvalidArgument, r.status().ToString());
    return;
  }
  const std::string wire = tel::EncodeReply(*r);
  sy::Result<tel::CommandReply> back = tel::DecodeReply(wire);
  SY_FUZZ_CHECK(back.ok(), back.status().ToString() + "\n  encoded: " + wire);
  SY_FUZZ_CHECK(back->ok == r->ok && back->error_code == r->error_code &&
                    back->error_message == r->error_message && tel::EncodeReply(*back) == wire,
                wire);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  Request(body);
  Reply(body);
  return 0;
}
