// kleaf's command line: one binary, one subcommand per role.
#include <CLI/CLI.hpp>
#include <iostream>
#include <optional>

#include "app/backup.h"
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

// The config checks of a role's node: its keys (config::CheckConfigFor), the SASL mechanism of
// a role that talks to Kafka against what the linked librdkafka can do, its TLS files, an
// allocator's takeover wait against its lease ("I5 with a lease", the start-up check), then,
// where it issues snowflake IDs, its layout at the current time. `kleaf config check --role`
// runs the same.
[[nodiscard]] kleaf::Result<void> CheckRoleConfig(kleaf::config::Role role,
                                                  const kleaf::config::Config& config,
                                                  bool uses_tls_files) {
  if (auto r = kleaf::config::CheckConfigFor(role, config); !r) return r;
  if (role != kleaf::config::Role::kStandalone) {
    if (auto r = kleaf::config::CheckKafkaSasl(config.kafka, kleaf::kafka::LibraryFeatures(),
                                               kleaf::kafka::HostSaslMechanisms);
        !r) {
      return r;
    }
  }
  if (uses_tls_files && config.http.tls.enabled()) {
    const auto& t = config.http.tls;
    if (auto r = kleaf::http::CheckTlsFiles({t.cert_file, t.key_file, t.client_ca_file}); !r) {
      return r;
    }
  }
  if (role == kleaf::config::Role::kAllocator) {
    if (auto r = kleaf::app::CheckAllocatorLease(config); !r) return r;
  }
  if (!kleaf::config::IssuesSnowflakeIds(role)) return {};
  return kleaf::snowflake::CheckLayoutAt(kleaf::app::SnowflakeLayoutOptions(config.snowflake),
                                         kleaf::SystemClock::Instance().NowMs());
}

// The subcommands and the values their options fill. The Add*Commands functions bind options to
// these members, so a Commands stays where it was declared while the app lives.
struct Commands {
  std::string config_path;
  CLI::App* standalone = nullptr;
  CLI::App* allocator = nullptr;
  CLI::App* gateway = nullptr;
  CLI::App* producer = nullptr;
  CLI::App* state = nullptr;
  CLI::App* replay = nullptr;
  CLI::App* exporter = nullptr;
  std::string export_file;
  bool export_standalone = false;
  CLI::App* backup = nullptr;
  std::string backup_dir;
  CLI::App* importer = nullptr;
  CLI::Option* from_leaf = nullptr;
  kleaf::app::StateImportOptions import_options;
  CLI::App* decode = nullptr;
  std::string id_text;
  CLI::App* compose = nullptr;
  std::string time_text;
  std::string compose_kind = "snowflake";
  CLI::App* config = nullptr;
  CLI::App* config_check = nullptr;
  std::string check_role;  // empty: the keys only
  CLI::App* version = nullptr;
  CLI::App* help = nullptr;
};

void AddConfigOption(CLI::App* sub, Commands& c) {
  sub->add_option("-c,--config", c.config_path, "YAML config file (defaults apply without one)");
}

// The four serving roles.
void AddRoleCommands(CLI::App& app, Commands& c) {
  c.standalone =
      app.add_subcommand("standalone", "allocator and gateway in one process, state in RocksDB");
  AddConfigOption(c.standalone, c);
  c.allocator = app.add_subcommand("allocator", "serve segment allocations from Kafka (cluster)");
  AddConfigOption(c.allocator, c);
  c.gateway =
      app.add_subcommand("gateway", "serve IDs over HTTP, segments from the allocators (cluster)");
  AddConfigOption(c.gateway, c);
  c.producer = app.add_subcommand(
      "producer", "keep ID batches on the ids topic ahead of its consumers (cluster)");
  AddConfigOption(c.producer, c);
}

