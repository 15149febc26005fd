#include "app/common.h"

#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "kafka/log.h"
#include "snowflake/snowflake.h"

namespace kleaf::app {

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
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(msg.time.time_since_epoch());
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

}  // namespace

void SetUpLogging(const config::Log& log) {
  auto logger = spdlog::stderr_color_mt("kleaf");
  if (log.format == "json") {
    logger->set_formatter(std::make_unique<JsonLogFormatter>());
  } else {
    logger->set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %^%l%$ %v", spdlog::pattern_time_type::utc);
  }
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(log.level));
  // librdkafka's own lines (connection failures, broker errors) in the same format, component
  // "kafka": "[kafka] kleaf-gateway-1#producer-1 FAIL: ... Connect to ... failed".
  kafka::SetLogSink([](kafka::LogLevel level, std::string_view client, std::string_view facility,
                       std::string_view message) {
    static constexpr spdlog::level::level_enum kLevels[] = {
        spdlog::level::debug, spdlog::level::info, spdlog::level::warn, spdlog::level::err};
    spdlog::log(kLevels[static_cast<int>(level)], "[kafka] {} {}: {}", client, facility, message);
  });
}

namespace {
sigset_t ShutdownSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  return signals;
}
}  // namespace

void BlockShutdownSignals() {
  sigset_t signals = ShutdownSignals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
}

std::string WaitForShutdownSignal() {
  sigset_t signals = ShutdownSignals();
  int signal = 0;
  sigwait(&signals, &signal);
  return signal == SIGTERM ? "SIGTERM" : "SIGINT";
}

int StartupError(const std::string& message) {
  std::cerr << "kleaf: " << message << std::endl;
  spdlog::error("{}", message);
  return 1;
}

Result<void> CheckConfigFor(Role role, const config::Config& c, int64_t now_ms) {
  if (role != Role::kStandalone) {
    if (auto props = KafkaProperties(c); !props) return std::unexpected(props.error());
  }
  if (role == Role::kProducer && c.producer.streams.empty()) {
    return Fail(Code::kInvalidArgument,
                "producer.streams: no stream configured (a list of {tag, mode, batch_size})");
  }
  if (role == Role::kStandalone || role == Role::kGateway || role == Role::kProducer) {
    const auto& s = c.snowflake;
    auto layout = snowflake::SnowflakeLayout::Make(s.timestamp_bits, s.worker_bits, s.sequence_bits,
                                                   s.epoch_ms, s.time_unit_ms, now_ms);
    if (!layout) return Fail(Code::kInvalidArgument, "snowflake: " + layout.error().message);
    if (now_ms > layout->last_ms()) {
      return Fail(Code::kInvalidArgument,
                  "snowflake.timestamp_bits: the layout's timestamp bits ran out at " +
                      FormatUtcMs(layout->last_ms()) +
                      "; configure a later snowflake.epoch_ms or more timestamp_bits");
    }
  }
  return {};
}

Result<std::unique_ptr<state::Store>> OpenStore(const config::Config& c) {
  std::error_code ec;
  std::filesystem::create_directories(c.state.path, ec);
  if (ec) return Fail(Code::kFailedPrecondition, "state.path: cannot create '" + c.state.path + "': " + ec.message());
  return state::Store::Open(c.state.path);
}

Result<kafka::Properties> KafkaProperties(const config::Config& c) {
  if (c.kafka.bootstrap.empty()) {
    return Fail(Code::kInvalidArgument, "kafka.bootstrap: required for this subcommand (host:port[,host:port])");
  }
  kafka::Properties props{{"bootstrap.servers", c.kafka.bootstrap},
                          {"client.id", "kleaf-" + c.node.id},
                          {"reconnect.backoff.max.ms", "1000"}};
  // kafka.properties holds only keys none of the above is (config::AllowedKafkaProperty).
  props.insert(c.kafka.properties.begin(), c.kafka.properties.end());
  return props;
}

allocator::ClusterTopics Topics(const config::Config& c) {
  auto topics = allocator::ClusterTopics::For(c.kafka.topic_prefix, c.kafka.partitions,
                                              c.kafka.reply_partitions);
  topics.ids = c.producer.TopicFor(c.kafka.topic_prefix);
  return topics;
}

Result<ClusterSetup> PrepareCluster(const config::Config& c) {
  constexpr std::chrono::milliseconds kSetupTimeout{30000};
  auto props = KafkaProperties(c);
  if (!props) return std::unexpected(props.error());
  auto topics = Topics(c);
  const auto start = std::chrono::steady_clock::now();
  if (auto r = allocator::EnsureClusterTopics(*props, topics,
                                              static_cast<int16_t>(c.kafka.replication_factor),
                                              kSetupTimeout);
      !r) {
    return std::unexpected(r.error());
  }
  // Creating topics and checking the layout share one setup timeout: a node that cannot reach
  // Kafka gives up within it (plus librdkafka's teardown of a handle).
  const auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  auto layout = allocator::ResolveLayout(*props, topics, c.kafka.partitions, c.node.id,
                                         std::max(std::chrono::milliseconds(1000),
                                                  kSetupTimeout - spent));
  if (!layout) return std::unexpected(layout.error());
  topics.partitions = layout->partitions;
  return ClusterSetup{std::move(*props), std::move(topics), std::move(*layout)};
}

int ClusterSetupError(const Error& error) {
  const int code = StartupError(error.message);
  return error.code == Code::kInvalidArgument ? 2 : code;
}

Result<std::unique_ptr<allocator::KafkaAllocatorClient>> StartAllocatorClient(
    const config::Config& c, const ClusterSetup& setup, Clock& clock) {
  int32_t reply_partition = c.kafka.reply_partition >= 0
                                ? c.kafka.reply_partition
                                : kafka::PartitionFor(c.node.id, c.kafka.reply_partitions);
  return allocator::KafkaAllocatorClient::Start(
      {setup.props, setup.topics, c.node.id, reply_partition,
       std::chrono::milliseconds(c.kafka.request_timeout_ms), c.kafka.request_attempts},
      clock);
}

http::HttpServerOptions HttpOptions(const config::Config& c, const std::string& host,
                                    uint16_t port) {
  http::HttpServerOptions o;
  o.host = host;
  o.port = port;
  o.threads = c.http.threads;
  o.header_limit_bytes = static_cast<uint32_t>(c.http.header_limit_bytes);
  o.body_limit_bytes = static_cast<uint64_t>(c.http.body_limit_bytes);
  o.idle_timeout = std::chrono::milliseconds(c.http.idle_timeout_ms);
  o.max_connections = c.http.max_connections;
  return o;
}

std::string HttpUrl(const std::string& host, uint16_t port) {
  return "http://" + (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
         std::to_string(port);
}

}  // namespace kleaf::app
