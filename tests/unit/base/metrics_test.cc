#include "base/metrics.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace kleaf::metrics {
namespace {

TEST(MetricsTest, RendersCountersGaugesAndHistogramsInTextFormat) {
  Registry r;
  r.GetCounter("kleaf_ids_issued_total", "IDs issued", {{"tag", "order"}, {"mode", "segment"}}).Inc(5);
  r.GetGauge("kleaf_buffer_fill_ratio", "fill", {{"tag", "order"}}).Set(0.25);
  auto& h = r.GetHistogram("kleaf_fetch_seconds", "fetch latency", {}, {0.001, 0.01});
  h.Observe(0.0005);
  h.Observe(0.005);
  h.Observe(1);
  std::string text = r.Render();
  EXPECT_NE(text.find("# TYPE kleaf_ids_issued_total counter\n"), std::string::npos) << text;
  EXPECT_NE(text.find("kleaf_ids_issued_total{tag=\"order\",mode=\"segment\"} 5\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("kleaf_buffer_fill_ratio{tag=\"order\"} 0.25\n"), std::string::npos) << text;
  EXPECT_NE(text.find("kleaf_fetch_seconds_bucket{le=\"0.001\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("kleaf_fetch_seconds_bucket{le=\"0.01\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("kleaf_fetch_seconds_bucket{le=\"+Inf\"} 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("kleaf_fetch_seconds_count 3\n"), std::string::npos) << text;
}

TEST(MetricsTest, SameNameAndLabelsGiveTheSameSeries) {
  Registry r;
  Counter& a = r.GetCounter("c", "h", {{"k", "v"}});
  Counter& b = r.GetCounter("c", "h", {{"k", "v"}});
  EXPECT_EQ(&a, &b);
  EXPECT_NE(&a, &r.GetCounter("c", "h", {{"k", "w"}}));
  EXPECT_THROW(r.GetGauge("c", "h"), std::logic_error);
}

TEST(MetricsTest, CollectorsRunBeforeRenderingAndCanBeRemoved) {
  Registry r;
  Gauge& g = r.GetGauge("g", "h");
  double source = 7;
  int id = r.AddCollector([&] { g.Set(source); });
  EXPECT_NE(r.Render().find("g 7\n"), std::string::npos);
  source = 9;
  EXPECT_NE(r.Render().find("g 9\n"), std::string::npos);
  r.RemoveCollector(id);
  source = 11;
  EXPECT_NE(r.Render().find("g 9\n"), std::string::npos);
}

TEST(MetricsTest, LabelValuesAreEscaped) {
  Registry r;
  r.GetCounter("c", "h", {{"error", "a\"b\\c\nd"}}).Inc();
  EXPECT_NE(r.Render().find("c{error=\"a\\\"b\\\\c\\nd\"} 1\n"), std::string::npos) << r.Render();
}

TEST(MetricsTest, ConcurrentIncrementsAreAllCounted) {
  Registry r;
  Counter& c = r.GetCounter("c", "h");
  Histogram& h = r.GetHistogram("h", "h");
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        c.Inc();
        h.Observe(0.002);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(c.value(), 40000u);
  EXPECT_EQ(h.count(), 40000u);
  EXPECT_EQ(h.cumulative(h.bounds().size()), 40000u);
}

}  // namespace
}  // namespace kleaf::metrics
