// Names of the ViewState choices, as the views' titles and the help show them.
#include "console/draw/view_state.h"

namespace sy::console {

const char* RequestSortName(RequestSort s) {
  switch (s) {
    case RequestSort::kId:
      return "id";
    case RequestSort::kState:
      return "state";
    case RequestSort::kProgress:
      return "progress";
    case RequestSort::kTtft:
      return "ttft";
    case RequestSort::kTpot:
      return "tpot";
    case RequestSort::kAge:
      return "age";
  }
  return "?";
}

const char* LogKindName(LogKind k) {
  switch (k) {
    case LogKind::kAll:
      return "all";
    case LogKind::kSwitch:
      return "switch";
    case LogKind::kRebalance:
      return "rebalance";
    case LogKind::kCommand:
      return "command";
    case LogKind::kError:
      return "error";
  }
  return "?";
}

const char* KernelTableName(KernelTable t) {
  switch (t) {
    case KernelTable::kTop:
      return "top";
    case KernelTable::kLayer:
      return "layer";
    case KernelTable::kKind:
      return "kind";
  }
  return "?";
}

}  // namespace sy::console
