#include "base/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string_view>

#include "base/clock.h"

namespace kleaf {
namespace {

// One JSON object per line: {"time","level","component","message"}, the component taken from the
// "[component] " prefix every kleaf log message starts with.
class JsonLogFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    std::string_view text(msg.payload.data(), msg.payload.size());
    std::string component = "kleaf";
    if (text.starts_with('[')) {
      if (auto close = text.find("] "); close != std::string_view::npos) {
        component = std::string(text.substr(1, close - 1));
        text.remove_prefix(close + 2);
      }
    }
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(msg.time.time_since_epoch());
    const auto level = spdlog::level::to_string_view(msg.level);
    nlohmann::json line = {{"time", FormatUtcMs(ms.count())},
                           {"level", std::string(level.data(), level.size())},
                           {"component", component},
                           {"message", text}};
    std::string out = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    out += '\n';
    dest.append(out.data(), out.data() + out.size());
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonLogFormatter>();
  }
};

std::atomic<bool> logging_set_up{false};

}  // namespace

void SetUpLogging(const std::string& level, const std::string& format) {
  auto logger = spdlog::stderr_color_mt("kleaf");
  if (format == "json") {
    logger->set_formatter(std::make_unique<JsonLogFormatter>());
  } else {
    logger->set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %^%l%$ %v", spdlog::pattern_time_type::utc);
  }
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(level));
  logging_set_up.store(true);
}

bool LoggingIsSetUp() { return logging_set_up.load(); }

}  // namespace kleaf
