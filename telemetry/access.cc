#include "telemetry/access.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>
#include <utility>

#include "telemetry/curve.h"

namespace sy::telemetry {

namespace {

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

std::vector<std::string_view> Words(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    size_t j = i;
    while (j < line.size() && line[j] != ' ' && line[j] != '\t' && line[j] != '\r') ++j;
    if (j > i) out.push_back(line.substr(i, j - i));
    i = j;
  }
  return out;
}

}  // namespace

std::string_view RoleName(Role role) { return role == Role::kOperator ? "operator" : "observer"; }

Result<Role> ParseRole(std::string_view word) {
  if (word == "operator") return Role::kOperator;
  if (word == "observer") return Role::kObserver;
  return InvalidArgument("unknown role '" + std::string(word) +
                         "' (expected \"observer\" or \"operator\")");
}

Result<AllowList> AllowList::Parse(std::string_view text, std::string_view source) {
  AllowList list;
  int line_no = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    const std::vector<std::string_view> w = Words(line);
    if (w.empty() || w[0][0] == '#') continue;
    const std::string where = std::string(source) + ":" + std::to_string(line_no);
    if (w.size() < 2 || w.size() > 3) {
      return InvalidArgument(where + ": expected 'ROLE PUBLIC-KEY [NAME]', got " +
                             std::to_string(w.size()) + " words");
    }
    Result<Role> role = ParseRole(w[0]);
    if (!role.ok()) return role.status().WithContext(where);
    RETURN_IF_ERROR(ValidateZ85Key(w[1], "public key").WithContext(where));
    AuthorizedKey key{.role = *role, .public_key = std::string(w[1]), .name = ""};
    if (w.size() == 3) {
      if (!std::all_of(w[2].begin(), w[2].end(), IsNameChar)) {
        return InvalidArgument(where + ": name '" + std::string(w[2]) +
                               "' may only hold letters, digits, '.', '_' and '-'");
      }
      key.name = std::string(w[2]);
    } else {
      key.name = key.public_key.substr(0, 8);
    }
    if (list.Find(key.public_key) != nullptr) {
      return InvalidArgument(where + ": key " + key.public_key + " is listed twice");
    }
    list.keys_.push_back(std::move(key));
  }
  return list;
}

Result<AllowList> AllowList::Load(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return NotFound("authorized keys file '" + path + "' does not exist");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Unavailable("cannot read authorized keys file '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  return Parse(text.str(), path);
}

const AuthorizedKey* AllowList::Find(std::string_view public_key) const {
  for (const AuthorizedKey& k : keys_) {
    if (k.public_key == public_key) return &k;
  }
  return nullptr;
}

std::string UserIdFor(const AuthorizedKey& key) {
  return std::string(RoleName(key.role)) + ":" + key.name;
}

std::optional<Role> RoleOfUserId(std::string_view user_id) {
  const size_t colon = user_id.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  Result<Role> r = ParseRole(user_id.substr(0, colon));
  if (!r.ok()) return std::nullopt;
  return *r;
}

bool IsReadOnly(const CommandRequest& request) {
  const std::string& cmd = request.cmd;
  const nlohmann::json& args = request.args;
  if (cmd == "describe" || cmd == "status") return true;
  if (cmd == "expert_stats") return !args.contains("path");
  if (cmd == "rebalance") {
    auto it = args.find("dry_run");
    return it != args.end() && it->is_boolean() && it->get<bool>() &&
           !args.contains("inject_fault");
  }
  if (cmd == "policy") return args.empty();
  return false;
}

Status CheckPermission(Role role, const CommandRequest& request) {
  if (role == Role::kOperator || IsReadOnly(request)) return Status::Ok();
  return PermissionDenied("'" + request.cmd + "' changes the engine and needs the operator role; " +
                          "this key is an observer (read-only: describe, status, expert_stats " +
                          "without path, rebalance with dry_run, policy without arguments)");
}

Status Authorize(bool secured, const CommandRequest& request) {
  if (!secured) return Status::Ok();
  std::optional<Role> role = RoleOfUserId(request.user_id);
  if (!role) {
    return PermissionDenied("'" + request.cmd + "' from a peer without a role (User-Id '" +
                            request.user_id + "')");
  }
  return CheckPermission(*role, request);
}

bool RefusalLog::Push(AuthRefusal refusal, int64_t now_ms) {
  std::lock_guard lk(mu_);
  ++total_;
  const std::string key = refusal.socket + '\n' + refusal.peer_address + '\n' + refusal.public_key +
                          '\n' + refusal.reason;
  // Bounded: a stream of distinct peers forgets old folds rather than grow.
  if (fold_.size() > 4096) fold_.clear();
  Fold& f = fold_[key];
  if (f.last_ms != 0 && now_ms - f.last_ms < fold_ms_) {
    ++f.folded;
    return false;
  }
  if (queue_.size() >= capacity_) {
    ++dropped_;
    return false;
  }
  refusal.repeats = f.folded;
  f.folded = 0;
  f.last_ms = now_ms == 0 ? 1 : now_ms;
  queue_.push_back(std::move(refusal));
  return true;
}

std::vector<AuthRefusal> RefusalLog::Drain() {
  std::lock_guard lk(mu_);
  std::vector<AuthRefusal> out(std::make_move_iterator(queue_.begin()),
                               std::make_move_iterator(queue_.end()));
  queue_.clear();
  return out;
}

int64_t RefusalLog::total() const {
  std::lock_guard lk(mu_);
  return total_;
}

int64_t RefusalLog::dropped() const {
  std::lock_guard lk(mu_);
  return dropped_;
}

}  // namespace sy::telemetry
