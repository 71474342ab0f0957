#include "core/observability/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace pvs::service {
namespace {

std::string format_number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    return std::to_string(static_cast<long long>(v));
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.12g", v);
  return buf;
}

}  // namespace

std::string render_labels(const MetricLabels& labels) {
  if (labels.empty()) return "";
  std::string out = "{";
  bool first = true;
  for (const auto& [k, v] : labels) {
    if (!first) out += ',';
    first = false;
    out += k + "=\"";
    for (char c : v) {
      if (c == '\\')
        out += "\\\\";
      else if (c == '"')
        out += "\\\"";
      else if (c == '\n')
        out += "\\n";
      else
        out += c;
    }
    out += '"';
  }
  return out + "}";
}

std::vector<double> Metrics::latency_buckets() {
  return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};
}

void Metrics::declare_counter(const std::string& name, const std::string& help) {
  std::lock_guard lock(mu_);
  families_[name] = Family{Type::kCounter, help, {}, {}, {}};
}

void Metrics::declare_gauge(const std::string& name, const std::string& help) {
  std::lock_guard lock(mu_);
  families_[name] = Family{Type::kGauge, help, {}, {}, {}};
}

void Metrics::declare_histogram(const std::string& name, const std::string& help,
                                std::vector<double> buckets) {
  std::lock_guard lock(mu_);
  families_[name] = Family{Type::kHistogram, help, std::move(buckets), {}, {}};
}

Metrics::Family* Metrics::find(const std::string& name, Type type) {
  auto it = families_.find(name);
  if (it == families_.end() || it->second.type != type) {
    throw std::logic_error("metric not declared with this type: " + name);
  }
  return &it->second;
}

void Metrics::inc(const std::string& name, const MetricLabels& labels, double by) {
  std::lock_guard lock(mu_);
  auto it = families_.find(name);
  if (it == families_.end() || it->second.type == Type::kHistogram) {
    throw std::logic_error("metric not declared as counter/gauge: " + name);
  }
  it->second.values[render_labels(labels)] += by;
}

void Metrics::set(const std::string& name, const MetricLabels& labels, double value) {
  std::lock_guard lock(mu_);
  find(name, Type::kGauge)->values[render_labels(labels)] = value;
}

void Metrics::observe(const std::string& name, const MetricLabels& labels, double value) {
  std::lock_guard lock(mu_);
  Family* f = find(name, Type::kHistogram);
  Histogram& h = f->histograms[render_labels(labels)];
  if (h.counts.empty()) h.counts.assign(f->buckets.size(), 0);
  for (std::size_t i = 0; i < f->buckets.size(); ++i) {
    if (value <= f->buckets[i]) {
      ++h.counts[i];
      break;
    }
  }
  ++h.count;
  h.sum += value;
}

void Metrics::set_histogram(const std::string& name, const MetricLabels& labels,
                            const std::vector<std::uint64_t>& cumulative, std::uint64_t count,
                            double sum) {
  std::lock_guard lock(mu_);
  Family* f = find(name, Type::kHistogram);
  if (cumulative.size() != f->buckets.size() && cumulative.size() != f->buckets.size() + 1) {
    throw std::logic_error("histogram snapshot with the wrong number of buckets: " + name);
  }
  Histogram& h = f->histograms[render_labels(labels)];
  h.counts.assign(f->buckets.size(), 0);
  std::uint64_t below = 0;
  for (std::size_t i = 0; i < f->buckets.size(); ++i) {
    // A snapshot taken while calls complete may be torn; never render a decreasing series.
    std::uint64_t at = std::max(cumulative[i], below);
    h.counts[i] = at - below;
    below = at;
  }
  h.count = std::max(count, below);
  h.sum = sum;
}

void Metrics::add_collector(std::function<void(Metrics&)> collector) {
  std::lock_guard lock(mu_);
  collectors_.push_back(std::move(collector));
}

double Metrics::value(const std::string& name, const MetricLabels& labels) const {
  std::lock_guard lock(mu_);
  auto it = families_.find(name);
  if (it == families_.end()) return 0;
  auto v = it->second.values.find(render_labels(labels));
  if (v != it->second.values.end()) return v->second;
  auto h = it->second.histograms.find(render_labels(labels));
  return h == it->second.histograms.end() ? 0 : static_cast<double>(h->second.count);
}

std::string Metrics::render() {
  std::vector<std::function<void(Metrics&)>> collectors;
  {
    std::lock_guard lock(mu_);
    collectors = collectors_;
  }
  for (auto& c : collectors) c(*this);

  std::lock_guard lock(mu_);
  std::string out;
  for (const auto& [name, f] : families_) {
    out += "# HELP " + name + " " + f.help + "\n";
    out += "# TYPE " + name + " " +
           (f.type == Type::kCounter ? "counter"
            : f.type == Type::kGauge ? "gauge"
                                     : "histogram") +
           "\n";
    if (f.type != Type::kHistogram) {
      for (const auto& [labels, v] : f.values) out += name + labels + " " + format_number(v) + "\n";
      continue;
    }
    for (const auto& [labels, h] : f.histograms) {
      // Insert le into the rendered label set: "{a="x"}" -> "{a="x",le="0.1"}".
      std::string prefix = labels.empty() ? "{" : labels.substr(0, labels.size() - 1) + ",";
      std::uint64_t cumulative = 0;
      for (std::size_t i = 0; i < f.buckets.size(); ++i) {
        cumulative += h.counts[i];
        out += name + "_bucket" + prefix + "le=\"" + format_number(f.buckets[i]) + "\"} " +
               std::to_string(cumulative) + "\n";
      }
      out += name + "_bucket" + prefix + "le=\"+Inf\"} " + std::to_string(h.count) + "\n";
      out += name + "_sum" + labels + " " + format_number(h.sum) + "\n";
      out += name + "_count" + labels + " " + std::to_string(h.count) + "\n";
    }
  }
  return out;
}

}  // namespace pvs::service
