#include "console/app/controller.h"

#include <algorithm>

namespace sy::console {
namespace {

constexpr int kPage = 10;

}  // namespace

Controller::Controller(bool replay_mode) { view_.replay = replay_mode; }

void Controller::SetMessage(std::string text, bool error) {
  view_.message = std::move(text);
  view_.message_error = error;
}

void Controller::Ask(std::string question, ParsedCommand command) {
  Ask(std::move(question), std::move(command), -1);
}

void Controller::Ask(std::string question, ParsedCommand command, int engine) {
  deferred_.emplace(std::move(question), std::move(command));
  deferred_engine_ = engine;
  PromoteDeferredQuestion();
}

void Controller::PromoteDeferredQuestion() {
  if (!deferred_ || view_.command_active || pending_confirm_) return;
  view_.confirm = std::move(deferred_->first);
  pending_confirm_ = std::move(deferred_->second);
  pending_engine_ = deferred_engine_;
  deferred_.reset();
}

void Controller::SyncCommandLine() {
  view_.command_text = editor_.text();
  view_.command_cursor = editor_.cursor();
  view_.completions = editor_.candidates();
}

Effects Controller::Submit(const std::string& line) {
  Effects fx;
  editor_.Remember(line);
  Result<ParsedCommand> parsed = ParseCommand(line);
  if (!parsed.ok()) {
    // Nothing is sent; the error stays on the command line row.
    SetMessage(parsed.status().message(), true);
    return fx;
  }
  ParsedCommand cmd = std::move(parsed).value();
  if (cmd.name == "quit") {
    fx.quit = true;
    return fx;
  }
  if (cmd.name == "help") {
    view_.help = true;
    return fx;
  }
  if (cmd.name == "seek" || cmd.name == "compare") {
    if (!view_.replay) {
      SetMessage(":" + cmd.name + " works in replay only (moe-console --replay FILE)", true);
      return fx;
    }
    fx.replay_command = std::move(cmd);
    return fx;
  }
  if (cmd.name == "engine") {
    SelectEngine(cmd.request.args.value("engine", -1));
    return fx;
  }
  if (view_.replay) {
    SetMessage("replay: ':" + cmd.text + "' not sent (no engine attached)", true);
    return fx;
  }
  int engine = -1;
  if (!RouteCommand(cmd, engine)) return fx;
  if (cmd.needs_confirm) {
    view_.confirm = "Really " + cmd.name + " the engine" +
                    (engine >= 0 ? " " + std::to_string(engine + 1) : "") + "? (y/n)";
    pending_confirm_ = std::move(cmd);
    pending_engine_ = engine;
    return fx;
  }
  SetMessage("sent :" + cmd.text + " …", false);
  fx.send = std::move(cmd);
  fx.engine = engine;
  return fx;
}

Effects Controller::HandleKey(const Key& key) {
  Effects fx = HandleKeyInner(key);
  PromoteDeferredQuestion();
  return fx;
}

Effects Controller::HandleKeyInner(const Key& key) {
  Effects fx;
  if (key.name == "Resize") return fx;

  if (pending_confirm_) {
    view_.confirm.clear();
    if (key.name == "y" || key.name == "Y") {
      SetMessage("sent :" + pending_confirm_->text + " …", false);
      fx.send = std::move(pending_confirm_);
      fx.engine = pending_engine_;
    } else {
      SetMessage(":" + pending_confirm_->text + " cancelled", false);
    }
    pending_confirm_.reset();
    return fx;
  }

  if (view_.command_active) {
    switch (editor_.HandleKey(key)) {
      case CommandLineEditor::Outcome::kEditing:
        SyncCommandLine();
        return fx;
      case CommandLineEditor::Outcome::kCancel:
        view_.command_active = false;
        return fx;
      case CommandLineEditor::Outcome::kSubmit: {
        view_.command_active = false;
        const std::string line = editor_.text();
        if (line.find_first_not_of(' ') == std::string::npos) return fx;
        return Submit(line);
      }
    }
  }
  if (view_.filter_active) return HandleFilterKey(key);

  const std::optional<Action> action = LookupKey(key.name, view_.replay);
  if (view_.help) {
    // While help is up, only closing keys and the command line act.
    if (key.name == "Esc" || key.name == "?" || key.name == "q") {
      view_.help = false;
      return fx;
    }
    if (action != Action::kCommandLine) return fx;
  }
  if (!action) {
    fx.redraw = false;
    return fx;
  }
  const int log_page = kPage;
  int& scroll = view_.view == View::kExperts ? view_.experts_scroll : view_.log_scroll;
  // The Log counts lines up from the newest, the Experts view rows down
  // from the top; Up means "towards older / higher" in both.
  const int up = view_.view == View::kExperts ? -1 : 1;
  switch (*action) {
    case Action::kViewOverview:
      view_.view = View::kOverview;
      break;
    case Action::kViewKernels:
      view_.view = View::kKernels;
      break;
    case Action::kViewMemory:
      view_.view = View::kMemory;
      break;
    case Action::kViewExperts:
      view_.view = View::kExperts;
      break;
    case Action::kViewLog:
      view_.view = View::kLog;
      break;
    case Action::kViewRequests:
      view_.view = View::kRequests;
      break;
    case Action::kNextView:
      view_.view = static_cast<View>((static_cast<int>(view_.view) + 1) % kViewCount);
      break;
    case Action::kPrevView:
      view_.view = static_cast<View>((static_cast<int>(view_.view) + kViewCount - 1) % kViewCount);
      break;
    case Action::kCommandLine:
      view_.help = false;
      view_.command_active = true;
      view_.message.clear();
      editor_.Open();
      SyncCommandLine();
      break;
    case Action::kHelp:
      view_.help = !view_.help;
      break;
    case Action::kQuit:
      fx.quit = true;
      break;
    case Action::kClose:
      view_.message.clear();
      view_.compare = false;
      break;
    case Action::kScrollUp:
      scroll = std::max(0, scroll + up);
      break;
    case Action::kScrollDown:
      scroll = std::max(0, scroll - up);
      break;
    case Action::kPageUp:
      scroll = std::max(0, scroll + up * log_page);
      break;
    case Action::kPageDown:
      scroll = std::max(0, scroll - up * log_page);
      break;
    case Action::kPrevLayer:
      view_.expert_layer = std::max(-1, view_.expert_layer - 1);  // -1: least balanced
      break;
    case Action::kNextLayer:
      view_.expert_layer += 1;  // clamped to the last layer when drawn
      break;
    case Action::kDebug:
      view_.debug = !view_.debug;
      break;
    case Action::kNextEngine:
    case Action::kPrevEngine: {
      // The cycle is all (-1), 1, 2, ..., N.
      const int n = view_.engine_count + 1;
      const int step = *action == Action::kNextEngine ? 1 : n - 1;
      SelectEngine((view_.engine + 1 + step) % n - 1);
      break;
    }
    case Action::kFilter:
    case Action::kSortRequests:
    case Action::kLogKind:
    case Action::kOlderStep:
    case Action::kNewerStep:
    case Action::kFollowStep:
    case Action::kZoomIn:
    case Action::kZoomOut:
    case Action::kPanLeft:
    case Action::kPanRight:
    case Action::kKernelTable:
      HandleViewAction(*action);
      break;
    case Action::kPlayPause:
      fx.replay = ReplayAction::kPlayPause;
      break;
    case Action::kFaster:
      fx.replay = ReplayAction::kFaster;
      break;
    case Action::kSlower:
      fx.replay = ReplayAction::kSlower;
      break;
    case Action::kSeekBack:
      fx.replay = ReplayAction::kSeekBack;
      break;
    case Action::kSeekForward:
      fx.replay = ReplayAction::kSeekForward;
      break;
    case Action::kSeekStart:
      fx.replay = ReplayAction::kSeekStart;
      break;
    case Action::kSeekEnd:
      fx.replay = ReplayAction::kSeekEnd;
      break;
    case Action::kNextEvent:
      fx.replay = ReplayAction::kNextEvent;
      break;
    case Action::kPrevEvent:
      fx.replay = ReplayAction::kPrevEvent;
      break;
  }
  return fx;
}

}  // namespace sy::console
