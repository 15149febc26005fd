// kleaf's log lines on stderr: text ("<UTC time> <level> [component] message") or one JSON object
// per line, as log.format says. spdlog stays inside logging.cc.
#pragma once

#include <string>

namespace kleaf {

// Sets the default logger: `format` "json" gives {"time","level","component","message"} lines
// (the component taken from the "[component] " prefix every kleaf message starts with), anything
// else the text pattern; `level` is spdlog's name of the lowest level logged ("info", ...).
void SetUpLogging(const std::string& level, const std::string& format);

}  // namespace kleaf
