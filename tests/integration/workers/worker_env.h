// The worker-id registry's flavour of the cluster harness (../cluster_env.h): one `kleaf allocator`
// and any number of `kleaf gateway` processes with short leases on a topic prefix of their own,
// and snowflake IDs split the way the cluster composed them.
#pragma once

#include <chrono>
#include <cstdint>
#include <expected>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tests/integration/cluster_env.h"

namespace kleaf::integration::workers {

using std::chrono::milliseconds;
using std::chrono::seconds;

// The lease TTL of these tests (the other lease settings: ShortLeases).
inline constexpr int64_t kLeaseTtlMs = 6000;

// A snowflake bit layout, to split IDs in the test the way the cluster composed them.
struct Layout {
  int timestamp_bits = 41;
  int worker_bits = 10;
  int sequence_bits = 12;
  int64_t epoch_ms = 1288834974657;  // Leaf's
  int64_t workers() const { return int64_t{1} << worker_bits; }
  // The config keys that select this layout (for allocators and gateways alike).
  std::map<std::string, std::string> Keys() const;
};
// 4 worker ids: 41 + 2 + 20 bits.
inline constexpr Layout kTinyLayout{41, 2, 20, 1288834974657};

struct IdParts {
  int64_t timestamp_ms = 0;
  int64_t worker_id = 0;
  int64_t sequence = 0;
};
IdParts Split(const Layout& layout, int64_t id);

// Milliseconds since the Unix epoch of "2020-05-02T12:13:44.602Z" (kleaf's log format).
std::optional<int64_t> ParseUtcMs(std::string_view text);

// The not_before of the current run's claim, from its "[lease] claimed worker id N (not before
// T)" line: the only report of the timestamp floor the registry granted (the worker id itself is
// on /api/v1/status: WorkerIdOf).
std::optional<int64_t> ClaimedNotBeforeMs(const Node& gateway);

// `kleaf decode ID --config <node's config>`: the worker id it reports.
std::expected<int64_t, std::string> DecodeWorkerId(const Node& node, int64_t id);

// A Cluster with this file's short leases (kLeaseTtlMs unless `overrides` say otherwise), one
// allocator and gateways that share the reply partitions round robin.
class RegistryCluster : public Cluster {
 public:
  // `name` goes into the topic prefix; `overrides` are config keys for every node (layout, lease
  // settings), on top of the short leases.
  RegistryCluster(const KafkaBroker& broker, const std::string& name,
                  const std::map<std::string, std::string>& overrides = {});

  // Starts the allocator and waits until it serves every partition (the `__workers__` key is on
  // one of them).
  std::expected<void, std::string> StartAllocator(milliseconds timeout = seconds(90));

  // A gateway named `name` (its node.id), with `overrides` on top of the cluster's keys.
  Node& AddGateway(const std::string& name, std::map<std::string, std::string> overrides = {});

 private:
  Node* allocator_ = nullptr;
  int gateways_ = 0;  // added so far: the next one's reply partition
};

// Fixture base: skips every test when no broker is configured.
class WorkerRegistryTest : public KafkaTest {};

// Every element of `ids` (any order) is distinct; else a message naming a duplicate.
std::optional<std::string> FindDuplicate(std::vector<int64_t> ids);
// `ids` strictly increase; else a message naming the first place they do not.
std::optional<std::string> FindNonIncreasing(const std::vector<int64_t>& ids);

}  // namespace kleaf::integration::workers
