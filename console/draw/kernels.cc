// Kernels panel: one step's spans as one timeline lane per device (compute
// and comm drawn differently, the device's exposed communication at the
// right of its lane), the totals of compute, comm, hidden and exposed comm,
// then one of three tables (v.kernel_table): the top kernels over the kept
// steps, the step by layer, or the step by kind.
//
// The step is one the Snapshot keeps (s.span_steps): the newest unless the
// user pinned another (',' / '.', see ResolveKernelStep). Lanes show the
// whole step or, zoomed, 1/2^zoom of it.
#include <algorithm>
#include <string>
#include <vector>

#include "console/collect/kernel_trace.h"
#include "console/draw/format.h"
#include "console/draw/kernels_sections.h"
#include "console/draw/theme.h"
#include "console/draw/views.h"

namespace sy::console {
namespace {

constexpr int kLaneLabelW = 6;  // "dev0 │"
constexpr int kStatW = 18;      // " exp  200us 100.0%"
constexpr int kMaxZoom = 10;

// The kept steps, oldest first; a Snapshot made by hand with only
// spans/spans_step counts as keeping that one step.
std::vector<const StepSpans*> KeptSteps(const Snapshot& s, StepSpans& scratch) {
  std::vector<const StepSpans*> out;
  for (const auto& p : s.span_steps) out.push_back(p.get());
  if (out.empty() && !s.spans.empty()) {
    scratch.step = s.spans_step;
    scratch.spans = s.spans;
    out.push_back(&scratch);
  }
  return out;
}

struct Selection {
  int index = -1;  // into the kept steps; -1: none to show
  bool following = true;
  bool gone = false;  // pinned step no longer kept
};

Selection Select(const std::vector<const StepSpans*>& kept, int64_t pin, int nav) {
  Selection sel;
  const int n = static_cast<int>(kept.size());
  if (n == 0) return sel;
  int idx = n - 1;
  if (pin >= 0) {
    sel.following = false;
    // The pinned step, or the oldest kept one after it.
    idx = n - 1;
    bool exact = false;
    for (int i = 0; i < n; ++i) {
      if (kept[i]->step >= pin) {
        idx = i;
        exact = kept[i]->step == pin;
        break;
      }
    }
    if (!exact && nav == 0) {
      sel.gone = true;
      return sel;
    }
  }
  if (nav != 0) {
    const int target = idx + nav;
    if (target >= n) {
      sel.following = true;
      idx = n - 1;
    } else {
      sel.following = false;
      idx = std::max(0, target);
    }
  }
  sel.index = idx;
  return sel;
}

// Draws the lanes of `step` in [w0, w1); returns the next free row.
int DrawLanes(Grid& g, const StepSpans& step, int64_t w0, int64_t w1, int y, int max_rows) {
  const int lane_w = g.width() - kLaneLabelW - 1 - kStatW;
  if (lane_w <= 0) return y;
  int devices = 0;
  for (const auto& sp : step.spans) devices = std::max(devices, sp.device + 1);
  const int64_t span_us = std::max<int64_t>(1, w1 - w0);
  const std::vector<CommOverlap> overlap = CommOverlapPerDevice(step.spans);
  // Per cell: which kinds cover it, and the compute kernel that covers the
  // most of it (for its colour).
  struct CellUse {
    bool compute = false;
    bool comm = false;
    int64_t best = 0;
    std::string name;
  };
  const int lanes = std::min(devices, max_rows);
  for (int d = 0; d < lanes; ++d) {
    std::vector<CellUse> cells(static_cast<size_t>(lane_w));
    for (const auto& sp : step.spans) {
      if (sp.device != d) continue;
      const int64_t a = std::max(sp.start_us, w0) - w0;
      const int64_t b = std::min(sp.start_us + sp.dur_us, w1) - w0;
      if (b < a || (b == a && sp.dur_us > 0)) continue;  // outside the window
      int c0 = static_cast<int>(a * lane_w / span_us);
      int c1 = static_cast<int>((b * lane_w + span_us - 1) / span_us);
      c0 = std::clamp(c0, 0, lane_w - 1);
      c1 = std::clamp(std::max(c1, c0 + 1), 1, lane_w);
      for (int c = c0; c < c1; ++c) {
        CellUse& u = cells[c];
        if (sp.kind == "comm") {
          u.comm = true;
        } else {
          u.compute = true;
          if (sp.dur_us >= u.best) {
            u.best = sp.dur_us;
            u.name = sp.name;
          }
        }
      }
    }
    g.Put(0, y, "dev" + std::to_string(d), theme::kLabel);
    g.Put(kLaneLabelW - 1, y, "│", theme::kDimmed);
    for (int c = 0; c < lane_w; ++c) {
      const CellUse& u = cells[c];
      char32_t ch = U'·';
      Style st = theme::kDimmed;
      if (u.compute && u.comm) {
        ch = U'▓';
        st = theme::kComm;
      } else if (u.comm) {
        ch = U'≈';
        st = theme::kComm;
      } else if (u.compute) {
        ch = U'█';
        st = theme::ForKernel(u.name);
      }
      g.PutChar(kLaneLabelW + c, y, ch, st);
    }
    int x = g.Put(kLaneLabelW + lane_w, y, "│", theme::kDimmed);
    // Exposed comm of the whole step on this device, and its part of the
    // device's comm.
    const auto o = std::find_if(overlap.begin(), overlap.end(),
                                [&](const CommOverlap& c) { return c.device == d; });
    if (o != overlap.end() && o->comm_us > 0) {
      x = g.Put(x, y, " exp ", theme::kDimmed);
      const double f = static_cast<double>(o->exposed_us) / static_cast<double>(o->comm_us);
      g.Put(x, y, PadLeft(FormatUs(o->exposed_us), 6) + PadLeft(FormatPercent(f), 7),
            o->exposed_us > 0 ? theme::kWarn : theme::kGood);
    }
    ++y;
  }
  if (lanes < devices) {
    g.Put(0, y++, "… " + std::to_string(devices - lanes) + " more devices", theme::kDimmed);
  }
  return y;
}

}  // namespace

int64_t SelectedKernelStep(const Snapshot& s, const ViewState& v) {
  StepSpans scratch;
  const std::vector<const StepSpans*> kept = KeptSteps(s, scratch);
  const Selection sel = Select(kept, v.kernel_step, v.kernel_nav);
  return sel.index >= 0 ? kept[sel.index]->step : -1;
}

void ResolveKernelStep(const Snapshot& s, ViewState& v) {
  if (v.kernel_nav == 0) return;
  StepSpans scratch;
  const std::vector<const StepSpans*> kept = KeptSteps(s, scratch);
  const Selection sel = Select(kept, v.kernel_step, v.kernel_nav);
  if (sel.index < 0) return;  // nothing kept yet: keep the presses
  v.kernel_step = sel.following ? -1 : kept[sel.index]->step;
  v.kernel_nav = 0;
}

Grid DrawKernels(const Snapshot& s, const ViewState& v, Rect r) {
  Grid g(r.w, r.h);
  if (r.h <= 0) return g;
  StepSpans scratch;
  const std::vector<const StepSpans*> kept = KeptSteps(s, scratch);
  const Selection sel = Select(kept, v.kernel_step, v.kernel_nav);
  // Leave at least 5 rows (title, header, three rows) for the table.
  const int lane_rows = std::max(1, r.h - 8);
  int y = 0;
  const StepSpans* step = sel.index >= 0 ? kept[sel.index] : nullptr;
  if (sel.gone) {
    g.Put(0, y++,
          "Step " + std::to_string(v.kernel_step) + " is no longer kept (kept " +
              std::to_string(kept.front()->step) + ".." + std::to_string(kept.back()->step) +
              "): ',' '.' pick one, f follows the newest.",
          theme::kWarn);
  } else if (step == nullptr) {
    g.Put(0, y++, "No spans for the latest step: per-kernel timelines need ':trace full'.",
          theme::kDimmed);
  } else {
    int64_t t0 = step->spans.front().start_us, t1 = t0;
    for (const auto& sp : step->spans) {
      t0 = std::min(t0, sp.start_us);
      t1 = std::max(t1, sp.start_us + sp.dur_us);
    }
    const int64_t len = std::max<int64_t>(1, t1 - t0);
    // Zoom: a window of len / 2^zoom, starting `pan` half-windows in.
    const int zoom = std::clamp(v.kernel_zoom, 0, kMaxZoom);
    const int64_t halves = int64_t{2} << zoom;
    const int64_t pan = std::clamp<int64_t>(v.kernel_pan, 0, halves - 2);
    const int64_t w0 = t0 + len * pan / halves;
    const int64_t w1 = zoom == 0 ? t1 : t0 + len * (pan + 2) / halves;
    std::string title = "Step " + std::to_string(step->step) + " (" +
                        (sel.following ? "newest" : std::to_string(sel.index + 1)) + " of " +
                        std::to_string(kept.size()) + " kept), " + FormatUs(len);
    if (zoom > 0) {
      title += ", zoom x" + std::to_string(1 << zoom) + " " + FormatUs(w0 - t0) + "-" +
               FormatUs(w1 - t0);
    }
    int x = g.Put(0, y, title, theme::kTitle);
    x = g.Put(x, y, "  █", theme::ForKernel("attn"));
    x = g.Put(x, y, " compute ");
    x = g.Put(x, y, "≈", theme::kComm);
    x = g.Put(x, y, " comm ");
    x = g.Put(x, y, "▓", theme::kComm);
    g.Put(x, y++, " both");
    y = DrawLanes(g, *step, w0, w1, y, lane_rows);
    const CommOverlap total = CommOverlapTotal(CommOverlapPerDevice(step->spans));
    if (y < r.h) {
      const double f = total.comm_us > 0 ? static_cast<double>(total.exposed_us) /
                                               static_cast<double>(total.comm_us)
                                         : 0;
      x = g.Put(0, y, "sum: compute " + FormatUs(total.compute_us) + "  ", theme::kNormal);
      x = g.Put(x, y, "comm " + FormatUs(total.comm_us), theme::kComm);
      x = g.Put(x, y, "  hidden " + FormatUs(total.hidden_us) + "  ", theme::kNormal);
      g.Put(x, y++, "exposed " + FormatUs(total.exposed_us) + " (" + FormatPercent(f) + ")",
            total.exposed_us > 0 ? theme::kWarn : theme::kGood);
    }
  }
  ++y;
  const std::vector<telemetry::Span> none;
  const std::vector<telemetry::Span>& spans = step != nullptr ? step->spans : none;
  const int64_t step_no = step != nullptr ? step->step : -1;
  switch (v.kernel_table) {
    case KernelTable::kTop:
      kernels::DrawTopTable(g, s, y, r.h);
      break;
    case KernelTable::kLayer:
      kernels::DrawLayerTable(g, step_no, spans, y, r.h);
      break;
    case KernelTable::kKind:
      kernels::DrawKindTable(g, step_no, spans, y, r.h);
      break;
  }
  return g;
}

}  // namespace sy::console
