// kleaf's log lines on stderr: text ("<UTC time> <level> [component] message") or one JSON object
// per line, as log.format says. spdlog stays inside logging.cc.
#pragma once

#include <string>

namespace kleaf {

// Sets the default logger: `format` "json" gives {"time","level","component","message"} lines
// (the component taken from the "[component] " prefix every kleaf message starts with), anything
// else the text pattern; `level` is spdlog's name of the lowest level logged ("info", ...).
void SetUpLogging(const std::string& level, const std::string& format);
// Whether SetUpLogging ran: from then on stderr carries log lines only (JSON ones with format
// json), so a message for the operator goes through the log.
bool LoggingIsSetUp();

}  // namespace kleaf
