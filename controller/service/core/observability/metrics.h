// Prometheus metrics: counters, gauges and histograms with labels, rendered in the text
// exposition format (version 0.0.4). Thread-safe.
//
//   Metrics m;
//   m.declare_counter("pvs_http_requests_total", "HTTP requests by route and status");
//   m.inc("pvs_http_requests_total", {{"route", "/v1/health"}, {"status", "200"}});
//   std::string text = m.render();
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace pvs::service {

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

class Metrics {
 public:
  void declare_counter(const std::string& name, const std::string& help);
  void declare_gauge(const std::string& name, const std::string& help);
  // `buckets`: upper bounds in increasing order (seconds for latencies).
  void declare_histogram(const std::string& name, const std::string& help,
                         std::vector<double> buckets);

  void inc(const std::string& name, const MetricLabels& labels = {}, double by = 1);
  void set(const std::string& name, const MetricLabels& labels, double value);
  void observe(const std::string& name, const MetricLabels& labels, double value);
  // Replaces a histogram series with a snapshot kept elsewhere (e.g. the Manager's call
  // statistics): `cumulative[i]` = observations <= the family's i-th bound, as Prometheus
  // counts them; `cumulative` has one entry per declared bound (a trailing +Inf entry is
  // accepted and ignored: `count` is the +Inf bucket).
  void set_histogram(const std::string& name, const MetricLabels& labels,
                     const std::vector<std::uint64_t>& cumulative, std::uint64_t count, double sum);

  // Called at the start of every render(), outside the lock (e.g. to set gauges from
  // the Manager's counters).
  void add_collector(std::function<void(Metrics&)> collector);

  std::string render();

  // The current value of a counter/gauge series (tests, health); 0 if absent.
  double value(const std::string& name, const MetricLabels& labels = {}) const;

  static std::vector<double> latency_buckets();  // 5 ms .. 120 s

 private:
  enum class Type { kCounter, kGauge, kHistogram };
  struct Histogram {
    std::vector<std::uint64_t> counts;  // per bucket, not cumulative
    std::uint64_t count = 0;
    double sum = 0;
  };
  struct Family {
    Type type = Type::kCounter;
    std::string help;
    std::vector<double> buckets;
    std::map<std::string, double> values;  // rendered label set -> value
    std::map<std::string, Histogram> histograms;
  };
  Family* find(const std::string& name, Type type);

  mutable std::mutex mu_;
  std::map<std::string, Family> families_;
  std::vector<std::function<void(Metrics&)>> collectors_;
};

// Renders {a="x",b="y"} with Prometheus escaping (backslash, quote, newline); "" if empty.
std::string render_labels(const MetricLabels& labels);

}  // namespace pvs::service
