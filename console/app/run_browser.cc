#include "console/app/run_browser.h"

#include <algorithm>
#include <filesystem>

#include "console/draw/grid.h"
#include "store/tool/inventory.h"
#include "store/tool/store_file.h"

namespace sy::console {
namespace {

constexpr int kPage = 10;

BrowserRow RowOf(const store::tool::RunSummary& s) {
  const store::RunInfo& r = s.info;
  BrowserRow row;
  row.id = r.id;
  row.started =
      store::tool::FormatUnixMs(r.started_unix_ms > 0 ? r.started_unix_ms : r.created_unix_ms);
  if (row.started.size() > 16) row.started.resize(16);  // minutes are enough here
  row.duration = store::tool::FormatDuration(r.duration_us);
  row.model = r.model;
  row.devices = r.devices;
  for (const std::string& l : s.layouts) row.layouts += (row.layouts.empty() ? "" : ">") + l;
  if (row.layouts.empty()) row.layouts = "-";
  row.switches = s.switches;
  row.rebalances = s.rebalances;
  row.steps = r.steps;
  row.spans = r.spans;
  row.status = s.ended_normally() ? "ended" : r.status;
  return row;
}

}  // namespace

Result<BrowserState> LoadBrowser(const std::string& path) {
  ASSIGN_OR_RETURN(store::tool::StoreFile f,
                   store::tool::StoreFile::Open(path, store::tool::StoreFile::kRead));
  ASSIGN_OR_RETURN(std::vector<store::tool::RunSummary> runs,
                   store::tool::ListRunSummaries(f.db()));
  BrowserState s;
  s.path = path;
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(path, ec);
  s.file_bytes = ec ? 0 : static_cast<int64_t>(bytes);
  for (const auto& r : runs) s.rows.push_back(RowOf(r));
  return s;
}

BrowserOutcome HandleBrowserKey(BrowserState& s, const Key& key) {
  BrowserOutcome out;
  const int n = static_cast<int>(BrowserVisible(s).size());
  if (s.filtering) {
    if (key.name == "Enter") {
      s.filtering = false;
    } else if (key.name == "Esc") {
      s.filtering = false;
      s.filter.clear();
    } else if (key.name == "Backspace") {
      std::u32string u = DecodeUtf8(s.filter);
      if (!u.empty()) u.pop_back();
      s.filter = EncodeUtf8(u);
    } else if (key.name == "Space") {
      s.filter += ' ';
    } else if (DecodeUtf8(key.name).size() == 1) {
      s.filter += key.name;
    }
    s.selected = 0;
    return out;
  }
  s.message.clear();
  if (key.name == "q") {
    out.quit = true;
  } else if (key.name == "Esc") {
    if (s.filter.empty()) {
      out.quit = true;
    } else {
      s.filter.clear();
      s.selected = 0;
    }
  } else if (key.name == "/") {
    s.filtering = true;
  } else if (key.name == "Up") {
    s.selected = std::max(0, std::min(s.selected, n - 1) - 1);
  } else if (key.name == "Down") {
    s.selected = std::max(0, std::min(s.selected + 1, n - 1));
  } else if (key.name == "PageUp") {
    s.selected = std::max(0, s.selected - kPage);
  } else if (key.name == "PageDown") {
    s.selected = std::max(0, std::min(s.selected + kPage, n - 1));
  } else if (key.name == "Home") {
    s.selected = 0;
  } else if (key.name == "End") {
    s.selected = std::max(0, n - 1);
  } else if (key.name == "Enter") {
    const std::vector<int> visible = BrowserVisible(s);
    if (!visible.empty()) {
      out.open = s.rows[visible[std::clamp(s.selected, 0, n - 1)]].id;
    }
  }
  return out;
}

}  // namespace sy::console
