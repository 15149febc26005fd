#include "tests/integration/producer/producer_env.h"

#include <gtest/gtest.h>

#include <iostream>
#include <regex>

#include "kafka/client.h"

namespace kleaf::integration {

using std::chrono::milliseconds;
using std::chrono::seconds;

namespace {
constexpr milliseconds kKafkaTimeout{20000};
}  // namespace

std::vector<std::string> StreamTopics(const std::string& ids_topic,
                                      const std::vector<std::string>& streams) {
  std::vector<std::string> topics;
  for (const auto& s : streams) {
    const auto slash = s.find('/');
    IdBatch::Mode mode = IdBatch::Mode::kSegment;
    EXPECT_TRUE(ParseMode(s.substr(slash + 1), mode)) << s;
    topics.push_back(StreamTopic(ids_topic, s.substr(0, slash), mode));
  }
  return topics;
}

std::vector<Published> ReadAll(const std::string& bootstrap, const std::vector<std::string>& topics,
                               int32_t partitions, bool committed) {
  kafka::Properties props{{"bootstrap.servers", bootstrap}};
  if (!committed) props["isolation.level"] = "read_uncommitted";
  auto reader = kafka::PartitionReader::Create(props);
  EXPECT_TRUE(reader.has_value()) << reader.error().message;
  std::vector<Published> out;
  if (!reader) return out;
  for (const auto& topic : topics) {
    for (int32_t p = 0; p < partitions; ++p) {
      auto end = (*reader)->ReadToEnd(
          topic, p, 0,
          [&](const kafka::Message& m) {
            ASSERT_TRUE(m.value.has_value());
            auto batch = DecodeBatch(*m.value);
            ASSERT_TRUE(batch.has_value()) << batch.error() << ": " << *m.value;
            EXPECT_EQ(m.key, batch->tag);
            out.push_back({topic, p, m.offset, *m.value, std::move(*batch)});
          },
          kKafkaTimeout);
      EXPECT_TRUE(end.has_value()) << end.error().message;
    }
  }
  return out;
}

ProducerNode::ProducerNode(Cluster& cluster, const std::string& name, int batches_ahead,
                           const std::string& streams)
    : ProducerNode(cluster, name,
                   cluster.Config(name, cluster.dir() / (name + "-state"))
                       .Set("log.level", "debug")
                       .Set("producer.batches_ahead", std::to_string(batches_ahead))
                       .Set("producer.check_interval_ms", "100")
                       .Set("producer.streams", streams)) {}

ProducerNode::ProducerNode(Cluster& cluster, const std::string& name, const e2e::TestConfig& config)
    : name_(name), config_(cluster.WriteConfig(name + ".yaml", config)) {}

ProducerNode::~ProducerNode() {
  if (::testing::Test::HasFailure())
    std::cerr << "===== producer " << name_ << " =====\n" << Logs();
}

std::expected<void, std::string> ProducerNode::Start(
    std::vector<std::pair<std::string, std::string>> env) {
  if (process_) earlier_logs_ += process_->Stderr();
  auto p =
      e2e::KleafProcess::Start({{"producer", "--config", config_.string()}, {}, std::move(env)});
  if (!p) return std::unexpected(p.error());
  process_ = std::move(*p);
  const auto deadline = SteadyClock::now() + seconds(90);
  while (process_->Stdout().find("kleaf producer running") == std::string::npos) {
    if (SteadyClock::now() > deadline) {
      return std::unexpected("producer not ready in time:\n" + process_->Stderr());
    }
    if (auto s = process_->WaitExit(milliseconds(50)); !s.timed_out) {
      return std::unexpected("producer exited (" + s.ToString() + "):\n" + process_->Stderr());
    }
  }
  return {};
}

bool ProducerNode::WaitRounds(int rounds, milliseconds timeout) {
  const int target = Count(process_->Stderr(), "[producer] checked:") + rounds;
  return WaitUntil([&] { return Count(process_->Stderr(), "[producer] checked:") >= target; },
                   timeout);
}

std::optional<int64_t> ProducerNode::WorkerId() const {
  std::smatch m;
  std::string log = process_->Stderr();
  static const std::regex kLine(R"(\[producer\] node \S+ running \(.*worker id (\d+)\))");
  if (!std::regex_search(log, m, kLine)) return std::nullopt;
  return std::stoll(m[1].str());
}

bool ProducerNode::Stop() {
  process_->Terminate();
  const auto status = process_->WaitExit(seconds(20));
  return status.exited && status.code == 0;
}

std::string ProducerNode::Logs() const {
  return earlier_logs_ + (process_ ? process_->Stderr() : std::string());
}

}  // namespace kleaf::integration
