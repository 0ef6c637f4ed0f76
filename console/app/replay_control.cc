#include "console/app/replay_control.h"

#include <memory>

#include "console/app/compare_loader.h"
#include "console/input/replay_commands.h"

namespace sy::console {

void ApplyReplayCommand(ReplayPlayer& player, const ParsedCommand& cmd, Controller& ctl) {
  const nlohmann::json& args = cmd.request.args;
  if (cmd.name == "seek") {
    Status st;
    if (args.contains("step")) {
      st = player.SeekToStep(args["step"].get<int64_t>());
    } else {
      const int64_t target = args.contains("delta_us")
                                 ? player.position_us() + args["delta_us"].get<int64_t>()
                                 : args["us"].get<int64_t>();
      st = player.SeekTo(static_cast<double>(target) / 1e6);
    }
    if (!st.ok()) {
      ctl.SetMessage(st.message(), true);
    } else {
      ctl.SetMessage(":" + cmd.text + " -> " + FormatPosition(player.position_us()), false);
    }
    return;
  }
  if (cmd.name == "compare") {
    Result<Comparison> c = CompareInReplay(player, cmd);
    if (!c.ok()) {
      ctl.SetMessage(c.status().message(), true);
      return;
    }
    ctl.SetMessage(c->summary, false);
    ViewState& v = ctl.mutable_view();
    v.comparison = std::make_shared<const Comparison>(std::move(c).value());
    v.compare = true;
    return;
  }
  ctl.SetMessage("replay: ':" + cmd.text + "' is not a replay command", true);
}

void ReportReplayAction(ReplayPlayer& player, const Status& applied, Controller& ctl) {
  if (!applied.ok()) {
    ctl.SetMessage(applied.ToString(), true);
    return;
  }
  if (std::string notice = player.TakeNotice(); !notice.empty()) ctl.SetMessage(notice, false);
}

}  // namespace sy::console
