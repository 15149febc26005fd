// kleaf's command line: one binary, one subcommand per role.
#include <CLI/CLI.hpp>
#include <iostream>
#include <optional>

#include "app/cluster.h"
#include "app/common.h"
#include "app/producer.h"
#include "app/standalone.h"
#include "base/clock.h"
#include "config/config.h"
#include "kafka/client.h"
#include "snowflake/id128.h"
#include "snowflake/snowflake.h"
#include "snowflake/snowflake_node.h"
#include "state/store.h"

namespace {

[[nodiscard]] kleaf::Result<kleaf::config::Config> LoadConfig(const std::string& path) {
  // KLEAF_<SECTION>__<KEY> variables override the file (docs/operations.md).
  const auto env = kleaf::config::ConfigEnvironment();
  if (path.empty()) return kleaf::config::ParseConfig("", env);
  return kleaf::config::LoadConfigFile(path, env);
}

int Decode(const kleaf::config::Config& config, const std::string& id_text) {
  const auto& s = config.snowflake;
  auto layout = kleaf::snowflake::SnowflakeLayout::Make(
      s.timestamp_bits, s.worker_bits, s.sequence_bits, s.epoch_ms, s.time_unit_ms, INT64_MAX);
  auto described = layout ? kleaf::snowflake::DecodeToJson(*layout, id_text)
                          : kleaf::Result<std::string>(std::unexpected(layout.error()));
  if (!described) {
    std::cerr << "kleaf: " << described.error().message << "\n";
    return 2;
  }
  std::cout << *described << "\n";
  return 0;
}

// `kleaf compose TIME`: the smallest ID of `kind` at TIME, as the compose routes answer it.
int Compose(const kleaf::config::Config& config, const std::string& kind,
            const std::string& time_text) {
  namespace sf = kleaf::snowflake;
  const auto& s = config.snowflake;
  auto layout = sf::SnowflakeLayout::Make(s.timestamp_bits, s.worker_bits, s.sequence_bits,
                                          s.epoch_ms, s.time_unit_ms, INT64_MAX);
  auto composed = [&]() -> kleaf::Result<std::string> {
    if (!layout) return std::unexpected(layout.error());
    if (kind == "snowflake") return sf::ComposeToJson(*layout, time_text);
    return sf::ComposeToJson(
        sf::Id128Layout(kind == "uuid7" ? sf::Id128Kind::kUuid7 : sf::Id128Kind::kUlid, *layout),
        time_text);
  }();
  if (!composed) {
    std::cerr << "kleaf: " << composed.error().message << "\n";
    return 2;
  }
  std::cout << *composed << "\n";
  return 0;
}

// The config checks of a role's node: its keys (config::CheckConfigFor), then, where it issues
// snowflake IDs, its layout at the current time.
[[nodiscard]] kleaf::Result<void> CheckRoleConfig(kleaf::config::Role role,
                                                  const kleaf::config::Config& config) {
  if (auto r = kleaf::config::CheckConfigFor(role, config); !r) return r;
  if (!kleaf::config::IssuesSnowflakeIds(role)) return {};
  return kleaf::snowflake::CheckLayoutAt(config.snowflake, kleaf::SystemClock::Instance().NowMs());
}

}  // namespace

