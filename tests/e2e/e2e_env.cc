#include "tests/e2e/e2e_env.h"

#include <charconv>
#include <fstream>
#include <nlohmann/json.hpp>

namespace kleaf::e2e {

TestConfig::TestConfig(const std::filesystem::path& state_path) {
  Set("http.listen", "127.0.0.1:0");
  Set("state.path", "\"" + state_path.string() + "\"");
  Set("admin.token", kAdminToken);
  Set("log.level", "warn");
  Set("node.id", "e2e");
  // A loaded two-core machine must not turn a slow first fetch into a 503.
  Set("segment.wait_ms", "3000");
  // A kill -9 leaves the durable snowflake mark up to reserve_ms ahead: keep restarts quick.
  Set("snowflake.persist_interval_ms", "50");
  Set("snowflake.reserve_ms", "400");
}

TestConfig& TestConfig::Set(const std::string& key, const std::string& value) {
  values_[key] = value;
  return *this;
}

TestConfig& TestConfig::Erase(const std::string& key) {
  values_.erase(key);
  return *this;
}

std::string TestConfig::Yaml() const {
  std::map<std::string, std::map<std::string, std::string>> sections;
  for (const auto& [key, value] : values_) {
    auto dot = key.find('.');
    sections[key.substr(0, dot)][key.substr(dot + 1)] = value;
  }
  std::string yaml;
  for (const auto& [section, entries] : sections) {
    yaml += section + ":\n";
    for (const auto& [name, value] : entries) yaml += "  " + name + ": " + value + "\n";
  }
  return yaml;
}

std::expected<Server, std::string> StartStandalone(
    const std::filesystem::path& config_file, std::vector<std::string> prefix,
    std::vector<std::pair<std::string, std::string>> env) {
  ProcessOptions options;
  options.args = {"standalone", "--config", config_file.string()};
  options.prefix = std::move(prefix);
  options.env = std::move(env);
  auto process = KleafProcess::Start(std::move(options));
  if (!process) return std::unexpected(process.error());
  auto port = (*process)->WaitListening(kStartTimeout);
  if (!port) return std::unexpected(port.error());
  return Server{std::move(*process), *port};
}

CommandResult RunKleaf(std::vector<std::string> args, std::vector<std::string> prefix,
                       std::chrono::milliseconds timeout) {
  CommandResult result;
  ProcessOptions options;
  options.args = std::move(args);
  options.prefix = std::move(prefix);
  auto process = KleafProcess::Start(std::move(options));
  if (!process) {
    result.err = process.error();
    return result;
  }
  result.status = (*process)->WaitExit(timeout);
  result.out = (*process)->Stdout();
  result.err = (*process)->Stderr();
  return result;
}

std::expected<std::vector<int64_t>, std::string> IdsOf(const HttpReply& reply, bool plain,
                                                       const std::string& tag) {
  auto parse = [](std::string_view text) -> std::expected<int64_t, std::string> {
    int64_t id = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
    if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) {
      return std::unexpected("not a decimal ID: '" + std::string(text) + "'");
    }
    return id;
  };
  if (reply.status != 200) {
    return std::unexpected("status " + std::to_string(reply.status) + ": " + reply.body);
  }
  std::vector<int64_t> ids;
  if (plain) {
    auto id = parse(reply.body);
    if (!id) return std::unexpected(id.error());
    ids.push_back(*id);
    return ids;
  }
  auto json = nlohmann::json::parse(reply.body, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object() || !json.contains("ids") || !json["ids"].is_array() ||
      json.value("tag", "") != tag) {
    return std::unexpected("unexpected body: " + reply.body);
  }
  for (const auto& item : json["ids"]) {
    if (!item.is_string()) return std::unexpected("an ID that is not a string: " + reply.body);
    auto id = parse(item.get<std::string>());
    if (!id) return std::unexpected(id.error());
    ids.push_back(*id);
  }
  return ids;
}

SnowflakeParts SplitDefaultSnowflake(int64_t id) {
  constexpr int64_t kLeafEpochMs = 1288834974657;
  return {(id >> 22) + kLeafEpochMs, (id >> 12) & 0x3FF, id & 0xFFF};
}

int64_t WallClockMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Headers Bearer(const std::string& token) { return {{"Authorization", "Bearer " + token}}; }

std::string Libfaketime() { return KLEAF_LIBFAKETIME; }

namespace {
// libfaketime with faketime_c11.cc's shim before it, for kleaf processes (librdkafka's waits).
std::string KleafPreload() { return std::string(KLEAF_FAKETIME_C11) + ":" + Libfaketime(); }
}  // namespace

std::vector<std::string> FaketimePrefix(const std::string& offset) {
  return {"/usr/bin/env", "LD_PRELOAD=" + KleafPreload(), "FAKETIME=" + offset};
}

std::vector<std::pair<std::string, std::string>> FaketimeEnv() {
  return {{"FAKETIME_DONT_FAKE_MONOTONIC", "1"}};
}

OffsetFile::OffsetFile(const std::filesystem::path& dir) : file_(dir / "faketime.offset") {
  Set("+0");
}

void OffsetFile::Set(const std::string& offset) {
  auto tmp = file_;
  tmp += ".tmp";
  std::ofstream(tmp) << offset << "\n";
  std::filesystem::rename(tmp, file_);
}

std::vector<std::pair<std::string, std::string>> OffsetFile::Environment() const {
  return {{"LD_PRELOAD", KleafPreload()},
          {"FAKETIME_TIMESTAMP_FILE", file_.string()},
          {"FAKETIME_NO_CACHE", "1"},
          {"FAKETIME_DONT_FAKE_MONOTONIC", "1"}};
}

}  // namespace kleaf::e2e
