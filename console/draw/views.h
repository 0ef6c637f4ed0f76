// File: console/draw/views.h
//
// The panels. Each is a pure function of (Snapshot, ViewState, Rect) that
// returns a Grid of exactly r.w x r.h cells (r.x/r.y are where the caller will
// place it). None reads a clock, a file or the terminal, so each is tested
// headless: a fixed Snapshot in, exact text out. Any size is accepted,
// including 0x0; content that does not fit is cut, never wrapped past r.
//
// DrawFrame composes a whole screen: header line, tab bar, the current view,
// command/message line, status line, and the help or debug overlays.
#pragma once

#include "console/collect/snapshot.h"
#include "console/draw/grid.h"
#include "console/draw/view_state.h"

namespace sy::console {

Grid DrawOverview(const Snapshot& s, const ViewState& v, Rect r);
// The step shown is v.kernel_step (-1: the newest kept) moved by
// v.kernel_nav kept steps; tables per v.kernel_table.
Grid DrawKernels(const Snapshot& s, const ViewState& v, Rect r);
// The step DrawKernels shows (-1: none kept, or the pinned one is gone).
int64_t SelectedKernelStep(const Snapshot& s, const ViewState& v);
// Folds v.kernel_nav into v.kernel_step against the steps `s` keeps, so a
// step picked with ',' stays put while newer steps arrive (the UI loop calls
// it before each frame). Moving past the newest follows again (-1).
void ResolveKernelStep(const Snapshot& s, ViewState& v);
Grid DrawMemory(const Snapshot& s, const ViewState& v, Rect r);
// Scrolls (v.experts_scroll rows) when its sections do not fit; the title
// row stays and the last row tells the position.
Grid DrawExperts(const Snapshot& s, const ViewState& v, Rect r);
// The largest useful v.experts_scroll for a frame of width x height.
int ExpertsMaxScroll(const Snapshot& s, const ViewState& v, int width, int height);
// Lines passing v.log_kind and v.log_filter (LogLineMatches), newest at the
// bottom; the title names the filters.
Grid DrawLog(const Snapshot& s, const ViewState& v, Rect r);
// True when `line` is of `kind` and contains `filter` (case-insensitive;
// "" matches all).
bool LogLineMatches(const LogLine& line, LogKind kind, const std::string& filter);
// Running and waiting requests of the latest `requests` snapshot with their
// progress, then the most recent finished requests.
Grid DrawRequests(const Snapshot& s, const ViewState& v, Rect r);
// Every key of KeyTable() (replay keys only when v.replay) and every command.
Grid DrawHelp(const ViewState& v, Rect r);
// Rows DrawHelp needs at width w to show everything (border included): the
// full layout (keys in columns, each command with its help) when that takes
// at most max_h rows, else the compact one (keys flowing along rows,
// commands by usage only; the command line shows their help as typed).
// DrawHelp picks the same layout for its Rect's height.
int HelpHeight(const ViewState& v, int w, int max_h = 1 << 30);

// Top line: run id, model, devices, layout, RUNNING/PAUSED, trace level
// (or the replay clock).
Grid DrawHeader(const Snapshot& s, const ViewState& v, int width);
// Bottom line: connection state, messages, gaps, store drops, db or "replay".
Grid DrawStatus(const Snapshot& s, const ViewState& v, int width);

// The whole screen. Below 40x8 it only says the terminal is too small.
Grid DrawFrame(const Snapshot& s, const ViewState& v, int width, int height);
inline constexpr int kMinWidth = 40;
inline constexpr int kMinHeight = 8;

}  // namespace sy::console