// `kleaf state replay|export|import`: disaster recovery.
void AddStateCommands(CLI::App& app, Commands& c) {
  c.state = app.add_subcommand("state", "disaster recovery: the state topic, a standalone's store");
  c.state->require_subcommand(1);
  c.replay =
      c.state->add_subcommand("replay", "rebuild the RocksDB at state.path from the state topic");
  AddConfigOption(c.replay, c);
  c.exporter = c.state->add_subcommand(
      "export", "write every tag, sequence space and section maximum of the state topic to FILE");
  c.exporter->add_option("file", c.export_file, "output JSON file")->required();
  c.exporter->add_flag("--standalone", c.export_standalone,
                       "from the store at state.path of a stopped `kleaf standalone` (or of a "
                       "`state backup` directory), not a cluster");
  AddConfigOption(c.exporter, c);
  c.backup = c.state->add_subcommand(
      "backup",
      "copy the state of a running `kleaf standalone` into DIR (a RocksDB checkpoint the node "
      "takes; DIR new or empty, on the node's host)");
  c.backup->add_option("dir", c.backup_dir, "the directory to create")->required();
  AddConfigOption(c.backup, c);
  auto& import_options = c.import_options;
  c.importer = c.state->add_subcommand(
      "import",
      "set the tags of FILE (a 'state export' file, or a Leaf dump with --from-leaf), "
      "max_id raised by --bump");
  auto* import_file =
      c.importer->add_option("file", import_options.file, "a file written by 'state export'");
  c.from_leaf = c.importer->add_option(
      "--from-leaf", import_options.file,
      "a dump of Leaf's leaf_alloc table instead: mysql -B -e 'SELECT "
      "biz_tag,max_id,step,description FROM leaf_alloc' (docs/migrating-from-leaf.md)");
  c.from_leaf->excludes(import_file);
  c.importer
      ->add_option("--bump", import_options.bump,
                   "added to every max_id and section max_seq (safety margin)")
      ->required();
  c.importer->add_flag(
      "--standalone", import_options.standalone,
      "into the store at state.path of a stopped `kleaf standalone`, not a cluster");
  AddConfigOption(c.importer, c);
}

// The tools that serve nothing: decode, compose, config check, version, help.
void AddToolCommands(CLI::App& app, Commands& c) {
  c.decode = app.add_subcommand("decode", "decode a snowflake ID with the configured layout");
  c.decode->add_option("id", c.id_text, "the ID")->required();
  AddConfigOption(c.decode, c);

  c.compose = app.add_subcommand(
      "compose", "the smallest ID of a time (RFC 3339 or epoch ms) with the configured layout");
  c.compose->add_option("time", c.time_text, "e.g. 2026-11-24T10:00:00Z or 1795514400000")
      ->required();
  c.compose->add_option("--kind", c.compose_kind, "snowflake (default), uuid7 or ulid")
      ->check(CLI::IsMember({"snowflake", "uuid7", "ulid"}));
  AddConfigOption(c.compose, c);

  c.config = app.add_subcommand("config", "check a configuration before a node runs it");
  c.config->require_subcommand(1);
  c.config_check = c.config->add_subcommand(
      "check",
      "load the config as --role would (file, then KLEAF_* variables), run the checks the role "
      "runs at start, print the effective config (secrets as ***); exit 0 valid, 2 refused");
  c.config_check
      ->add_option("--role", c.check_role,
                   "allocator, gateway, producer or standalone; without it, the keys only")
      ->check(CLI::IsMember({"allocator", "gateway", "producer", "standalone"}));
  AddConfigOption(c.config_check, c);

  c.version = app.add_subcommand(
      "version",
      "print kleaf's version, the librdkafka (and its features) and RocksDB versions it runs with");
  app.set_version_flag("--version", std::string("kleaf ") + KLEAF_VERSION);
  c.help = app.add_subcommand("help", "print this help");
}

// Parses the command line; the exit code when kleaf should stop here (usage error, --help).
// Exit codes (docs/operations.md, "Exit codes"): 0 done, 1 failure at run time or startup,
// 2 wrong usage or a configuration refused. --help and --version exit 0.
std::optional<int> ParseCommandLine(CLI::App& app, int argc, char** argv) {
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
  return std::nullopt;
}

// The whole app's help (app.help() would describe the parsed subcommand).
int PrintHelp(CLI::App& app) {
  std::cout << app.get_formatter()->make_help(&app, "kleaf", CLI::AppFormatMode::Normal);
  return 0;
}

int PrintVersion() {
  std::cout << "kleaf " << KLEAF_VERSION << "\nlibrdkafka " << kleaf::kafka::LibraryVersion();
  if (const int patch = kleaf::kafka::LibraryPatchLevel(); patch > 0) {
    std::cout << " (kleaf patch " << patch << ")";
  } else {
    std::cout << " (without kleaf's patch: segment fetches over Kafka take ~1 ms longer)";
  }
  // What kafka.properties can ask of it (sasl_gssapi, sasl_oauthbearer, oidc:
  // config::CheckKafkaSasl).
  std::cout << "\nlibrdkafka features " << kleaf::kafka::LibraryFeatures();
  // Cyrus SASL's mechanisms on this host: librdkafka's GSSAPI needs its GSSAPI plugin.
  const std::optional<std::string> cyrus = kleaf::kafka::HostSaslMechanisms();
  std::cout << "\ncyrus sasl mechanisms " << (cyrus ? *cyrus : std::string("(unavailable)"));
  std::cout << "\nrocksdb " << kleaf::state::RocksDbVersion() << "\n";
  return 0;
}

// `state import` takes FILE or --from-leaf FILE; false (usage error, said) when it has neither.
bool TakeImportSource(Commands& c) {
  c.import_options.from_leaf = c.from_leaf->count() > 0;
  if (!c.import_options.file.empty()) return true;
  std::cerr << "kleaf: state import: give FILE (written by 'state export') or --from-leaf FILE\n";
  return false;
}

