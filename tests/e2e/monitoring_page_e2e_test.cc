// The monitoring page's plots, in a real browser: a real `kleaf standalone` keeps each tag's
// history (sampled every 200 ms here, http.status_history_interval_ms), headless Chromium renders
// the page, and the test looks at the DOM and at the pixels of a screenshot.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "tests/e2e/e2e_env.h"
#include "tests/e2e/http_client.h"
#include "tests/e2e/png.h"

namespace kleaf::e2e {
namespace {

using nlohmann::json;
using std::chrono::seconds;

struct Rgb {
  int r, g, b;
};
// The page's line colours (--rate and --latency in gateway/monitor_page.cc), used nowhere else on
// it.
constexpr Rgb kRateColour{0x1f, 0x6f, 0xeb};
constexpr Rgb kLatencyColour{0xd9, 0x48, 0x0f};

// Pixels within a few levels of `colour` per channel (colour management may move a level or two).
int CountPixels(const RgbImage& image, Rgb colour) {
  int n = 0;
  for (size_t i = 0; i + 2 < image.rgb.size(); i += 3) {
    if (std::abs(image.rgb[i] - colour.r) <= 6 && std::abs(image.rgb[i + 1] - colour.g) <= 6 &&
        std::abs(image.rgb[i + 2] - colour.b) <= 6) {
      ++n;
    }
  }
  return n;
}

// Runs headless Chromium on `url` with `mode` ("--dump-dom > file" or "--screenshot=file");
// its exit code.
int Chromium(const TempDir& dir, const std::string& profile, const std::string& mode,
             const std::string& url) {
  const std::string command =
      "timeout 60 chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage "
      "--hide-scrollbars --force-device-scale-factor=1 --window-size=1600,1400 "
      "--user-data-dir=" +
      (dir.path() / profile).string() + " --virtual-time-budget=5000 " + mode + " " + url;
  return std::system(command.c_str());
}

// The <svg> element of class `cls` in a rendered DOM; empty when there is none.
std::string SvgOf(const std::string& dom, const std::string& cls) {
  const size_t start = dom.find("<svg class=\"" + cls + "\"");
  if (start == std::string::npos) return "";
  return dom.substr(start, dom.find("</svg>", start) - start);
}

TEST(MonitoringPageE2eTest, PagePlotsEachTagsRateAndFetchLatencyAndShowsItsIdMode) {
  if (std::system("command -v chromium >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "chromium is not installed (scripts/install-deps.sh installs it); the page is "
                    "not rendered";
  }
  TempDir dir;
  // Segments of 100 IDs that never grow, so that drawing keeps fetching: a latency each interval.
  auto config = dir.WriteFile("kleaf.yaml", TestConfig(dir.path() / "state")
                                                .Set("http.status_history_interval_ms", "200")
                                                .Set("segment.default_step", "100")
                                                .Set("segment.max_step", "100")
                                                .Yaml());
  auto server = StartStandalone(config);
  ASSERT_TRUE(server) << server.error();
  HttpClient client(server->port);
  auto put = client.Put("/api/v1/tags/plot-obf", R"({"step":100,"id_mode":"obfuscated"})",
                        Bearer(kAdminToken));
  ASSERT_TRUE(put && put->status == 200) << (put ? put->body : put.error());

  // Draw IDs until the node's history holds 10 points with IDs in them, fetch latencies among
  // them, and the history plots over the last 60 points' time (12 s here).
  json status, tag;
  const auto deadline = std::chrono::steady_clock::now() + seconds(30);
  while (true) {
    auto ids = client.Get("/api/v1/segment/plot-obf?count=50");
    ASSERT_TRUE(ids && ids->status == 200) << (ids ? ids->body : ids.error());
    auto r = client.Get("/api/v1/status");
    ASSERT_TRUE(r && r->status == 200);
    status = json::parse(r->body);
    ASSERT_EQ(status["tags"].size(), 1u) << r->body;
    tag = status["tags"][0];
    int busy = 0, fetched = 0;
    for (const auto& v : tag["history"]["ids_per_s"]) busy += v.get<double>() > 0 ? 1 : 0;
    for (const auto& v : tag["history"]["fetch_ms"]) fetched += v.is_null() ? 0 : 1;
    if (busy >= 10 && fetched >= 5) break;
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "history still short: " << r->body;
  }
  EXPECT_EQ(tag["id_mode"], "obfuscated");
  EXPECT_EQ(status["history"]["interval_ms"], 200);
  EXPECT_EQ(status["history"]["points"], 60);
  EXPECT_EQ(status["history"]["max_tags"], 32);

  // Clients keep drawing while the browser starts (seconds on a loaded machine), so that the
  // window it plots holds IDs and fetches whenever it asks.
  std::mutex mu;
  std::condition_variable stop_cv;
  bool stop = false;
  std::thread load([&] {
    HttpClient loader(server->port);
    std::unique_lock lock(mu);
    while (!stop_cv.wait_for(lock, std::chrono::milliseconds(20), [&] { return stop; })) {
      lock.unlock();
      loader.Get("/api/v1/segment/plot-obf?count=50");
      lock.lock();
    }
  });
  struct Join {
    std::mutex& mu;
    std::condition_variable& cv;
    bool& stop;
    std::thread& thread;
    ~Join() {
      {
        std::lock_guard lock(mu);
        stop = true;
      }
      cv.notify_all();
      thread.join();
    }
  } join{mu, stop_cv, stop, load};

  const std::string url = "http://127.0.0.1:" + std::to_string(server->port) + "/";
  const auto dom_file = dir.path() / "dom.html";
  ASSERT_EQ(
      Chromium(dir, "chromium-dom", "--dump-dom > " + dom_file.string() + " 2>/dev/null", url), 0);
  const std::string dom = ReadFile(dom_file);
  EXPECT_NE(dom.find("<td class=\"id-mode\">obfuscated</td>"), std::string::npos) << dom;
  // A line in each plot (the page's script, also in the DOM, spells the markup only in pieces).
  EXPECT_NE(SvgOf(dom, "plot rate").find("<polyline"), std::string::npos) << dom;
  EXPECT_NE(SvgOf(dom, "plot latency").find("<polyline"), std::string::npos) << dom;
  EXPECT_NE(dom.find("At most 32 tags have plots"), std::string::npos) << dom;

  const auto png = dir.path() / "page.png";
  ASSERT_EQ(Chromium(dir, "chromium-shot", "--screenshot=" + png.string() + " 2>/dev/null", url),
            0);
  auto image = ReadPng(png);
  ASSERT_TRUE(image) << image.error();
  EXPECT_EQ(image->width, 1600);
  // Ten intervals of a 160-pixel plot over 60 are a line of some 27 pixels, 2 thick.
  // On failure the screenshot is kept here for a look (the test's temp dir goes away).
  const auto kept = std::filesystem::temp_directory_path() /
                    ("kleaf-page-e2e-" + std::to_string(getpid()) + ".png");
  EXPECT_GE(CountPixels(*image, kRateColour), 30) << "no IDs/s line in " << kept;
  // At least one dash (4 pixels, 2 thick) of fetch latency.
  EXPECT_GE(CountPixels(*image, kLatencyColour), 8) << "no fetch latency line in " << kept;
  if (HasFailure()) {
    std::filesystem::copy_file(png, kept, std::filesystem::copy_options::overwrite_existing);
  }
}

}  // namespace
}  // namespace kleaf::e2e
