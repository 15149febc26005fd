// Gets IDs from kleaf gateways over HTTP and prints them, one per line.
// Usage: http_client_example GATEWAYS(host:port,...) TAG COUNT [segment|snowflake] [buffer_size]
// Exit code 0 when COUNT IDs were printed, 1 on bad arguments, 2 when a call failed.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "kleaf/http_client.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s GATEWAYS TAG COUNT [segment|snowflake] [buffer_size]\n", argv[0]);
    return 1;
  }
  auto gateways = kleaf::ParseGateways(argv[1]);
  if (!gateways) {
    std::fprintf(stderr, "error: %s\n", gateways.error().message.c_str());
    return 1;
  }
  const std::string tag = argv[2];
  const long long count = std::atoll(argv[3]);
  const std::string mode = argc > 4 ? argv[4] : "segment";
  if (count < 1 || (mode != "segment" && mode != "snowflake")) {
    std::fprintf(stderr, "COUNT must be >= 1 and the mode segment or snowflake\n");
    return 1;
  }
  kleaf::HttpClient::Options options;
  options.gateways = *gateways;
  options.buffer_size = argc > 5 ? std::atoi(argv[5]) : 0;
  auto client = kleaf::HttpClient::Create(options);
  if (!client) {
    std::fprintf(stderr, "error: %s\n", client.error().message.c_str());
    return 1;
  }
  for (long long i = 0; i < count; ++i) {
    auto id = mode == "segment" ? (*client)->NextSegment(tag) : (*client)->NextSnowflake(tag);
    if (!id) {
      std::fprintf(stderr, "error: %s\n", id.error().message.c_str());
      return 2;
    }
    std::printf("%lld\n", static_cast<long long>(*id));
    std::fflush(stdout);
  }
  return 0;
}
