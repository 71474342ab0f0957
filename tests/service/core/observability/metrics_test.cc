#include "core/observability/metrics.h"

#include <gtest/gtest.h>

#include <thread>

namespace pvs::service {
namespace {

TEST(Metrics, TextFormat) {
  Metrics m;
  m.declare_counter("pvs_requests_total", "Requests.");
  m.declare_gauge("pvs_live", "Live sandboxes.");
  m.declare_histogram("pvs_latency_seconds", "Latency.", {0.1, 1});
  m.inc("pvs_requests_total", {{"route", "/v1/x"}, {"status", "200"}});
  m.inc("pvs_requests_total", {{"route", "/v1/x"}, {"status", "200"}}, 2);
  m.inc("pvs_requests_total", {{"route", "a\"b\\c\nd"}, {"status", "500"}});
  m.set("pvs_live", {}, 7);
  m.observe("pvs_latency_seconds", {{"op", "exec"}}, 0.05);
  m.observe("pvs_latency_seconds", {{"op", "exec"}}, 0.5);
  m.observe("pvs_latency_seconds", {{"op", "exec"}}, 5);
  EXPECT_EQ(m.render(),
            "# HELP pvs_latency_seconds Latency.\n"
            "# TYPE pvs_latency_seconds histogram\n"
            "pvs_latency_seconds_bucket{op=\"exec\",le=\"0.1\"} 1\n"
            "pvs_latency_seconds_bucket{op=\"exec\",le=\"1\"} 2\n"
            "pvs_latency_seconds_bucket{op=\"exec\",le=\"+Inf\"} 3\n"
            "pvs_latency_seconds_sum{op=\"exec\"} 5.55\n"
            "pvs_latency_seconds_count{op=\"exec\"} 3\n"
            "# HELP pvs_live Live sandboxes.\n"
            "# TYPE pvs_live gauge\n"
            "pvs_live 7\n"
            "# HELP pvs_requests_total Requests.\n"
            "# TYPE pvs_requests_total counter\n"
            "pvs_requests_total{route=\"/v1/x\",status=\"200\"} 3\n"
            "pvs_requests_total{route=\"a\\\"b\\\\c\\nd\",status=\"500\"} 1\n");
  EXPECT_EQ(m.value("pvs_requests_total", {{"route", "/v1/x"}, {"status", "200"}}), 3);
  EXPECT_THROW(m.inc("undeclared"), std::logic_error);
}

TEST(Metrics, HistogramWithoutLabelsAndCollectors) {
  Metrics m;
  m.declare_histogram("h", "H.", {1});
  m.declare_gauge("g", "G.");
  int calls = 0;
  m.add_collector([&](Metrics& self) { self.set("g", {}, ++calls); });
  m.observe("h", {}, 0.5);
  std::string text = m.render();
  EXPECT_NE(text.find("h_bucket{le=\"1\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("h_sum 0.5\n"), std::string::npos);
  EXPECT_NE(text.find("g 1\n"), std::string::npos);
  EXPECT_NE(m.render().find("g 2\n"), std::string::npos);
}

TEST(Metrics, HistogramSnapshotFromCumulativeBuckets) {
  Metrics m;
  m.declare_histogram("calls_seconds", "Calls.", {0.001, 0.01, 0.1});
  // Cumulative like Prometheus (and pvs::CallStats): 2 <= 1 ms, 5 <= 10 ms, 5 <= 100 ms, 7 in all.
  m.set_histogram("calls_seconds", {{"peer", "proxmox"}}, {2, 5, 5, 7}, 7, 1.25);
  EXPECT_EQ(m.render(),
            "# HELP calls_seconds Calls.\n"
            "# TYPE calls_seconds histogram\n"
            "calls_seconds_bucket{peer=\"proxmox\",le=\"0.001\"} 2\n"
            "calls_seconds_bucket{peer=\"proxmox\",le=\"0.01\"} 5\n"
            "calls_seconds_bucket{peer=\"proxmox\",le=\"0.1\"} 5\n"
            "calls_seconds_bucket{peer=\"proxmox\",le=\"+Inf\"} 7\n"
            "calls_seconds_sum{peer=\"proxmox\"} 1.25\n"
            "calls_seconds_count{peer=\"proxmox\"} 7\n");
  // A later snapshot replaces the series (no double counting); a torn snapshot never renders
  // a decreasing series.
  m.set_histogram("calls_seconds", {{"peer", "proxmox"}}, {3, 2, 9}, 8, 2);
  std::string text = m.render();
  EXPECT_NE(text.find("le=\"0.01\"} 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("le=\"0.1\"} 9\n"), std::string::npos) << text;
  EXPECT_NE(text.find("le=\"+Inf\"} 9\n"), std::string::npos) << text;
  EXPECT_THROW(m.set_histogram("calls_seconds", {}, {1}, 1, 0), std::logic_error);
}

TEST(Metrics, ConcurrentIncrements) {
  Metrics m;
  m.declare_counter("c", "C.");
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) m.inc("c", {{"t", "x"}});
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(m.value("c", {{"t", "x"}}), 8000);
}

}  // namespace
}  // namespace pvs::service