// Reads better whole: the subcommand table, then one line per subcommand to run it.
int main(int argc, char** argv) {
  CLI::App app{"kleaf: unique 64-bit IDs (segment and snowflake), Leaf semantics"};
  app.require_subcommand(1);
  std::string config_path;
  auto add_config = [&config_path](CLI::App* sub) {
    sub->add_option("-c,--config", config_path, "YAML config file (defaults apply without one)");
  };

  auto* standalone = app.add_subcommand("standalone", "allocator and gateway in one process, state in RocksDB");
  add_config(standalone);
  auto* allocator = app.add_subcommand("allocator", "serve segment allocations from Kafka (cluster)");
  add_config(allocator);
  auto* gateway = app.add_subcommand("gateway", "serve IDs over HTTP, segments from the allocators (cluster)");
  add_config(gateway);

  auto* producer = app.add_subcommand("producer", "keep ID batches on the ids topic ahead of its consumers (cluster)");
  add_config(producer);

  auto* state = app.add_subcommand("state", "disaster recovery of the state topic");
  state->require_subcommand(1);
  auto* replay = state->add_subcommand("replay", "rebuild the RocksDB at state.path from the state topic");
  add_config(replay);
  std::string file;
  auto* exporter = state->add_subcommand("export", "write every tag record of the state topic to FILE");
  exporter->add_option("file", file, "output JSON file")->required();
  add_config(exporter);
  kleaf::app::StateImportOptions import_options;
  auto* importer = state->add_subcommand(
      "import",
      "set the tags of FILE (a 'state export' file, or a Leaf dump with --from-leaf), "
      "max_id raised by --bump");
  auto* import_file =
      importer->add_option("file", import_options.file, "a file written by 'state export'");
  auto* from_leaf = importer->add_option(
      "--from-leaf", import_options.file,
      "a dump of Leaf's leaf_alloc table instead: mysql -B -e 'SELECT "
      "biz_tag,max_id,step,description FROM leaf_alloc' (docs/migrating-from-leaf.md)");
  from_leaf->excludes(import_file);
  importer->add_option("--bump", import_options.bump, "added to every max_id (safety margin)")
      ->required();
  importer->add_flag("--standalone", import_options.standalone,
                     "into the store at state.path of a stopped `kleaf standalone`, not a cluster");
  add_config(importer);

  auto* decode = app.add_subcommand("decode", "decode a snowflake ID with the configured layout");
  std::string id_text;
  decode->add_option("id", id_text, "the ID")->required();
  add_config(decode);

  auto* compose = app.add_subcommand(
      "compose", "the smallest ID of a time (RFC 3339 or epoch ms) with the configured layout");
  std::string time_text;
  std::string compose_kind = "snowflake";
  compose->add_option("time", time_text, "e.g. 2026-11-24T10:00:00Z or 1795514400000")->required();
  compose->add_option("--kind", compose_kind, "snowflake (default), uuid7 or ulid")
      ->check(CLI::IsMember({"snowflake", "uuid7", "ulid"}));
  add_config(compose);

  auto* version = app.add_subcommand(
      "version", "print kleaf's version and the librdkafka and RocksDB versions it runs with");
  app.set_version_flag("--version", std::string("kleaf ") + KLEAF_VERSION);
  auto* help = app.add_subcommand("help", "print this help");

  // Exit codes (docs/operations.md, "Exit codes"): 0 done, 1 failure at run time or startup,
  // 2 wrong usage or a configuration refused. --help and --version exit 0.
  auto is_command = [&app](std::string_view name) {
    for (const CLI::App* sub : app.get_subcommands({})) {
      if (sub->check_name(std::string(name))) return true;
    }
    return false;
  };
  if (argc >= 2 && argv[1][0] != '-' && !is_command(argv[1])) {
    std::cerr << "kleaf: unknown command '" << argv[1] << "' (`kleaf help` lists them)\n";
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    if (argc == 1) {
      std::cerr << app.help();
      return 2;
    }
    app.exit(e);
    return 2;
  }

  if (help->parsed()) {  // the whole app's help (app.help() would describe the parsed subcommand)
    std::cout << app.get_formatter()->make_help(&app, "kleaf", CLI::AppFormatMode::Normal);
    return 0;
  }
  if (version->parsed()) {
    std::cout << "kleaf " << KLEAF_VERSION << "\nlibrdkafka " << kleaf::kafka::LibraryVersion();
    if (const int patch = kleaf::kafka::LibraryPatchLevel(); patch > 0) {
      std::cout << " (kleaf patch " << patch << ")";
    } else {
      std::cout << " (without kleaf's patch: segment fetches over Kafka take ~1 ms longer)";
    }
    std::cout << "\nrocksdb " << kleaf::state::RocksDbVersion() << "\n";
    return 0;
  }
  if (importer->parsed()) {
    import_options.from_leaf = from_leaf->count() > 0;
    if (import_options.file.empty()) {
      std::cerr
          << "kleaf: state import: give FILE (written by 'state export') or --from-leaf FILE\n";
      return 2;
    }
  }
  auto config = LoadConfig(config_path);
  if (!config) {
    std::cerr << "kleaf: config error: " << config.error().message << "\n";
    return 2;
  }
  std::optional<kleaf::config::Role> role;
  if (standalone->parsed()) role = kleaf::config::Role::kStandalone;
  if (allocator->parsed()) role = kleaf::config::Role::kAllocator;
  if (gateway->parsed()) role = kleaf::config::Role::kGateway;
  if (producer->parsed()) role = kleaf::config::Role::kProducer;
  if (state->parsed()) {
    // A standalone import works on the local store: the standalone's config, no Kafka.
    role = import_options.standalone ? kleaf::config::Role::kStandalone
                                     : kleaf::config::Role::kStateTool;
  }
  if (role) {
    if (auto checked = CheckRoleConfig(*role, *config); !checked) {
      std::cerr << "kleaf: config error: " << checked.error().message << "\n";
      return 2;
    }
  }
  try {
    if (decode->parsed()) return Decode(*config, id_text);
    if (compose->parsed()) return Compose(*config, compose_kind, time_text);
    kleaf::app::BlockShutdownSignals();
    kleaf::app::SetUpLoggingAndMetrics(config->log, KLEAF_VERSION);
    if (standalone->parsed()) return kleaf::app::RunStandalone(*config);
    if (allocator->parsed()) return kleaf::app::RunAllocator(*config);
    if (gateway->parsed()) return kleaf::app::RunGateway(*config);
    if (producer->parsed()) return kleaf::app::RunProducer(*config);
    if (replay->parsed()) return kleaf::app::RunStateReplay(*config);
    if (exporter->parsed()) return kleaf::app::RunStateExport(*config, file);
    if (importer->parsed()) return kleaf::app::RunStateImport(*config, import_options);
  } catch (const std::exception& e) {
    std::cerr << "kleaf: fatal: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
