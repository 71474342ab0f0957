#include "pvesandbox/common/yaml_reader.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <set>

#include <yaml-cpp/yaml.h>

namespace pvs::yaml {

struct Node {
  YAML::Node node;
};

struct State {
  std::string source;
  YAML::Node root;
  bool failed = false;
  std::string message;  // the first error
};

namespace {

bool present(const YAML::Node& n) {
  return n.IsDefined() && !n.IsNull();
}

int line_of(const YAML::Node& n) {
  return n.Mark().line >= 0 ? n.Mark().line + 1 : 0;
}

// The first duplicate key in any mapping of the tree, as "line: key", or "".
std::string duplicate_key(const YAML::Node& n, int depth = 0) {
  if (depth > 64) return "";
  if (n.IsMap()) {
    std::set<std::string> seen;
    for (auto it = n.begin(); it != n.end(); ++it) {
      std::string k = it->first.IsScalar() ? it->first.Scalar() : "?";
      if (!seen.insert(k).second)
        return std::to_string(line_of(it->first)) + ": duplicate key " + quoted_value(k);
      if (auto d = duplicate_key(it->second, depth + 1); !d.empty()) return d;
    }
  } else if (n.IsSequence()) {
    for (const auto& item : n)
      if (auto d = duplicate_key(item, depth + 1); !d.empty()) return d;
  }
  return "";
}

}  // namespace

std::string quoted_value(std::string_view text) {
  std::string out = "\"";
  for (char c : text.substr(0, 80)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  return out + "\"";
}

Result<Document> Document::parse(std::string_view text, std::string_view source) {
  auto state = std::make_shared<State>();
  state->source = std::string(source);
  try {
    state->root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return fail(ErrorCode::kInvalidArgument,
                state->source + ":" + std::to_string(e.mark.line + 1) + ": YAML: " + e.msg);
  }
  if (!present(state->root))
    return fail(ErrorCode::kInvalidArgument, state->source + ": the file is empty");
  if (!state->root.IsMap())
    return fail(ErrorCode::kInvalidArgument, state->source + ":" +
                                                 std::to_string(line_of(state->root)) +
                                                 ": the top level must be a mapping");
  if (auto d = duplicate_key(state->root); !d.empty())
    return fail(ErrorCode::kInvalidArgument, state->source + ":" + d);
  return Document(std::move(state));
}

Document::Document(std::shared_ptr<State> state) : state_(std::move(state)) {}

Map Document::root() const {
  return Map(state_, std::make_shared<Node>(Node{state_->root}), "");
}

Map::Map(std::shared_ptr<State> state, std::shared_ptr<Node> node, std::string path)
    : state_(std::move(state)), node_(std::move(node)), path_(std::move(path)) {}
Map::Map(const Map&) = default;
Map& Map::operator=(const Map&) = default;
Map::~Map() = default;

std::string Map::key(std::string_view name) const {
  return path_.empty() ? std::string(name) : path_ + "." + std::string(name);
}

bool Map::ok() const {
  return !state_->failed;
}

void Map::fail_at(const Node* where, std::string_view name, std::string reason) {
  if (state_->failed) return;
  state_->failed = true;
  // A missing key: the line of its section (none for the top level).
  int line = where ? line_of(where->node) : node_ && !path_.empty() ? line_of(node_->node) : 0;
  state_->message = state_->source + (line > 0 ? ":" + std::to_string(line) : std::string()) +
                    ": " + key(name) + ": " + reason;
}

void Map::fail(std::string_view name, std::string reason) {
  if (node_ && node_->node.IsMap()) {
    const YAML::Node& map = node_->node;  // const: a lookup never adds the key
    Node where{map[std::string(name)]};   // (a YAML::Node cannot be assigned a missing one)
    if (where.node.IsDefined()) return fail_at(&where, name, std::move(reason));
  }
  fail_at(nullptr, name, std::move(reason));
}

std::shared_ptr<Node> Map::child(std::string_view name) {
  read_.emplace_back(name);
  if (state_->failed || !node_ || !node_->node.IsMap()) return nullptr;
  const YAML::Node& map = node_->node;
  YAML::Node c = map[std::string(name)];
  if (!present(c)) return nullptr;
  return std::make_shared<Node>(Node{c});
}

bool Map::has(std::string_view name) const {
  if (!node_ || !node_->node.IsMap()) return false;
  const YAML::Node& map = node_->node;
  return present(map[std::string(name)]);
}

std::vector<std::string> Map::keys() const {
  std::vector<std::string> out;
  if (!node_ || !node_->node.IsMap()) return out;
  for (auto it = node_->node.begin(); it != node_->node.end(); ++it)
    if (it->first.IsScalar()) out.push_back(it->first.Scalar());
  return out;
}

void Map::string(std::string_view name, std::string* out, Need need) {
  auto n = child(name);
  if (!n) {
    if (need == Need::kRequired) fail(name, "is required");
    return;
  }
  if (!n->node.IsScalar()) return fail_at(n.get(), name, "must be a string");
  *out = n->node.Scalar();
  if (need == Need::kRequired && out->empty()) fail_at(n.get(), name, "must not be empty");
}

void Map::boolean(std::string_view name, bool* out) {
  auto n = child(name);
  if (!n) return;
  const std::string s = n->node.IsScalar() ? n->node.Scalar() : std::string();
  if (s == "true" || s == "yes" || s == "on") {
    *out = true;
  } else if (s == "false" || s == "no" || s == "off") {
    *out = false;
  } else {
    fail_at(n.get(), name, "must be true or false, not " + quoted_value(s));
  }
}

bool Map::read_integer(std::string_view name, long long* out, long long min, long long max,
                       Need need) {
  auto n = child(name);
  if (!n) {
    if (need == Need::kRequired) fail(name, "is required");
    return false;
  }
  std::string range = "[" + std::to_string(min) + ", " + std::to_string(max) + "]";
  if (!n->node.IsScalar()) {
    fail_at(n.get(), name, "must be an integer in " + range);
    return false;
  }
  const std::string& s = n->node.Scalar();
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || end != s.c_str() + s.size() || errno == ERANGE || v < min || v > max) {
    fail_at(n.get(), name, "must be an integer in " + range + ", not " + quoted_value(s));
    return false;
  }
  *out = v;
  return true;
}

void Map::string_list(std::string_view name, std::vector<std::string>* out, std::string_view what) {
  auto n = child(name);
  if (!n) return;
  const std::string must = "must be " + std::string(what);
  if (!n->node.IsSequence()) return fail_at(n.get(), name, must);
  std::vector<std::string> items;
  for (const auto& item : n->node) {
    if (!item.IsScalar()) return fail_at(n.get(), name, must);
    items.push_back(item.Scalar());
  }
  *out = std::move(items);
}

void Map::string_map(std::string_view name, std::map<std::string, std::string>* out) {
  auto n = child(name);
  if (!n) return;
  const char* what = "must be a mapping of names to strings";
  if (!n->node.IsMap()) return fail_at(n.get(), name, what);
  std::map<std::string, std::string> items;
  for (const auto& kv : n->node) {
    if (!kv.first.IsScalar() || !kv.second.IsScalar()) return fail_at(n.get(), name, what);
    items[kv.first.Scalar()] = kv.second.Scalar();
  }
  *out = std::move(items);
}

void Map::integer_list(std::string_view name, std::vector<long long>* out, long long min,
                       long long max) {
  auto n = child(name);
  if (!n) return;
  std::string what =
      "must be a list of integers in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  if (!n->node.IsSequence()) return fail_at(n.get(), name, what);
  std::vector<long long> items;
  for (const auto& item : n->node) {
    const std::string s = item.IsScalar() ? item.Scalar() : std::string();
    char* end = nullptr;
    errno = 0;
    long long v = std::strtoll(s.c_str(), &end, 10);
    if (s.empty() || end != s.c_str() + s.size() || errno == ERANGE || v < min || v > max)
      return fail_at(n.get(), name, what + ", not " + quoted_value(s));
    items.push_back(v);
  }
  *out = std::move(items);
}

void Map::one_of(std::string_view name, std::string* out,
                 std::initializer_list<std::string_view> allowed) {
  std::string value = *out;
  string(name, &value);
  if (!ok()) return;
  if (std::find(allowed.begin(), allowed.end(), value) == allowed.end()) {
    std::string list;
    for (auto a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
    return fail(name, "must be one of " + list + ", not " + quoted_value(value));
  }
  *out = value;
}

Map Map::map(std::string_view name) {
  auto n = child(name);
  if (n && !n->node.IsMap()) fail_at(n.get(), name, "must be a mapping");
  return Map(state_, n && n->node.IsMap() ? n : nullptr, key(name));
}

std::vector<Map> Map::maps(std::string_view name) {
  std::vector<Map> out;
  auto n = child(name);
  if (!n) return out;
  if (!n->node.IsSequence()) {
    fail_at(n.get(), name, "must be a list");
    return out;
  }
  for (std::size_t i = 0; i < n->node.size(); ++i) {
    auto item = std::make_shared<Node>(Node{n->node[i]});
    std::string path = key(name) + "[" + std::to_string(i) + "]";
    if (!item->node.IsMap()) {
      fail_at(item.get(), name, "items must be mappings");
      return {};
    }
    out.push_back(Map(state_, item, path));
  }
  return out;
}

Status Map::finish() {
  if (!state_->failed && node_ && node_->node.IsMap()) {
    for (auto it = node_->node.begin(); it != node_->node.end(); ++it) {
      std::string name = it->first.IsScalar() ? it->first.Scalar() : "?";
      if (std::find(read_.begin(), read_.end(), name) == read_.end()) {
        Node where{it->first};
        fail_at(&where, name, "unknown key");
        break;
      }
    }
  }
  if (state_->failed) return pvs::fail(ErrorCode::kInvalidArgument, state_->message);
  return {};
}

}  // namespace pvs::yaml
