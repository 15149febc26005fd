#include "app/common.h"

#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <iostream>

namespace kleaf::app {

void SetUpLogging(const std::string& level) {
  auto logger = spdlog::stderr_color_mt("kleaf");
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(level));
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
  return kafka::Properties{{"bootstrap.servers", c.kafka.bootstrap},
                           {"client.id", "kleaf-" + c.node.id},
                           {"reconnect.backoff.max.ms", "1000"}};
}

allocator::ClusterTopics Topics(const config::Config& c) {
  return allocator::ClusterTopics::For(c.kafka.topic_prefix, c.kafka.partitions, c.kafka.reply_partitions);
}

gateway::HttpServerOptions HttpOptions(const config::Config& c, const std::string& host,
                                       uint16_t port) {
  gateway::HttpServerOptions o;
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
