// A small path router: patterns such as "/v1/sandboxes/{id}/snapshots/{name}" matched segment
// by segment; a last segment "{rest...}" takes what is left of the path, none or many segments
// (joined by "/"). A path that matches some pattern with another method is a 405 (with Allow).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pvs::service {

using PathParams = std::map<std::string, std::string>;

// Splits "/a/b/" into {"a", "b"}; empty segments ("//") are kept as "" so they never match.
std::vector<std::string_view> split_path(std::string_view path);

template <typename Handler>
class Router {
 public:
  struct Match {
    const Handler* handler = nullptr;  // null: no route (see allowed)
    PathParams params;
    std::string allowed;  // when the path exists with other methods: "GET, DELETE"
  };

  void add(std::string method, std::string_view pattern, Handler handler) {
    Route r;
    r.method = std::move(method);
    for (auto seg : split_path(pattern)) r.segments.emplace_back(seg);
    r.handler = std::move(handler);
    routes_.push_back(std::move(r));
  }

  Match match(std::string_view method, std::string_view path) const {
    Match m;
    auto segments = split_path(path);
    for (const auto& r : routes_) {
      PathParams params;
      if (!matches(r, segments, &params)) continue;
      if (r.method == method || (method == "HEAD" && r.method == "GET")) {
        m.handler = &r.handler;
        m.params = std::move(params);
        return m;
      }
      if (m.allowed.find(r.method) == std::string::npos) {
        m.allowed += (m.allowed.empty() ? "" : ", ") + r.method;
      }
    }
    return m;
  }

 private:
  struct Route {
    std::string method;
    std::vector<std::string> segments;
    Handler handler;
  };

  static bool is_tail(const std::string& seg) {
    return seg.size() > 5 && seg.front() == '{' && seg.compare(seg.size() - 4, 4, "...}") == 0;
  }

  static bool matches(const Route& r, const std::vector<std::string_view>& segments,
                      PathParams* params) {
    bool tail = !r.segments.empty() && is_tail(r.segments.back());
    std::size_t fixed = tail ? r.segments.size() - 1 : r.segments.size();
    if (tail ? segments.size() < fixed : segments.size() != fixed) return false;
    if (tail) {
      std::string rest;
      for (std::size_t i = fixed; i < segments.size(); ++i)
        rest += (i == fixed ? "" : "/") + std::string(segments[i]);
      const std::string& name = r.segments.back();
      (*params)[name.substr(1, name.size() - 5)] = std::move(rest);
    }
    for (std::size_t i = 0; i < fixed; ++i) {
      const std::string& want = r.segments[i];
      if (want.size() > 2 && want.front() == '{' && want.back() == '}') {
        if (segments[i].empty()) return false;
        (*params)[want.substr(1, want.size() - 2)] = std::string(segments[i]);
      } else if (want != segments[i]) {
        return false;
      }
    }
    return true;
  }

  std::vector<Route> routes_;
};

inline std::vector<std::string_view> split_path(std::string_view path) {
  std::vector<std::string_view> out;
  if (path.empty() || path[0] != '/') {
    out.emplace_back();  // never matches a pattern that starts with '/'
    out.emplace_back(path);
    return out;
  }
  path.remove_prefix(1);
  if (!path.empty() && path.back() == '/') path.remove_suffix(1);
  if (path.empty()) return out;
  std::size_t start = 0;
  while (true) {
    auto slash = path.find('/', start);
    out.push_back(path.substr(start, slash == std::string_view::npos ? slash : slash - start));
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return out;
}

}  // namespace pvs::service
