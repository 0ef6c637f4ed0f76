// The Controller's `/` filter line and the keys of the Requests, Log and
// Kernels views (controller.h says what each does).
#include <algorithm>
#include <string>

#include "console/app/controller.h"

namespace sy::console {
namespace {

constexpr int kMaxZoom = 10;  // lanes at 1/1024 of a step: a cell is ~us

std::string Trimmed(const std::string& s) {
  const size_t a = s.find_first_not_of(' ');
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(' ') - a + 1);
}

}  // namespace

Effects Controller::HandleFilterKey(const Key& key) {
  Effects fx;
  switch (filter_editor_.HandleKey(key)) {
    case CommandLineEditor::Outcome::kEditing:
      view_.filter_text = filter_editor_.text();
      view_.filter_cursor = filter_editor_.cursor();
      return fx;
    case CommandLineEditor::Outcome::kCancel:
      view_.filter_active = false;
      return fx;
    case CommandLineEditor::Outcome::kSubmit:
      break;
  }
  view_.filter_active = false;
  const std::string text = Trimmed(filter_editor_.text());
  filter_editor_.Remember(text);
  if (filter_view_ == View::kLog) {
    view_.log_filter = text;
    view_.log_scroll = 0;  // the newest matching line at the bottom
  } else {
    view_.requests_filter = text;
  }
  SetMessage(text.empty() ? std::string(ViewTitle(filter_view_)) + " filter cleared"
                          : std::string(ViewTitle(filter_view_)) + " filtered by /" + text,
             false);
  return fx;
}

void Controller::HandleViewAction(Action action) {
  const View v = view_.view;
  // Keys of one view pressed in another only say where they act.
  auto only = [&](View where, const char* what) {
    if (v == where) return true;
    SetMessage(std::string(what) + " acts in the " + ViewTitle(where) + " view", false);
    return false;
  };
  switch (action) {
    case Action::kFilter:
      if (v != View::kRequests && v != View::kLog) {
        SetMessage("/ filters the Requests and Log views", false);
        return;
      }
      view_.help = false;
      filter_view_ = v;
      view_.filter_active = true;
      view_.message.clear();
      filter_editor_.Open(v == View::kLog ? view_.log_filter : view_.requests_filter);
      view_.filter_text = filter_editor_.text();
      view_.filter_cursor = filter_editor_.cursor();
      return;
    case Action::kSortRequests:
      if (only(View::kRequests, "s (sort)")) {
        view_.requests_sort = static_cast<RequestSort>((static_cast<int>(view_.requests_sort) + 1) %
                                                       kRequestSortCount);
      }
      return;
    case Action::kLogKind:
      if (only(View::kLog, "k (kind)")) {
        view_.log_kind =
            static_cast<LogKind>((static_cast<int>(view_.log_kind) + 1) % kLogKindCount);
        view_.log_scroll = 0;
      }
      return;
    case Action::kKernelTable:
      if (only(View::kKernels, "g (table)")) {
        view_.kernel_table = static_cast<KernelTable>((static_cast<int>(view_.kernel_table) + 1) %
                                                      kKernelTableCount);
      }
      return;
    case Action::kOlderStep:
    case Action::kNewerStep:
      if (only(View::kKernels, ", and . (step)")) {
        view_.kernel_nav += action == Action::kOlderStep ? -1 : 1;
      }
      return;
    case Action::kFollowStep:
      if (only(View::kKernels, "f (follow)")) {
        view_.kernel_step = -1;
        view_.kernel_nav = 0;
      }
      return;
    case Action::kZoomIn:
      // Keep the window's centre: a window starting p half-windows in
      // starts 2p+1 half-windows of the next zoom in.
      if (only(View::kKernels, "z (zoom)") && view_.kernel_zoom < kMaxZoom) {
        ++view_.kernel_zoom;
        view_.kernel_pan = 2 * view_.kernel_pan + 1;
      }
      return;
    case Action::kZoomOut:
      if (only(View::kKernels, "Z (zoom)") && view_.kernel_zoom > 0) {
        --view_.kernel_zoom;
        view_.kernel_pan = view_.kernel_zoom == 0 ? 0 : std::max(0, (view_.kernel_pan - 1) / 2);
      }
      return;
    case Action::kPanLeft:
    case Action::kPanRight:
      if (only(View::kKernels, "{ and } (pan)")) {
        const int max_pan = (2 << view_.kernel_zoom) - 2;  // the last window ends the step
        view_.kernel_pan =
            std::clamp(view_.kernel_pan + (action == Action::kPanLeft ? -1 : 1), 0, max_pan);
      }
      return;
    default:
      return;  // not a view key
  }
}

}  // namespace sy::console
