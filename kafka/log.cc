#include "kafka/log.h"

#include <memory>

#include "base/mutex.h"
#include "kafka/internal.h"

namespace kleaf::kafka {
namespace {

// Never destroyed: librdkafka's threads may still log while static destructors run at exit.
Mutex& sink_mu = *new Mutex();
std::shared_ptr<const LogSink>* current_sink KLEAF_PT_GUARDED_BY(sink_mu) =
    new std::shared_ptr<const LogSink>();

std::shared_ptr<const LogSink> CurrentSink() {
  MutexLock lock(sink_mu);
  return *current_sink;
}

void Trampoline(const rd_kafka_t* rk, int level, const char* facility, const char* message) {
  auto sink = CurrentSink();
  if (sink && *sink) (*sink)(LevelFromSyslog(level), rd_kafka_name(rk), facility, message);
}

}  // namespace

void SetLogSink(LogSink sink) {
  MutexLock lock(sink_mu);
  *current_sink = sink ? std::make_shared<const LogSink>(std::move(sink)) : nullptr;
}

LogLevel LevelFromSyslog(int level) {
  if (level <= 3) return LogLevel::kError;
  if (level == 4) return LogLevel::kWarn;
  if (level <= 6) return LogLevel::kInfo;
  return LogLevel::kDebug;
}

void InstallLogSink(rd_kafka_conf_t* conf) {
  if (CurrentSink()) rd_kafka_conf_set_log_cb(conf, Trampoline);
}

}  // namespace kleaf::kafka
