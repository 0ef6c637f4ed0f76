// Fuzz target: telemetry stream messages as a subscriber receives them
// (telemetry/protocol.h Decode). Input: the topic frame, '\n', the body frame.
//
// Contract checked: Decode never crashes and fails only with INVALID_ARGUMENT;
// a decoded message has the topic it came on; re-encoding it gives a message
// that decodes again, and encoding is a fixed point from there on
// (Encode(Decode(Encode(m))) == Encode(m): nothing is lost or invented by a
// round trip; non-finite doubles, which JSON cannot carry, become 0 once).
#include <cstdint>
#include <string>
#include <string_view>

#include "telemetry/protocol.h"
#include "tests/fuzz/fuzz_util.h"

using sy::StatusCode;
namespace tel = sy::telemetry;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t nl = in.find('\n');
  if (nl == std::string_view::npos) return 0;
  const std::string_view topic = in.substr(0, nl);
  const std::string_view body = in.substr(nl + 1);

  sy::Result<tel::Message> m = tel::Decode(topic, body);
  if (!m.ok()) {
    SY_FUZZ_CHECK(m.status().code() == StatusCode::kInvalidArgument, m.status().ToString());
    return 0;
  }
  SY_FUZZ_CHECK(tel::TopicOf(*m) == topic, std::string(tel::TopicOf(*m)));
  const tel::WireMessage once = tel::Encode(*m);
  SY_FUZZ_CHECK(once.topic == topic, once.topic);
  sy::Result<tel::Message> again = tel::Decode(once.topic, once.body);
  SY_FUZZ_CHECK(again.ok(), again.status().ToString() + "\n  re-encoded: " + once.body);
  const tel::WireMessage twice = tel::Encode(*again);
  SY_FUZZ_CHECK(twice.body == once.body, "first: " + once.body + "\n  second: " + twice.body);
  return 0;
}
