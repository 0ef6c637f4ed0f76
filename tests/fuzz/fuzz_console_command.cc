// Fuzz target: the console's `:` command line (console/input/command_line.h):
// ParseCommand on the whole input, Tab completion, and the line editor
// driven by the input as keystrokes (bytes 1-11 are named keys, the rest is
// typed text, one UTF-8 sequence per key), each submitted line parsed.
//
// Contract checked: ParseCommand fails only with INVALID_ARGUMENT; an engine
// command it accepts is a request that survives EncodeRequest ->
// DecodeRequest; its normalised text parses again to the same command (the
// console shows and remembers that text); the editor's cursor stays in the
// line.
#include <cstdint>
#include <string>
#include <string_view>

#include "console/input/command_line.h"
#include "tests/fuzz/fuzz_util.h"

using sy::StatusCode;
namespace sc = sy::console;
namespace tel = sy::telemetry;

namespace {

void Parse(std::string_view line) {
  sy::Result<sc::ParsedCommand> c = sc::ParseCommand(line);
  if (!c.ok()) {
    SY_FUZZ_CHECK(c.status().code() == StatusCode::kInvalidArgument, c.status().ToString());
    return;
  }
  if (!c->local) {
    SY_FUZZ_CHECK(c->request.cmd == c->name, c->request.cmd);
    const std::string wire = tel::EncodeRequest(c->request);
    sy::Result<tel::CommandRequest> back = tel::DecodeRequest(wire);
    SY_FUZZ_CHECK(back.ok() && back->cmd == c->request.cmd, wire);
  }
  if (c->text.empty()) return;  // commands that keep no normalised text
  sy::Result<sc::ParsedCommand> again = sc::ParseCommand(c->text);
  SY_FUZZ_CHECK(again.ok(), "'" + c->text + "': " + again.status().ToString());
  SY_FUZZ_CHECK(again->name == c->name && again->text == c->text &&
                    again->request.args == c->request.args && again->local == c->local &&
                    again->needs_confirm == c->needs_confirm && again->preview == c->preview,
                "'" + std::string(line) + "' -> '" + c->text + "' -> '" + again->text + "' " +
                    c->request.args.dump() + " vs " + again->request.args.dump());
}

constexpr const char* kNamed[] = {"Enter", "Esc",  "Tab", "Backspace", "Delete", "Left",
                                  "Right", "Home", "End", "Up",        "Down"};

void Edit(std::string_view keys) {
  sc::CommandLineEditor ed;
  ed.Open();
  for (size_t i = 0; i < keys.size();) {
    const unsigned char b = static_cast<unsigned char>(keys[i]);
    std::string name;
    if (b >= 1 && b <= 11) {
      name = kNamed[b - 1];
      ++i;
    } else {
      const size_t len = b < 0x80 ? 1 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 1;
      name = std::string(keys.substr(i, len));
      i += len;
    }
    const sc::CommandLineEditor::Outcome o = ed.HandleKey(sc::Key{name});
    SY_FUZZ_CHECK(ed.cursor() >= 0 && static_cast<size_t>(ed.cursor()) <= ed.text().size(),
                  std::to_string(ed.cursor()));
    if (o == sc::CommandLineEditor::Outcome::kSubmit) {
      const std::string text = ed.text();
      Parse(text);
      ed.Remember(text);
      ed.Open();
    } else if (o == sc::CommandLineEditor::Outcome::kCancel) {
      ed.Open();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  Parse(in);
  const sc::Completion c = sc::Complete(in);
  for (const std::string& cand : c.candidates) SY_FUZZ_CHECK(!cand.empty(), c.line);
  Edit(in);
  return 0;
}
