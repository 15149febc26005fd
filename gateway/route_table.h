// A route table as data: each route is declared once, as its path pattern (which is also its
// metric label), the methods it takes, its gate and its handler; dispatch, a target's metric label
// and the list of labels all come from the table. The Api's table is in gateway/api.cc.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <span>
#include <string_view>

namespace kleaf::gateway {

// The segments of a path ("/api/v1/x" -> "api", "v1", "x"; "/" -> one empty segment), without
// allocating. A path of more than kMaxParts segments keeps the rest in the last one: no route has
// that many (RouteIndex::Valid), so it still matches none.
class PathParts {
 public:
  static constexpr size_t kMaxParts = 8;

  constexpr PathParts() = default;
  constexpr explicit PathParts(std::string_view path) {
    if (!path.empty() && path.front() == '/') path.remove_prefix(1);
    while (true) {
      auto slash = size_ + 1 < kMaxParts ? path.find('/') : std::string_view::npos;
      parts_[size_++] = path.substr(0, slash);
      if (slash == std::string_view::npos) break;
      path.remove_prefix(slash + 1);
    }
  }
  constexpr size_t size() const { return size_; }
  constexpr std::string_view operator[](size_t i) const { return parts_[i]; }

 private:
  std::array<std::string_view, kMaxParts> parts_{};
  size_t size_ = 0;
};

// The methods whose requests reach a route's handler.
enum class Methods {
  kGet,      // GET (HEAD arrives as a GET); any other: 405 with "Allow: GET, HEAD"
  kLeafGet,  // Leaf's get routes: GET, POST, PUT, PATCH, DELETE; OPTIONS: 200 with their Allow
             // list; any other: 405
  kAny,      // every method: the handler answers 405 to the ones it does not serve
};

// What a request needs besides its method.
enum class Gate {
  kOpen,
  kAdminToken,  // "Authorization: Bearer <admin token>", checked after the method: else 401
  kMonitor,     // a node with a Monitor: without one, 404 to every method, as for a path no route
                // has (the metric label stays the route's)
};

template <typename Handler>
struct Route {
  // Literal segments and at most two "{name}" segments, each matching any one segment (an empty
  // one too): "/api/v1/segment/{tag}", "/api/v1/seq/{space}/{key}". Also the route's metric
  // label.
  std::string_view pattern;
  Methods methods;
  Gate gate;
  Handler handler;
};

// The metric label of a target no route matches.
inline constexpr std::string_view kNoRoute = "other";

// The path's segments in a pattern's {name} places, in order ("" where it has none).
struct RouteParams {
  std::string_view first;
  std::string_view second;
};

template <typename Handler>
struct RouteMatch {
  const Route<Handler>* route = nullptr;  // null: no route matches
  RouteParams params;
};

// A table's routes with their patterns split once, at compile time (a constexpr object). Valid()
// checks what matching relies on: patterns start with '/', have at most two {name} segments and
// fewer than PathParts::kMaxParts segments, and no path matches two of them, so the order of the
// table does not matter.
template <typename Handler, size_t N>
class RouteIndex {
 public:
  constexpr explicit RouteIndex(const Route<Handler> (&routes)[N]) {
    for (size_t i = 0; i < N; ++i) {
      routes_[i] = routes[i];
      patterns_[i] = PathParts(routes[i].pattern);
      labels_[i] = routes[i].pattern;
    }
    labels_[N] = kNoRoute;
  }

  // The route whose pattern `path` (a target without its query) matches.
  constexpr RouteMatch<Handler> Find(std::string_view path) const {
    const PathParts parts(path);
    for (size_t i = 0; i < N; ++i) {
      if (auto params = Fit(patterns_[i], parts)) return {&routes_[i], *params};
    }
    return {};
  }

  // The label of each route, then kNoRoute: every label a target can get.
  constexpr std::span<const std::string_view> labels() const { return labels_; }

  constexpr bool Valid() const {
    for (size_t i = 0; i < N; ++i) {
      const PathParts& pattern = patterns_[i];
      if (!routes_[i].pattern.starts_with('/') || pattern.size() >= PathParts::kMaxParts) {
        return false;
      }
      size_t params = 0;
      for (size_t s = 0; s < pattern.size(); ++s) params += IsParam(pattern[s]) ? 1 : 0;
      if (params > 2) return false;
      for (size_t j = i + 1; j < N; ++j) {
        if (Overlap(pattern, patterns_[j])) return false;
      }
    }
    return true;
  }

 private:
  static constexpr bool IsParam(std::string_view segment) { return segment.starts_with('{'); }

  // The segments in the {name} places when `parts` fits `pattern`.
  static constexpr std::optional<RouteParams> Fit(const PathParts& pattern,
                                                  const PathParts& parts) {
    if (pattern.size() != parts.size()) return std::nullopt;
    RouteParams params;
    bool first = true;
    for (size_t s = 0; s < parts.size(); ++s) {
      if (IsParam(pattern[s])) {
        (first ? params.first : params.second) = parts[s];
        first = false;
      } else if (pattern[s] != parts[s]) {
        return std::nullopt;
      }
    }
    return params;
  }

  // Whether some path fits both patterns.
  static constexpr bool Overlap(const PathParts& a, const PathParts& b) {
    if (a.size() != b.size()) return false;
    for (size_t s = 0; s < a.size(); ++s) {
      if (!IsParam(a[s]) && !IsParam(b[s]) && a[s] != b[s]) return false;
    }
    return true;
  }

  std::array<Route<Handler>, N> routes_{};
  std::array<PathParts, N> patterns_{};
  std::array<std::string_view, N + 1> labels_{};
};

}  // namespace kleaf::gateway
