// File: console/app/run_browser.h
//
// The run browser's data and keys: LoadBrowser fills a BrowserState
// (console/draw/browser.h) from the store with the same per-run summary
// `moe-store list` prints (store/tool/inventory.h: layouts, switches,
// rebalances), and HandleBrowserKey moves the selection, edits the `/`
// filter, and says when a run was chosen or the user quit. No terminal
// here: main.cc draws and reads keys.
//
// Thread-safety: functions over values.
#pragma once

#include <optional>
#include <string>

#include "base/status.h"
#include "console/draw/browser.h"
#include "console/input/keymap.h"

namespace sy::console {

// NOT_FOUND for a missing file; the store's errors otherwise.
Result<BrowserState> LoadBrowser(const std::string& path);

struct BrowserOutcome {
  bool quit = false;
  std::optional<std::string> open;  // run id chosen with Enter
};

// Up/Down/PageUp/PageDown/Home/End select; Enter opens the selected run; `/`
// starts the filter (printable keys type, Backspace erases, Enter keeps it,
// Esc clears it); Esc clears a kept filter, else quits, as does q.
BrowserOutcome HandleBrowserKey(BrowserState& s, const Key& key);

}  // namespace sy::console
