// Strict reading of a YAML configuration file, shared by the agent and the controller: typed
// values with ranges, errors that name the file, the line and the key path, unknown and
// duplicate keys refused. Nothing throws; the first error is kept and later reads do nothing.
//
//   auto doc = pvs::yaml::Document::parse(text, "/etc/pve-sandbox/agent.yaml");
//   if (!doc) return fail(doc.error());
//   pvs::yaml::Map top = doc->root();
//   top.integer("port", &config.port, 1, 65535);
//   pvs::yaml::Map tls = top.map("tls");
//   tls.string("cert_file", &config.cert_file);
//   if (!config.cert_file.empty() && ...) tls.fail("cert_file", "cannot read it");
//   tls.finish();
//   if (auto st = top.finish(); !st) return fail(st.error());
//     // "/etc/pve-sandbox/agent.yaml:7: tls.cert_file: cannot read it"
//
// A key that is absent or null ("key:") keeps the default in *out.
#pragma once

#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "pvesandbox/common/error.h"

namespace pvs::yaml {

struct State;  // the parsed tree and the first error, shared by every Map of a Document
struct Node;   // one node of the tree (yaml-cpp behind it)

enum class Need { kOptional, kRequired };

class Map {
 public:
  Map(const Map&);
  Map& operator=(const Map&);
  ~Map();

  void string(std::string_view name, std::string* out, Need need = Need::kOptional);
  void boolean(std::string_view name, bool* out);  // true/false, yes/no, on/off
  // A decimal integer in [min, max].
  template <typename Int>
  void integer(std::string_view name, Int* out, long long min, long long max,
               Need need = Need::kOptional) {
    long long v = 0;
    if (read_integer(name, &v, min, max, need)) *out = static_cast<Int>(v);
  }
  // A list of scalars; anything else fails saying it "must be <what>".
  void string_list(std::string_view name, std::vector<std::string>* out,
                   std::string_view what = "a list of strings");
  // A mapping of scalar keys to scalar values (labels: {zone: a, gpu: "no"}).
  void string_map(std::string_view name, std::map<std::string, std::string>* out);
  // A list of decimal integers, each in [min, max].
  void integer_list(std::string_view name, std::vector<long long>* out, long long min,
                    long long max);
  void one_of(std::string_view name, std::string* out,
              std::initializer_list<std::string_view> allowed);
  // A nested mapping; absent: an empty one (its reads keep the defaults).
  Map map(std::string_view name);
  // A list of mappings (absent: none).
  std::vector<Map> maps(std::string_view name);
  bool has(std::string_view name) const;
  // The keys of this mapping in document order (for mappings keyed by names the operator
  // chooses, e.g. egress.lists); none if it is absent.
  std::vector<std::string> keys() const;

  // Records an error at `name` (for checks across keys), unless one is recorded already.
  void fail(std::string_view name, std::string reason);
  // "section.name" (or "section[2].name"), for messages.
  std::string key(std::string_view name) const;
  bool ok() const;  // no error recorded in the document so far
  // Refuses keys that were never read, then returns the document's first error (if any).
  Status finish();

 private:
  friend class Document;
  Map(std::shared_ptr<State> state, std::shared_ptr<Node> node, std::string path);
  bool read_integer(std::string_view name, long long* out, long long min, long long max, Need need);
  std::shared_ptr<Node> child(std::string_view name);  // marks it read; null if absent/null
  void fail_at(const Node* where, std::string_view name, std::string reason);

  std::shared_ptr<State> state_;
  std::shared_ptr<Node> node_;
  std::string path_;
  std::vector<std::string> read_;
};

class Document {
 public:
  // Errors: not YAML ("<source>:<line>: YAML: ..."), empty, a duplicate key, or a top level
  // that is not a mapping.
  static Result<Document> parse(std::string_view text, std::string_view source);
  Map root() const;

 private:
  explicit Document(std::shared_ptr<State> state);
  std::shared_ptr<State> state_;
};

// "\"text\"" with control characters shown as '?' and at most 80 characters, for messages.
std::string quoted_value(std::string_view text);

}  // namespace pvs::yaml
