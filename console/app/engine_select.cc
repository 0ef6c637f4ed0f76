// Controller: picking one of several engines, and where commands go.
// Declared in controller.h; kept apart so the key handling stays readable.

#include <algorithm>
#include <string>

#include "console/app/controller.h"

namespace sy::console {

void Controller::SelectEngine(int engine) {
  const int n = view_.engine_count;
  if (n <= 1) {
    SetMessage("one engine connected: nothing to select (give --connect more than once)",
               engine > 0);
    return;
  }
  if (engine < -1 || engine >= n) {
    SetMessage("no engine " + std::to_string(engine + 1) + ": connected are 1.." +
                   std::to_string(n) + " (or all)",
               true);
    return;
  }
  view_.engine = engine;
  SetMessage(engine < 0
                 ? "showing all " + std::to_string(n) + " engines"
                 : "showing engine " + std::to_string(engine + 1) + " of " + std::to_string(n),
             false);
}

bool Controller::RouteCommand(const ParsedCommand& cmd, int& engine) {
  engine = -1;
  if (view_.engine_count <= 1) return true;
  if (view_.engine >= 0) {
    engine = view_.engine;
    return true;
  }
  const auto table = CommandTable();
  const auto spec = std::find_if(table.begin(), table.end(),
                                 [&](const CommandSpec& c) { return c.name == cmd.name; });
  const bool disruptive = spec != table.end() && spec->disruptive;
  if (disruptive || cmd.preview) {
    SetMessage("':" + cmd.text + "' goes to one engine at a time: pick it first (e, or :engine N)",
               true);
    return false;
  }
  return true;  // every engine
}

}  // namespace sy::console
