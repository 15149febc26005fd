// Which of scripts/test.sh's main brokers this test process uses. scripts/test.sh starts two
// brokers of the main Kafka version and runs ctest with a resource spec that lists them (resource
// `kafka`, ids `a` and `b`, one slot each); every test of the main brokers asks for one
// (RESOURCE_GROUPS kafka:1), so two such tests run at once, each alone on its broker, as one did
// with the single broker before. ctest names the broker it gave a test in
// CTEST_RESOURCE_GROUP_<i>_KAFKA
// ("id:a,slots:1"); before main() runs, this makes the KLEAF_TEST_KAFKA_BOOTSTRAP, _PORT and _DIR
// that every test reads that broker's (scripts/test.sh exports KLEAF_TEST_KAFKA_<ID>_BOOTSTRAP,
// _PORT and _DIR). Without a resource group (ctest without --resource-spec-file, a test binary run
// by hand) nothing changes. tests/integration/on_kafka_slot.sh does the same for the shell tests.
// Compiled into every integration executable (an INTERFACE source of kleaf_integration_env), so no
// linker drops it.
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

std::string EnvOrEmpty(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  return v == nullptr ? std::string() : std::string(v);
}

// The id in "id:a,slots:1"; empty when the text has none.
std::string IdOf(const std::string& allocation) {
  const auto at = allocation.find("id:");
  if (at == std::string::npos) return {};
  const auto end = allocation.find(',', at);
  return allocation.substr(at + 3, end == std::string::npos ? std::string::npos : end - at - 3);
}

[[noreturn]] void Fail(const std::string& message) {
  std::fprintf(stderr, "kafka_slot: %s\n", message.c_str());
  std::fflush(stderr);
  std::_Exit(1);
}

bool SelectBroker() {
  const int groups = std::atoi(EnvOrEmpty("CTEST_RESOURCE_GROUP_COUNT").c_str());
  for (int i = 0; i < groups; ++i) {
    const std::string group = "CTEST_RESOURCE_GROUP_" + std::to_string(i);
    if (EnvOrEmpty(group) != "kafka") continue;
    const std::string allocation = EnvOrEmpty(group + "_KAFKA");
    std::string id = IdOf(allocation);
    if (id.empty()) Fail(group + "_KAFKA names no broker id: '" + allocation + "'");
    for (char& c : id) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    for (const char* part : {"BOOTSTRAP", "PORT", "DIR"}) {
      const std::string from = "KLEAF_TEST_KAFKA_" + id + "_" + part;
      const std::string value = EnvOrEmpty(from);
      if (value.empty()) Fail("ctest gave this test broker " + id + " but " + from + " is unset");
      const std::string to = std::string("KLEAF_TEST_KAFKA_") + part;
      if (setenv(to.c_str(), value.c_str(), 1) != 0) Fail("setenv " + to + " failed");
    }
    return true;
  }
  return false;
}

[[maybe_unused]] const bool broker_selected = SelectBroker();

}  // namespace
