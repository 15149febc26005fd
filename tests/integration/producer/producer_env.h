// What the tests of `kleaf producer` share (library kleaf_producer_env): a producer node of a
// Cluster, restartable on its config and state, and the batches its stream topics hold, read as
// consumers see them. Used by producer/, consumers/ and the datacenter test.
#pragma once

#include <chrono>
#include <cstdint>
#include <expected>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kleaf/batch.h"
#include "tests/e2e/kleaf_process.h"
#include "tests/integration/cluster_env.h"

namespace kleaf::integration {

// A batch as it sits on its stream's topic.
struct Published {
  std::string topic;
  int32_t partition = 0;
  int64_t offset = 0;
  std::string value;
  IdBatch batch;
};

// The topics of `streams` ("tag/mode") on the ids topic `ids_topic`.
std::vector<std::string> StreamTopics(const std::string& ids_topic,
                                      const std::vector<std::string>& streams);

// Every batch of `topics`, read_committed (what consumers see) or read_uncommitted (also what open
// or aborted transactions wrote), in (topic, partition, offset) order. A record that is not a
// batch, or whose key is not its tag, fails the test.
std::vector<Published> ReadAll(const std::string& bootstrap, const std::vector<std::string>& topics,
                               int32_t partitions, bool committed = true);

// One `kleaf producer` node of a cluster (its config: the cluster's, debug logs, `batches_ahead`
// batches ahead on every partition, a round every 100 ms, `streams` as the YAML of
// producer.streams), restartable on the same config and state. Prints its logs at destruction
// when the test failed.
class ProducerNode {
 public:
  ProducerNode(Cluster& cluster, const std::string& name, int batches_ahead,
               const std::string& streams);
  // A producer run on `config` as it is (written as `name`.yaml in the cluster's directory).
  ProducerNode(Cluster& cluster, const std::string& name, const e2e::TestConfig& config);
  ~ProducerNode();
  ProducerNode(const ProducerNode&) = delete;
  ProducerNode& operator=(const ProducerNode&) = delete;

  // Starts (again) and waits for the ready line (90 s at most); `env` e.g. a crash hook.
  std::expected<void, std::string> Start(std::vector<std::pair<std::string, std::string>> env = {});

  e2e::KleafProcess& process() { return *process_; }

  // Waits until the current run logged `rounds` more finished rounds than it had when called.
  bool WaitRounds(int rounds, std::chrono::milliseconds timeout);

  // The worker id the current run logged ("worker id N").
  std::optional<int64_t> WorkerId() const;

  // SIGTERM to the current run; whether it then exited with code 0 within 20 s.
  bool Stop();

  std::string Logs() const;

 private:
  std::string name_;
  std::filesystem::path config_;
  std::unique_ptr<e2e::KleafProcess> process_;
  std::string earlier_logs_;
};

}  // namespace kleaf::integration