// The role whose config checks apply to the parsed subcommand; none for decode, compose and
// `config check` without --role.
std::optional<kleaf::config::Role> RoleOf(const Commands& c) {
  using kleaf::config::Role;
  if (c.config_check->parsed()) {
    if (c.check_role == "standalone") return Role::kStandalone;
    if (c.check_role == "allocator") return Role::kAllocator;
    if (c.check_role == "gateway") return Role::kGateway;
    if (c.check_role == "producer") return Role::kProducer;
    return std::nullopt;
  }
  if (c.standalone->parsed()) return Role::kStandalone;
  if (c.allocator->parsed()) return Role::kAllocator;
  if (c.gateway->parsed()) return Role::kGateway;
  if (c.producer->parsed()) return Role::kProducer;
  // A standalone import or export works on the local store: the standalone's config, no Kafka.
  if (c.state->parsed()) {
    const bool local = (c.importer->parsed() && c.import_options.standalone) ||
                       (c.exporter->parsed() && c.export_standalone) || c.backup->parsed();
    return local ? Role::kStandalone : Role::kStateTool;
  }
  return std::nullopt;
}

// `kleaf config check`, once the config has passed the checks: the effective config on stdout,
// what was checked on stderr.
int PrintCheckedConfig(const Commands& c, const kleaf::config::Config& config) {
  std::cout << kleaf::config::EffectiveConfigYaml(config);
  if (c.check_role.empty()) {
    std::cerr << "kleaf: config OK (the keys only: --role ROLE adds that role's checks)\n";
  } else {
    std::cerr << "kleaf: config OK for " << c.check_role << "\n";
  }
  return 0;
}

// Runs the parsed subcommand with its checked config; its exit code.
int RunCommand(const Commands& c, const kleaf::config::Config& config) {
  try {
    if (c.config_check->parsed()) return PrintCheckedConfig(c, config);
    if (c.decode->parsed()) return Decode(config, c.id_text);
    if (c.compose->parsed()) return Compose(config, c.compose_kind, c.time_text);
    kleaf::app::BlockShutdownSignals();
    kleaf::app::SetUpLoggingAndMetrics(config.log, KLEAF_VERSION);
    if (c.standalone->parsed()) return kleaf::app::RunStandalone(config);
    if (c.allocator->parsed()) return kleaf::app::RunAllocator(config);
    if (c.gateway->parsed()) return kleaf::app::RunGateway(config);
    if (c.producer->parsed()) return kleaf::app::RunProducer(config);
    if (c.replay->parsed()) return kleaf::app::RunStateReplay(config);
    if (c.exporter->parsed()) {
      return kleaf::app::RunStateExport(config, c.export_file, c.export_standalone);
    }
    if (c.importer->parsed()) return kleaf::app::RunStateImport(config, c.import_options);
    if (c.backup->parsed()) return kleaf::app::RunStateBackup(config, c.backup_dir);
  } catch (const std::exception& e) {
    std::cerr << "kleaf: fatal: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kleaf: unique 64-bit IDs (segment and snowflake), Leaf semantics"};
  app.require_subcommand(1);
  Commands commands;
  AddRoleCommands(app, commands);
  AddStateCommands(app, commands);
  AddToolCommands(app, commands);
  if (auto exit_code = ParseCommandLine(app, argc, argv)) return *exit_code;

  if (commands.help->parsed()) return PrintHelp(app);
  if (commands.version->parsed()) return PrintVersion();
  if (commands.importer->parsed() && !TakeImportSource(commands)) return 2;
  auto config = LoadConfig(commands.config_path);
  if (!config) {
    std::cerr << "kleaf: config error: " << config.error().message << "\n";
    return 2;
  }
  if (auto role = RoleOf(commands)) {
    // State export and import serve nothing and read no certificate: an expired one must not
    // keep an operator from them (state backup does read it: it talks HTTPS to its node).
    const bool uses_tls_files = !commands.state->parsed() || commands.backup->parsed();
    if (auto checked = CheckRoleConfig(*role, *config, uses_tls_files); !checked) {
      std::cerr << "kleaf: config error: " << checked.error().message;
      // A cluster's import or export (RoleOf: kStateTool, not --standalone) without Kafka.
      if ((commands.importer->parsed() || commands.exporter->parsed()) &&
          *role == kleaf::config::Role::kStateTool && config->kafka.bootstrap.empty()) {
        // Most often a standalone's config without --standalone.
        std::cerr << "; for the state.path of a stopped `kleaf standalone`, add --standalone";
      }
      std::cerr << "\n";
      return 2;
    }
  }
  return RunCommand(commands, *config);
}
