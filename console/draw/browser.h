// File: console/draw/browser.h
//
// The replay run browser (`moe-console --replay FILE` without --run, or
// --replay-browse): a table of the store's runs, one selected, with a `/`
// filter. BrowserState is a value the app fills from the store
// (console/app/run_browser.h) and changes key by key; DrawBrowser is a pure
// function of it, tested headless like every panel.
//
// Thread-safety: values and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "console/draw/grid.h"

namespace sy::console {

// One stored run, already formatted (times local, durations engine time).
struct BrowserRow {
  std::string id;
  std::string started;   // "2026-01-02 10:11" (local)
  std::string duration;  // "3m05s"
  std::string model;
  int devices = 0;
  std::string layouts;  // "EP>TP", "-" when unknown
  int64_t switches = 0;
  int64_t rebalances = 0;
  int64_t steps = 0;
  int64_t spans = 0;   // the run's size in the store: its largest table
  std::string status;  // "ended", "abnormal", "interrupted", "live"
};

struct BrowserState {
  std::string path;  // the store file
  int64_t file_bytes = 0;
  std::vector<BrowserRow> rows;  // newest first
  int selected = 0;              // index into Visible(), clamped when drawn
  std::string filter;            // case-insensitive substring of id, model, layouts, status
  bool filtering = false;        // the `/` line is being edited
  std::string message;           // an error opening a run, shown on the last line
};

// Indices into rows that pass the filter, in order.
std::vector<int> BrowserVisible(const BrowserState& s);

// Title, column header, the visible rows (the selected one reversed,
// scrolled to stay on screen), and a key hint / filter / message line.
Grid DrawBrowser(const BrowserState& s, int width, int height);

}  // namespace sy::console
