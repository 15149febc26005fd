// Where librdkafka's own log lines go. By default librdkafka prints them to stderr in its own
// format; a server installs a sink once at startup (before it creates any Kafka client) so they
// go through its logger instead, e.g. as JSON. The client library installs none: it gives each
// consumer handle a sink of its own (GroupConsumer::Create's `log`).
#pragma once

#include <functional>
#include <string_view>

namespace kleaf::kafka {

enum class LogLevel { kDebug, kInfo, kWarn, kError };

// `client` is librdkafka's name of the handle (client.id and handle, e.g.
// "kleaf-gateway-1#producer-1"), `facility` its subsystem tag (e.g. "FAIL", "REQTMOUT"). Called on
// librdkafka's threads: must be thread-safe and must not call back into Kafka.
using LogSink = std::function<void(LogLevel level, std::string_view client,
                                   std::string_view facility, std::string_view message)>;

// Every Kafka client created afterwards logs through the sink current when it logs; clients
// created before keep librdkafka's default (stderr), as does an empty sink.
void SetLogSink(LogSink sink);

// librdkafka's syslog level (0 emergency … 7 debug) as kleaf's.
LogLevel LevelFromSyslog(int level);

}  // namespace kleaf::kafka
