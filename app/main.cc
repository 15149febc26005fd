// kleaf's command line: one binary, one subcommand per role.
#include <CLI/CLI.hpp>
#include <iostream>

#include "app/standalone.h"
#include "config/config.h"
#include "gateway/snowflake.h"

namespace {

kleaf::Result<kleaf::config::Config> LoadConfig(const std::string& path) {
  if (path.empty()) return kleaf::config::ParseConfig("");
  return kleaf::config::LoadConfigFile(path);
}

int Decode(const kleaf::config::Config& config, const std::string& id_text) {
  const auto& s = config.snowflake;
  auto layout = kleaf::gateway::SnowflakeLayout::Make(s.timestamp_bits, s.worker_bits,
                                                      s.sequence_bits, s.epoch_ms, s.time_unit_ms,
                                                      INT64_MAX);
  auto described = layout ? kleaf::gateway::DecodeToJson(*layout, id_text)
                          : kleaf::Result<std::string>(std::unexpected(layout.error()));
  if (!described) {
    std::cerr << "kleaf: " << described.error().message << "\n";
    return 2;
  }
  std::cout << *described << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kleaf: unique 64-bit IDs (segment and snowflake), Leaf semantics"};
  app.require_subcommand(1);
  std::string config_path;

  auto* standalone = app.add_subcommand("standalone", "allocator and gateway in one process, state in RocksDB");
  standalone->add_option("-c,--config", config_path, "YAML config file (defaults apply without one)");

  auto* decode = app.add_subcommand("decode", "decode a snowflake ID with the configured layout");
  std::string id_text;
  decode->add_option("id", id_text, "the ID")->required();
  decode->add_option("-c,--config", config_path, "YAML config file (for the layout)");

  auto* version = app.add_subcommand("version", "print the version");

  CLI11_PARSE(app, argc, argv);

  if (version->parsed()) {
    std::cout << "kleaf 0.1.0\n";
    return 0;
  }
  auto config = LoadConfig(config_path);
  if (!config) {
    std::cerr << "kleaf: config error: " << config.error().message << "\n";
    return 2;
  }
  try {
    if (decode->parsed()) return Decode(*config, id_text);
    if (standalone->parsed()) return kleaf::app::RunStandalone(*config);
  } catch (const std::exception& e) {
    std::cerr << "kleaf: fatal: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
