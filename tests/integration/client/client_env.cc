#include "tests/integration/client/client_env.h"

#include <unistd.h>

#include <atomic>
#include <charconv>
#include <cstdlib>
#include <map>
#include <set>

#include "kafka/client.h"

namespace kleaf::integration {

std::string UniqueTopic(const std::string& base) {
  static std::atomic<int> nonce{0};
  auto now = std::chrono::system_clock::now().time_since_epoch();
  return "kleaf-it-client-" + base + "-" + std::to_string(::getpid()) + "-" +
         std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(now).count()) + "-" +
         std::to_string(nonce++) + ".ids";
}

std::expected<void, std::string> CreateIdsTopic(const std::string& bootstrap,
                                                const std::string& topic, int32_t partitions,
                                                const std::vector<std::string>& tags) {
  std::vector<kafka::TopicSpec> specs;
  for (const auto& tag : tags) {
    for (auto mode : {IdBatch::Mode::kSegment, IdBatch::Mode::kSnowflake}) {
      specs.push_back({StreamTopic(topic, tag, mode), partitions, 1, {}});
    }
  }
  auto r = kafka::EnsureTopics({{"bootstrap.servers", bootstrap}}, specs, std::chrono::seconds(30));
  if (!r) return std::unexpected(r.error().message);
  return {};
}

std::expected<void, std::string> Publish(const std::string& bootstrap, const std::string& topic,
                                         int32_t partitions, const std::vector<IdBatch>& batches) {
  std::set<std::string> tags;
  for (const auto& b : batches) tags.insert(b.tag);
  if (auto created = CreateIdsTopic(bootstrap, topic, partitions, {tags.begin(), tags.end()});
      !created) {
    return created;
  }
  auto producer = kafka::Producer::Create({{"bootstrap.servers", bootstrap}, {"linger.ms", "5"}});
  if (!producer) return std::unexpected(producer.error().message);
  std::atomic<int> failed{0};
  std::map<std::string, int32_t> next;  // per stream topic: the partition of its next batch
  for (const auto& batch : batches) {
    const std::string stream_topic = StreamTopic(topic, batch.tag, batch.mode);
    int32_t& partition = next[stream_topic];
    auto sent = (*producer)->Send(stream_topic, partition, batch.tag, EncodeBatch(batch), {},
                                  [&failed](Result<int64_t> r) {
                                    if (!r) ++failed;
                                  });
    partition = (partition + 1) % partitions;
    if (!sent) return std::unexpected(sent.error().message);
  }
  if (auto f = (*producer)->Flush(std::chrono::seconds(30)); !f) return std::unexpected(f.error().message);
  if (failed.load() > 0) return std::unexpected(std::to_string(failed.load()) + " batches not delivered");
  return {};
}

std::vector<IdBatch> SegmentBatches(const std::string& tag, int64_t first, int64_t size, int count) {
  std::vector<IdBatch> out;
  for (int i = 0; i < count; ++i) {
    IdBatch b;
    b.tag = tag;
    b.mode = IdBatch::Mode::kSegment;
    b.start = first + i * size;
    b.end = b.start + size;
    out.push_back(std::move(b));
  }
  return out;
}

std::expected<std::unique_ptr<e2e::KleafProcess>, std::string> StartConsumer(
    const std::string& bootstrap, const std::string& topic, const std::string& group,
    const std::string& tag, std::chrono::milliseconds idle) {
  // KleafProcess runs `prefix... kleaf-binary args...`: `sh -c CMD` takes the kleaf binary as
  // its $0 and ignores it, so the example runs in its own process group like a kleaf node.
  std::string cmd = std::string("exec ") + KLEAF_EXAMPLES_DIR + "/batch_consumer_example " +
                    bootstrap + " " + topic + " " + group + " " + tag + " segment 0 " +
                    std::to_string(idle.count()) +
                    " session.timeout.ms=6000 heartbeat.interval.ms=500";
  // The consumer-protocol lane: the members' group under KIP-848 (the example passes the
  // property on; GroupConsumer drops the classic-only ones).
  if (const char* protocol = std::getenv("KLEAF_TEST_GROUP_PROTOCOL"); protocol && *protocol) {
    cmd += std::string(" group.protocol=") + protocol;
  }
  e2e::ProcessOptions options;
  options.prefix = {"/bin/sh", "-c", cmd};
  return e2e::KleafProcess::Start(std::move(options));
}

std::vector<int64_t> PrintedIds(const std::string& out) {
  std::vector<int64_t> ids;
  size_t pos = 0;
  for (size_t nl = out.find('\n'); nl != std::string::npos; pos = nl + 1, nl = out.find('\n', pos)) {
    int64_t v = -1;
    auto [end, ec] = std::from_chars(out.data() + pos, out.data() + nl, v);
    if (ec == std::errc() && end == out.data() + nl) ids.push_back(v);
  }
  return ids;
}

}  // namespace kleaf::integration
