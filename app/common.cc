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
  auto topics = allocator::ClusterTopics::For(c.kafka.topic_prefix, c.kafka.partitions,
                                              c.kafka.reply_partitions);
  topics.ids = c.producer.TopicFor(c.kafka.topic_prefix);
  return topics;
}

}  // namespace kleaf::app
