// Golden snapshots of whole frames: every view, the help overlay, the replay
// compare overlay, the run browser and the several-engine frames, at 80x24
// and 200x60, in four states
// (empty: nothing received; live; disconnected: heartbeats stopped 12.5 s
// ago; replay: a stored run paused at its end), from the deterministic run
// of snapshot_fixture.h. Each frame is compared, trailing spaces stripped
// per line, with tests/console/draw/golden/<view>-<state>-<W>x<H>.txt; a
// mismatch names the file and shows the first differing lines.
//
// To accept a deliberate change of the drawing, regenerate the goldens and
// review them (git diff) before committing:
//
//   SY_UPDATE_GOLDEN=1 ./build/tests/console/console_draw_snapshot_test
//
// Every frame is also checked for what a byte comparison cannot tell: its
// size, the header and status lines where they belong, the state's wording,
// and no "nan" or "inf" anywhere.
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "console/draw/browser.h"
#include "console/draw/engines.h"
#include "console/draw/views.h"
#include "tests/console/draw/snapshot_fixture.h"

#ifndef SY_GOLDEN_DIR
#error "SY_GOLDEN_DIR must name tests/console/draw/golden (set in tests/console/CMakeLists.txt)"
#endif

namespace sy::console {
namespace {

namespace fs = std::filesystem;
using testing::SnapState;

constexpr int kSizes[][2] = {{80, 24}, {200, 60}};

struct StateCase {
  SnapState state;
  const char* name;
  const char* header;  // expected in the header line
  const char* status;  // the status line starts with it
};

constexpr StateCase kStates[] = {
    {SnapState::kEmpty, "empty", "WAITING", " ● waiting"},
    {SnapState::kLive, "live", "RUNNING", " ● live"},
    {SnapState::kLost, "disconnected", "LOST", " ● lost (12.5s since heartbeat)"},
    {SnapState::kReplay, "replay", "REPLAY 29.9s/30.0s x2 PAUSED", " ● replay"},
};

bool Updating() {
  const char* u = std::getenv("SY_UPDATE_GOLDEN");
  return u != nullptr && std::string(u) == "1";
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::string StripRight(std::string s) {
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

// The frame as stored: rows with trailing spaces stripped, each ended by '\n'.
std::string GoldenText(const Grid& g) {
  std::string out;
  for (int y = 0; y < g.height(); ++y) out += StripRight(g.Row(y)) + "\n";
  return out;
}

// True when `word` occurs in `text` not as part of a longer word.
bool HasWord(const std::string& text, const std::string& word) {
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) {
    const bool left = at == 0 || !std::isalpha(static_cast<unsigned char>(text[at - 1]));
    const size_t end = at + word.size();
    const bool right = end >= text.size() || !std::isalpha(static_cast<unsigned char>(text[end]));
    if (left && right) return true;
  }
  return false;
}

// "--- golden" / "+++ rendered" and, from two lines before the first
// difference, up to eight lines: ' ' equal, '-' golden, '+' rendered.
std::string ShortDiff(const std::string& path, const std::string& want, const std::string& got) {
  const std::vector<std::string> a = Lines(want), b = Lines(got);
  size_t first = 0;
  while (first < a.size() && first < b.size() && a[first] == b[first]) ++first;
  const size_t from = first >= 2 ? first - 2 : 0;
  std::string out =
      "--- " + path + "\n+++ rendered\n@@ line " + std::to_string(first + 1) + " @@\n";
  for (size_t i = from; i < from + 8 && (i < a.size() || i < b.size()); ++i) {
    if (i < a.size() && i < b.size() && a[i] == b[i]) {
      out += " " + a[i] + "\n";
      continue;
    }
    if (i < a.size()) out += "-" + a[i] + "\n";
    if (i < b.size()) out += "+" + b[i] + "\n";
  }
  return out;
}

// Compares `g` with its golden file, or writes the file when updating.
void CheckGolden(const std::string& name, const Grid& g) {
  const fs::path path = fs::path(SY_GOLDEN_DIR) / (name + ".txt");
  const std::string got = GoldenText(g);
  if (Updating()) {
    fs::create_directories(path.parent_path());
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << got;
    ASSERT_TRUE(out.good()) << "cannot write " << path;
    std::printf("SY_UPDATE_GOLDEN=1: wrote %s\n", path.c_str());
    return;
  }
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in.good()) << "missing golden " << path
                         << " (run with SY_UPDATE_GOLDEN=1 to create it)";
  std::stringstream want;
  want << in.rdbuf();
  // Stored files may have lost trailing spaces or gained them in an editor.
  std::string want_text;
  for (const std::string& line : Lines(want.str())) want_text += StripRight(line) + "\n";
  // Not EXPECT_EQ: it would print both whole frames, escaped.
  if (want_text != got) {
    ADD_FAILURE() << "frame differs from golden " << path << "\n"
                  << ShortDiff(path.string(), want_text, got)
                  << "(if the change is intended: SY_UPDATE_GOLDEN=1, then review the diff)";
  }
}

// Invariants of every frame: exactly h rows of exactly w columns (wide
// characters counted twice), the status line last, no "nan"/"inf".
void CheckShape(const Grid& g, int w, int h, const StateCase& st) {
  ASSERT_EQ(g.width(), w);
  ASSERT_EQ(g.height(), h);
  const std::vector<std::string> lines = Lines(g.ToString());
  ASSERT_EQ(static_cast<int>(lines.size()), h);
  for (int y = 0; y < h; ++y) {
    EXPECT_EQ(DisplayWidth(g.Row(y)), w) << "row " << y + 1 << ": " << g.Row(y);
    EXPECT_LE(DisplayWidth(StripRight(lines[y])), w) << "row " << y + 1;
    EXPECT_FALSE(HasWord(lines[y], "nan") || HasWord(lines[y], "inf") || HasWord(lines[y], "-nan"))
        << "row " << y + 1 << ": " << lines[y];
  }
  EXPECT_EQ(lines[h - 1].rfind(st.status, 0), 0u) << "status line: " << lines[h - 1];
}

// A frame with no overlay: header on line 1 with the state, tabs on line 2
// with the view active, the command line above the status line.
void CheckPlainFrame(const Grid& g, const StateCase& st, View view) {
  const std::string header = g.Row(0), tabs = g.Row(1);
  EXPECT_EQ(header.rfind(" switchyard  ", 0), 0u) << header;
  EXPECT_NE(header.find(st.header), std::string::npos) << header;
  EXPECT_EQ(tabs.rfind(" 1 Overview ", 0), 0u) << tabs;
  EXPECT_NE(tabs.find(std::string(ViewTitle(view)) + " "), std::string::npos) << tabs;
  EXPECT_EQ(g.Row(g.height() - 2).rfind("press : for commands", 0), 0u);
}

std::string Name(const std::string& view, const std::string& state, int w, int h) {
  return view + "-" + state + "-" + std::to_string(w) + "x" + std::to_string(h);
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Every view and the help overlay of one state, at both sizes.
void CheckState(const StateCase& st) {
  const Snapshot s = testing::SnapStateSnapshot(st.state);
  for (const auto& size : kSizes) {
    const int w = size[0], h = size[1];
    for (int i = 0; i < kViewCount; ++i) {
      ViewState v;
      v.view = static_cast<View>(i);
      v.replay = st.state == SnapState::kReplay;
      const std::string name = Name(Lower(ViewTitle(v.view)), st.name, w, h);
      SCOPED_TRACE(name);
      const Grid g = DrawFrame(s, v, w, h);
      CheckShape(g, w, h, st);
      CheckPlainFrame(g, st, v.view);
      CheckGolden(name, g);
    }
    ViewState v;
    v.replay = st.state == SnapState::kReplay;
    v.help = true;
    const std::string name = Name("help", st.name, w, h);
    SCOPED_TRACE(name);
    const Grid g = DrawFrame(s, v, w, h);
    CheckShape(g, w, h, st);
    EXPECT_NE(g.ToString().find("Commands"), std::string::npos);
    EXPECT_EQ(g.ToString().find("play / pause") != std::string::npos, v.replay);
    CheckGolden(name, g);
  }
}

TEST(ConsoleDrawSnapshot, EmptyBeforeAnyMessage) {
  CheckState(kStates[0]);
  // Nothing received: the Overview says what it waits for.
  const Grid g = DrawFrame(testing::SnapStateSnapshot(SnapState::kEmpty), ViewState{}, 80, 24);
  EXPECT_NE(g.ToString().find("waiting for the engine's meta message"), std::string::npos);
}

TEST(ConsoleDrawSnapshot, Live) { CheckState(kStates[1]); }

TEST(ConsoleDrawSnapshot, Disconnected) { CheckState(kStates[2]); }

TEST(ConsoleDrawSnapshot, Replay) { CheckState(kStates[3]); }

// The replay-only frames: the `:compare` overlay over the Overview, and the
// run browser (a frame of its own) with runs and with an empty store.
void CheckReplayPanels() {
  const Snapshot s = testing::SnapStateSnapshot(SnapState::kReplay);
  const auto comparison = std::make_shared<const Comparison>(testing::SnapComparison());
  const BrowserState browser = testing::SnapBrowser();
  BrowserState empty;
  empty.path = testing::kSnapDb;
  empty.file_bytes = 4096;
  for (const auto& size : kSizes) {
    const int w = size[0], h = size[1];
    {
      ViewState v;
      v.replay = true;
      v.compare = true;
      v.comparison = comparison;
      const std::string name = Name("compare", "replay", w, h);
      SCOPED_TRACE(name);
      const Grid g = DrawFrame(s, v, w, h);
      CheckShape(g, w, h, kStates[3]);
      EXPECT_NE(g.ToString().find("run-snap 6.0s-16.0s"), std::string::npos);
      CheckGolden(name, g);
    }
    using Case = std::pair<const char*, const BrowserState*>;
    for (const auto& [state, b] : {Case{"replay", &browser}, Case{"empty", &empty}}) {
      const std::string name = Name("browser", state, w, h);
      SCOPED_TRACE(name);
      const Grid g = DrawBrowser(*b, w, h);
      ASSERT_EQ(g.width(), w);
      ASSERT_EQ(g.height(), h);
      for (int y = 0; y < h; ++y) EXPECT_EQ(DisplayWidth(g.Row(y)), w);
      EXPECT_EQ(g.Row(0).rfind(" Runs in ", 0), 0u) << g.Row(0);
      EXPECT_NE(g.Row(1).find("RUN"), std::string::npos);
      CheckGolden(name, g);
    }
  }
}

TEST(ConsoleDrawSnapshot, ReplayCompareAndRunBrowser) { CheckReplayPanels(); }

// Several engines (moe-console --connect twice): every view of "all" (the
// engine strip above per-engine tables, merged or side-by-side views), and
// one engine selected. The two are the live and the disconnected fixture.
constexpr const char* kEngineNames[] = {"prefill-a", "decode-b"};

void CheckEngineFrame(const std::vector<Snapshot>& snaps, const ViewState& v, int w, int h,
                      const std::string& name) {
  SCOPED_TRACE(name);
  const Grid g = DrawEngineFrame(snaps, {kEngineNames[0], kEngineNames[1]}, v, w, h);
  ASSERT_EQ(g.width(), w);
  ASSERT_EQ(g.height(), h);
  for (int y = 0; y < h; ++y) {
    EXPECT_EQ(DisplayWidth(g.Row(y)), w) << "row " << y + 1;
    EXPECT_FALSE(HasWord(g.Row(y), "nan") || HasWord(g.Row(y), "inf")) << g.Row(y);
  }
  EXPECT_NE(g.Row(0).find(kEngineNames[0]), std::string::npos) << g.Row(0);
  EXPECT_NE(g.Row(0).find(kEngineNames[1]), std::string::npos) << g.Row(0);
  CheckGolden(name, g);
}

TEST(ConsoleDrawSnapshot, SeveralEngines) {
  const std::vector<Snapshot> snaps = {testing::SnapStateSnapshot(SnapState::kLive),
                                       testing::SnapStateSnapshot(SnapState::kLost)};
  for (const auto& size : kSizes) {
    const int w = size[0], h = size[1];
    for (int i = 0; i < kViewCount; ++i) {
      ViewState v;
      v.view = static_cast<View>(i);
      v.engine_count = 2;
      v.engine = -1;
      CheckEngineFrame(snaps, v, w, h,
                       Name("engines-all-" + Lower(ViewTitle(v.view)), "live", w, h));
    }
    ViewState one;
    one.engine_count = 2;
    one.engine = 1;
    CheckEngineFrame(snaps, one, w, h, Name("engines-b-overview", "live", w, h));
  }
}

// Every golden file belongs to a frame this test draws, so a renamed view
// or a dropped case leaves no stale file behind.
TEST(ConsoleDrawSnapshot, NoStaleGoldens) {
  if (Updating()) GTEST_SKIP() << "updating";
  std::set<std::string> want;
  for (const StateCase& st : kStates) {
    for (const auto& size : kSizes) {
      for (int i = 0; i < kViewCount; ++i) {
        want.insert(Name(Lower(ViewTitle(static_cast<View>(i))), st.name, size[0], size[1]) +
                    ".txt");
      }
      want.insert(Name("help", st.name, size[0], size[1]) + ".txt");
    }
  }
  for (const auto& size : kSizes) {
    want.insert(Name("compare", "replay", size[0], size[1]) + ".txt");
    want.insert(Name("browser", "replay", size[0], size[1]) + ".txt");
    want.insert(Name("browser", "empty", size[0], size[1]) + ".txt");
    for (int i = 0; i < kViewCount; ++i) {
      want.insert(
          Name("engines-all-" + Lower(ViewTitle(static_cast<View>(i))), "live", size[0], size[1]) +
          ".txt");
    }
    want.insert(Name("engines-b-overview", "live", size[0], size[1]) + ".txt");
  }
  std::set<std::string> files;
  for (const auto& e : fs::directory_iterator(SY_GOLDEN_DIR)) {
    files.insert(e.path().filename().string());
  }
  for (const std::string& f : files) {
    EXPECT_TRUE(want.count(f)) << "stale golden (no frame draws it): " << SY_GOLDEN_DIR << "/" << f;
  }
  for (const std::string& f : want) {
    EXPECT_TRUE(files.count(f)) << "missing golden: " << SY_GOLDEN_DIR << "/" << f;
  }
  EXPECT_EQ(want.size(), 76u);
}

}  // namespace
}  // namespace sy::console
