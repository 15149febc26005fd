// IdsProducer in-process against the real broker, with an in-process allocator (LocalAllocator on
// a temp store) at the allocator seam: its metrics, and fencing by a newer run of the same node.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "allocator/local_allocator.h"
#include "base/clock.h"
#include "base/metrics.h"
#include "kafka/client.h"
#include "producer/ids_producer.h"
#include "state/store.h"
#include "tests/e2e/kleaf_process.h"
#include "tests/integration/cluster_env.h"

namespace kleaf::integration {
namespace {

using std::chrono::milliseconds;

// One partition per stream topic: the counts below are per stream (the cluster tests in
// producer_integration_test.cc spread streams over several).
constexpr int32_t kPartitions = 1;

class IdsProducerTest : public KafkaTest {
 protected:
  void SetUp() override {
    KafkaTest::SetUp();
    if (IsSkipped()) return;
    std::random_device rd;
    suffix_ = std::to_string(rd()) + std::to_string(rd());
    topic_ = "producer-inproc-" + suffix_ + ".ids";
    props_ = {{"bootstrap.servers", broker_.bootstrap}};
    auto topics = kafka::EnsureTopics(props_, {{topic_, kPartitions, 1, {}}}, milliseconds(30000));
    ASSERT_TRUE(topics.has_value()) << topics.error().message;
    auto store = state::Store::Open((dir_.path() / "state").string());
    ASSERT_TRUE(store.has_value()) << store.error().message;
    store_ = std::move(*store);
    allocator_ = std::make_unique<allocator::LocalAllocator>(
        *store_, SystemClock::Instance(),
        allocator::LocalAllocatorOptions{1000000, 1000, true, 2, {}});
    generator_ = std::make_unique<snowflake::SnowflakeGenerator>(
        snowflake::SnowflakeLayout::Default(), snowflake::SnowflakeGenerator::Options{7, true, 5},
        SystemClock::Instance());
  }

  producer::IdsProducerOptions Options(std::vector<producer::Stream> streams) const {
    producer::IdsProducerOptions o;
    o.props = props_;
    o.topic = topic_;
    o.group = topic_ + ".consumers";
    o.partitions = kPartitions;
    o.transactional_id = topic_ + ".producer.test";
    o.batches_ahead = 3;
    o.streams = std::move(streams);
    return o;
  }

  std::unique_ptr<producer::IdsProducer> NewProducer(std::vector<producer::Stream> streams) {
    return std::make_unique<producer::IdsProducer>(Options(std::move(streams)), *allocator_,
                                                   generator_.get(), SystemClock::Instance());
  }

  // A producer of `tag` in segment (batches of 10) and snowflake (batches of 4) modes, and its
  // first round's result (nullopt, with a failure, if it could not run).
  std::pair<std::unique_ptr<producer::IdsProducer>,
            std::optional<producer::IdsProducer::RoundResult>>
  StartTwoStreams(const std::string& tag) {
    auto producer =
        NewProducer({{tag, IdBatch::Mode::kSegment, 10}, {tag, IdBatch::Mode::kSnowflake, 4}});
    if (auto init = producer->Init(); !init) {
      ADD_FAILURE() << init.error().message;
      return {std::move(producer), std::nullopt};
    }
    auto first = producer->RunRound();
    if (!first) {
      ADD_FAILURE() << first.error().message;
      return {std::move(producer), std::nullopt};
    }
    return {std::move(producer), *first};
  }

  // The group consumes every batch of `tag`'s segment stream: once the first round's commit is
  // visible (the last stable offset of the tag's partition past its 3 batches), the group's
  // committed offset moves to that end, which is returned (nullopt, with a failure, otherwise).
  std::optional<int64_t> ConsumeFirstRound(const std::string& tag) {
    const std::string topic = StreamTopic(topic_, tag, IdBatch::Mode::kSegment);
    const int32_t p = kafka::PartitionFor(tag, kPartitions);
    auto reader = kafka::PartitionReader::Create(props_);
    if (!reader) {
      ADD_FAILURE() << reader.error().message;
      return std::nullopt;
    }
    Result<std::pair<int64_t, int64_t>> marks = Fail(Code::kUnavailable, "not asked");
    if (!WaitUntil(
            [&] {
              marks = (*reader)->Watermarks(topic, p, milliseconds(2000));
              return marks && marks->second >= 3;
            },
            milliseconds(10000))) {
      ADD_FAILURE() << "the first round's 3 batches never became visible";
      return std::nullopt;
    }
    auto group = kafka::GroupOffsets::Create(props_, topic_ + ".consumers");
    if (!group) {
      ADD_FAILURE() << group.error().message;
      return std::nullopt;
    }
    if (auto r = (*group)->Commit({{topic, p, marks->second}}); !r) {
      ADD_FAILURE() << r.error().message;
      return std::nullopt;
    }
    return marks->second;
  }

  e2e::TempDir dir_;
  std::string suffix_;
  std::string topic_;
  kafka::Properties props_;
  std::unique_ptr<state::Store> store_;
  std::unique_ptr<allocator::LocalAllocator> allocator_;
  std::unique_ptr<snowflake::SnowflakeGenerator> generator_;
};

// The metric of `name` with `labels` as /metrics renders it, or -1 if absent.
double MetricValue(const std::string& name, const std::string& labels) {
  std::string text = metrics::Registry::Default().Render();
  std::string needle = name + "{" + labels + "} ";
  auto at = text.find(needle);
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + needle.size()));
}

TEST_F(IdsProducerTest, MetricsCountPublishedBatchesAheadAndLag) {
  const std::string tag = "m" + suffix_;
  auto [producer, first] = StartTwoStreams(tag);
  ASSERT_TRUE(producer && first.has_value());
  EXPECT_EQ(first->batches, 6);
  EXPECT_EQ(first->ids, 3 * 10 + 3 * 4);
  const std::string seg = "tag=\"" + tag + "\",mode=\"segment\"";
  const std::string sf = "tag=\"" + tag + "\",mode=\"snowflake\"";
  EXPECT_EQ(MetricValue("kleaf_producer_batches_published_total", seg), 3);
  EXPECT_EQ(MetricValue("kleaf_producer_ids_published_total", seg), 30);
  EXPECT_EQ(MetricValue("kleaf_producer_batches_published_total", sf), 3);
  EXPECT_EQ(MetricValue("kleaf_producer_ids_published_total", sf), 12);
  EXPECT_EQ(MetricValue("kleaf_producer_batches_ahead", seg), 3);
  EXPECT_EQ(MetricValue("kleaf_producer_batches_ahead", sf), 3);
  EXPECT_EQ(producer->Ahead(0), 3);

  // Nothing consumed: the next rounds publish nothing, whenever the batches become readable.
  for (int i = 0; i < 3; ++i) {
    auto again = producer->RunRound();
    ASSERT_TRUE(again.has_value()) << again.error().message;
    EXPECT_EQ(again->batches, 0);
  }
  // 3 batches (and the commit markers) on each stream's topic, none committed yet.
  const std::string seg_lag = seg + ",partition=\"0\"";
  const std::string sf_lag = sf + ",partition=\"0\"";
  ASSERT_TRUE(WaitUntil(
      [&] {
        (void)producer->RunRound();
        return MetricValue("kleaf_ids_consumer_lag", seg_lag) >= 3 &&
               MetricValue("kleaf_ids_consumer_lag", sf_lag) >= 3;
      },
      milliseconds(10000)));

  // The group consumes everything: lag 0, and the next round tops up 3 + 3 again.
  auto reader = kafka::PartitionReader::Create(props_);
  ASSERT_TRUE(reader.has_value());
  auto group = kafka::GroupOffsets::Create(props_, topic_ + ".consumers");
  ASSERT_TRUE(group.has_value());
  for (auto mode : {IdBatch::Mode::kSegment, IdBatch::Mode::kSnowflake}) {
    const std::string stream_topic = StreamTopic(topic_, tag, mode);
    auto marks = (*reader)->Watermarks(stream_topic, 0, milliseconds(10000));
    ASSERT_TRUE(marks.has_value());
    ASSERT_TRUE((*group)->Commit({{stream_topic, 0, marks->second}}).has_value());
  }
  auto refill = producer->RunRound();
  ASSERT_TRUE(refill.has_value()) << refill.error().message;
  EXPECT_EQ(refill->batches, 6);
  EXPECT_EQ(MetricValue("kleaf_ids_consumer_lag", seg_lag), 0);
  EXPECT_EQ(MetricValue("kleaf_ids_consumer_lag", sf_lag), 0);
  EXPECT_EQ(MetricValue("kleaf_producer_batches_published_total", seg), 6);
  EXPECT_EQ(MetricValue("kleaf_producer_batches_ahead", seg), 3);
}

// A round counts the partitions the consumers had emptied when it began (RoundResult::drained):
// the scheduled rounds then follow each other at once instead of one per check_interval, so a
// stream is not capped at batches_ahead x partitions x batch_size per interval. A partition with
// batches still ahead, or one only partly consumed, is not counted.
TEST_F(IdsProducerTest, RoundCountsThePartitionsTheConsumersEmptied) {
  const std::string tag = "d" + suffix_;
  auto [producer, first] = StartTwoStreams(tag);
  ASSERT_TRUE(producer && first.has_value());
  EXPECT_EQ(first->batches, 6);
  EXPECT_EQ(first->drained, 2) << "both streams' partitions began empty";
  auto second = producer->RunRound();
  ASSERT_TRUE(second.has_value()) << second.error().message;
  EXPECT_EQ(second->batches, 0);
  EXPECT_EQ(second->drained, 0) << "nothing was consumed";
  ASSERT_TRUE(ConsumeFirstRound(tag).has_value());  // the segment stream's partition, to its end
  auto third = producer->RunRound();
  ASSERT_TRUE(third.has_value()) << third.error().message;
  EXPECT_EQ(third->batches, 3);
  EXPECT_EQ(third->drained, 1) << "only the segment stream's partition was emptied";
}

// Issue 36: batches below a partition's log start are gone for every reader: deleted by the ids
// topic's own retention (some batches, not others), or claimed by consumers, which move the log
// start past a batch before they commit it (the claim floor). With no committed offset in the
// group (none yet, or expired), a round counts only the batches at or past the log start and tops
// the partition up; counting from offset 0 it would publish nothing, and the stream would starve.
TEST_F(IdsProducerTest, BatchesBelowTheLogStartAreConsumedAndToppedUp) {
  const std::string tag = "r" + suffix_;
  auto [producer, first] = StartTwoStreams(tag);
  ASSERT_TRUE(producer && first.has_value());
  ASSERT_EQ(first->batches, 6);
  const std::string topic = StreamTopic(topic_, tag, IdBatch::Mode::kSegment);
  auto reader = kafka::PartitionReader::Create(props_);
  ASSERT_TRUE(reader.has_value());
  Result<std::pair<int64_t, int64_t>> marks = Fail(Code::kUnavailable, "not asked");
  ASSERT_TRUE(WaitUntil(
      [&] {
        marks = (*reader)->Watermarks(topic, 0, milliseconds(2000));
        return marks && marks->second >= 3;
      },
      milliseconds(10000)))
      << "the first round's 3 batches never became visible";
  // Two of the three batches (offsets 0 and 1; 2 is the third, 3 the commit marker) are deleted.
  const auto offsets =
      dir_.WriteFile("delete.json", R"({"version":1,"partitions":[{"topic":")" + topic +
                                        R"(","partition":0,"offset":2}]})");
  auto deleted = RunScript({broker_.script, "tool", "delete-records", "--bootstrap-server",
                            broker_.bootstrap, "--offset-json-file", offsets.string()},
                           std::chrono::seconds(60));
  ASSERT_EQ(deleted.exit_code, 0) << deleted.output;
  auto log_starts = kafka::LogStartClient::Create(props_);
  ASSERT_TRUE(log_starts.has_value()) << log_starts.error().message;
  auto starts = (*log_starts)->LogStarts({{topic, 0, 0}}, milliseconds(10000));
  ASSERT_TRUE(starts.has_value()) << starts.error().message;
  ASSERT_EQ(starts->front().offset, 2);

  auto round = producer->RunRound();
  ASSERT_TRUE(round.has_value()) << round.error().message;
  EXPECT_EQ(round->batches, 2) << "one batch is left ahead of the log start: two more are wanted";
  EXPECT_EQ(producer->Ahead(0), 3);
  auto again = producer->RunRound();
  ASSERT_TRUE(again.has_value()) << again.error().message;
  EXPECT_EQ(again->batches, 0);
}

// An obfuscated tag's segment stream lists its IDs: the permuted IDs of the tag (positive, each
// once, not the run of counters its segment covered, which would reveal the count), never a range
// of counters. A batch_size too large to list in one record is refused, naming the key.
TEST_F(IdsProducerTest, ObfuscatedTagsBatchesListPermutedIds) {
  const std::string tag = "o" + suffix_;
  allocator::TagUpdate update;
  update.step = 1000;
  update.id_mode = state::IdMode::kObfuscated;
  auto created = allocator_->PutTagNow(tag, update);
  ASSERT_TRUE(created) << created.error().message;
  auto producer = NewProducer({{tag, IdBatch::Mode::kSegment, 10}});
  ASSERT_TRUE(producer->Init().has_value());
  auto first = producer->RunRound();
  ASSERT_TRUE(first.has_value()) << first.error().message;
  EXPECT_EQ(first->batches, 3);
  EXPECT_EQ(first->ids, 30);

  auto reader = kafka::PartitionReader::Create(props_);
  ASSERT_TRUE(reader.has_value());
  // The commit returned; its markers, which make the batches readable, follow a moment later.
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto marks = (*reader)->Watermarks(StreamTopic(topic_, tag, IdBatch::Mode::kSegment), 0,
                                           milliseconds(2000));
        return marks && marks->second >= 3;
      },
      milliseconds(10000)));
  std::vector<int64_t> ids;
  int ranges = 0;
  auto end = (*reader)->ReadToEnd(
      StreamTopic(topic_, tag, IdBatch::Mode::kSegment), 0, 0,
      [&](const kafka::Message& m) {
        ASSERT_TRUE(m.value.has_value());
        auto batch = DecodeBatch(*m.value);
        ASSERT_TRUE(batch.has_value()) << batch.error();
        if (batch->ids.empty()) ++ranges;
        ids.insert(ids.end(), batch->ids.begin(), batch->ids.end());
      },
      milliseconds(20000));
  ASSERT_TRUE(end) << end.error().message;
  EXPECT_EQ(ranges, 0) << "a batch of an obfuscated tag was published as a range of counters";
  ASSERT_EQ(ids.size(), 30u);
  std::set<int64_t> distinct(ids.begin(), ids.end());
  EXPECT_EQ(distinct.size(), 30u);
  EXPECT_GT(*distinct.begin(), 0);
  EXPECT_GT(*distinct.rbegin() - *distinct.begin(), 1'000'000)
      << "30 IDs within a run of counters: not permuted";

  // The group consumes the three batches, so the next producer has batches to make.
  ASSERT_TRUE(ConsumeFirstRound(tag).has_value());
  auto too_large =
      NewProducer({{tag, IdBatch::Mode::kSegment, producer::kMaxListedSegmentBatch + 1}});
  ASSERT_TRUE(too_large->Init().has_value());
  auto refused = too_large->RunRound();
  ASSERT_TRUE(refused.has_value()) << refused.error().message;  // the stream fails, not the round
  EXPECT_EQ(refused->batches, 0);
}

TEST_F(IdsProducerTest, NewerRunOfTheSameNodeFencesTheOlder) {
  const std::string tag = "f" + suffix_;
  auto older = NewProducer({{tag, IdBatch::Mode::kSegment, 5}});
  ASSERT_TRUE(older->Init().has_value());
  ASSERT_TRUE(older->RunRound().has_value());
  EXPECT_FALSE(older->fatal());

  auto newer = NewProducer({{tag, IdBatch::Mode::kSegment, 5}});
  ASSERT_TRUE(newer->Init().has_value());
  // The group consumes everything, so the older run has something to publish: it is fenced.
  const int32_t p = kafka::PartitionFor(tag, kPartitions);
  auto reader = kafka::PartitionReader::Create(props_);
  ASSERT_TRUE(reader.has_value());
  auto marks = (*reader)->Watermarks(StreamTopic(topic_, tag, IdBatch::Mode::kSegment), p,
                                     milliseconds(10000));
  ASSERT_TRUE(marks.has_value());
  auto group = kafka::GroupOffsets::Create(props_, topic_ + ".consumers");
  ASSERT_TRUE(group.has_value());
  ASSERT_TRUE((*group)
                  ->Commit({{StreamTopic(topic_, tag, IdBatch::Mode::kSegment), p, marks->second}})
                  .has_value());

  auto fenced = older->RunRound();
  ASSERT_FALSE(fenced.has_value());
  EXPECT_TRUE(older->fatal());
  EXPECT_FALSE(older->RunRound().has_value());  // and stays so
  auto ok = newer->RunRound();
  ASSERT_TRUE(ok.has_value()) << ok.error().message;
  EXPECT_EQ(ok->batches, 3);
}

// The broker freezes (SIGSTOP) between a round's sends and its commit: the commit times out with
// its outcome unknown, and librdkafka refuses an abort while it is so. The next round must first
// finish that transaction (call the commit again: it lands or is aborted) instead of beginning
// one, which would be refused for good: the producer neither dies nor hangs, and the batches are
// published once, by whichever round.
TEST_F(IdsProducerTest, RoundWhoseCommitTimesOutIsFinishedBeforeTheNext) {
  const std::string tag = "z" + suffix_;
  BrokerFreeze freeze(broker_);
  ASSERT_TRUE(freeze.found()) << "no pid in " << broker_.dir << "/kafka.pid";
  auto options = Options({{tag, IdBatch::Mode::kSegment, 10}});
  // The producer gives the commit up after 5 s; the broker thaws then, well before the
  // transaction's 10 s timeout would make the coordinator abort it.
  options.txn_timeout = milliseconds(10000);
  bool frozen = false;
  options.before_commit = [&](int64_t) {
    if (!frozen) frozen = freeze.Freeze();
  };
  auto producer = std::make_unique<producer::IdsProducer>(options, *allocator_, generator_.get(),
                                                          SystemClock::Instance());
  ASSERT_TRUE(producer->Init().has_value());
  auto failed = producer->RunRound();
  freeze.Thaw();
  ASSERT_TRUE(frozen);
  ASSERT_FALSE(failed.has_value()) << "a round committed on a frozen broker";
  std::cerr << "[frozen commit] round failed: " << failed.error().message << "\n";
  EXPECT_FALSE(producer->fatal()) << failed.error().message;

  std::optional<producer::IdsProducer::RoundResult> next;
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto r = producer->RunRound();
        if (r) next = *r;
        if (!r) std::cerr << "[frozen commit] next round: " << r.error().message << "\n";
        return r.has_value() || producer->fatal();
      },
      milliseconds(60000)));
  ASSERT_FALSE(producer->fatal());
  ASSERT_TRUE(next);
  // 3 batches ahead, published by the first round (its commit went through when called again)
  // or by the second (the first was aborted), never by both.
  EXPECT_EQ(producer->Ahead(0), 3);
  std::cerr << "[frozen commit] the next round published " << next->batches << " batches\n";
  auto reader = kafka::PartitionReader::Create(props_);
  ASSERT_TRUE(reader.has_value());
  const int32_t p = kafka::PartitionFor(tag, kPartitions);
  std::set<std::string> values;
  int records = 0;
  auto end = (*reader)->ReadToEnd(
      StreamTopic(topic_, tag, IdBatch::Mode::kSegment), p, 0,
      [&](const kafka::Message& m) {
        ++records;
        if (m.value) values.insert(*m.value);
      },
      milliseconds(20000));
  ASSERT_TRUE(end.has_value()) << end.error().message;
  EXPECT_EQ(records, 3);
  EXPECT_EQ(values.size(), 3u);
}

// The transactional producer fails for good without being fenced (librdkafka's fatal error, as an
// unrecoverable idempotence sequence would raise): that round fails, the node stays up, and the
// next round replaces the producer (init_transactions ends its open transaction) and publishes.
// No batch is published twice.
TEST_F(IdsProducerTest, TransactionalProducerThatFailsForGoodIsReplacedByTheNextRound) {
  const std::string tag = "r" + suffix_;
  auto producer = NewProducer({{tag, IdBatch::Mode::kSegment, 10}});
  ASSERT_TRUE(producer->Init().has_value());
  auto first = producer->RunRound();
  ASSERT_TRUE(first.has_value()) << first.error().message;
  EXPECT_EQ(first->batches, 3);
  // The group consumes everything, so the next round has batches to publish.
  const int32_t p = kafka::PartitionFor(tag, kPartitions);
  const auto consumed_to = ConsumeFirstRound(tag);
  ASSERT_TRUE(consumed_to.has_value());

  producer->InjectFatalErrorForTesting();
  auto failed = producer->RunRound();
  ASSERT_FALSE(failed.has_value()) << "a round published with a producer that failed for good";
  EXPECT_FALSE(producer->fatal()) << "a fatal error that is no fencing ended the producer";
  const auto start = SteadyClock::now();
  auto next = producer->RunRound();
  ASSERT_TRUE(next.has_value()) << next.error().message;
  // The new producer's init_transactions (10 s at most) and one round.
  EXPECT_LT(SecondsSince(start), 15.0);
  EXPECT_EQ(next->batches, 3);
  EXPECT_FALSE(producer->fatal());

  // Read back once the second round's commit is visible: 6 batches, each once.
  std::set<std::string> values;
  int records = 0;
  WaitUntil(
      [&] {
        values.clear();
        records = 0;
        auto reread = kafka::PartitionReader::Create(props_);
        if (!reread) return false;
        auto end = (*reread)->ReadToEnd(
            StreamTopic(topic_, tag, IdBatch::Mode::kSegment), p, 0,
            [&](const kafka::Message& m) {
              ++records;
              if (m.value) values.insert(*m.value);
            },
            milliseconds(5000));
        return end.has_value() && records >= 6;
      },
      milliseconds(20000));
  EXPECT_EQ(records, 6);
  EXPECT_EQ(values.size(), 6u);
}

// The broker restarts between rounds and while a round runs: a round fails within its bound
// (reading back what was published waits 10 s at most), the producer is neither fenced nor
// stuck, and once the broker is back the rounds publish again by themselves, no batch twice.
TEST_F(IdsProducerTest, RoundsFailInTimeWhileTheBrokerRestartsAndResumeAfter) {
  ASSERT_FALSE(broker_.script.empty() || broker_.port.empty())
      << "this test restarts the broker: it needs KLEAF_TEST_KAFKA_SCRIPT and _PORT";
  const std::string tag = "b" + suffix_;
  auto producer = NewProducer({{tag, IdBatch::Mode::kSegment, 10}});
  ASSERT_TRUE(producer->Init().has_value());
  auto first = producer->RunRound();
  ASSERT_TRUE(first.has_value()) << first.error().message;
  EXPECT_EQ(first->batches, 3);
  const int32_t p = kafka::PartitionFor(tag, kPartitions);
  const auto consumed_to = ConsumeFirstRound(tag);
  ASSERT_TRUE(consumed_to.has_value());
  {
    BrokerRestartGuard guard(broker_);
    auto stopped = broker_.Stop();
    ASSERT_TRUE(stopped) << stopped.error();
    const auto t0 = SteadyClock::now();
    auto down = producer->RunRound();
    const double took = SecondsSince(t0);
    std::cerr << "[restart] round with the broker stopped: "
              << (down ? "ok?" : down.error().message) << " after " << took << " s\n";
    EXPECT_FALSE(down.has_value()) << "a round published with the broker stopped";
    // Reading back (10 s), the committed offsets (10 s), and a segment (in-process here).
    EXPECT_LT(took, 25.0);
    EXPECT_FALSE(producer->fatal());
    auto started = broker_.Start();
    ASSERT_TRUE(started) << started.error();
  }
  // The rounds go on by themselves and top the consumed partition up again (right after the
  // restart the committed offsets can read as none for a moment: a round may publish nothing).
  std::string last_error;
  std::set<std::string> values;
  int records = 0;
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto r = producer->RunRound();
        if (!r) last_error = r.error().message;
        if (!r || producer->fatal()) return producer->fatal();
        values.clear();
        records = 0;
        auto reread = kafka::PartitionReader::Create(props_);
        if (!reread) return false;
        auto end = (*reread)->ReadToEnd(
            StreamTopic(topic_, tag, IdBatch::Mode::kSegment), p, 0,
            [&](const kafka::Message& m) {
              ++records;
              if (m.value) values.insert(*m.value);
            },
            milliseconds(10000));
        return end.has_value() && records >= 6;
      },
      milliseconds(60000)))
      << "not topped up within 60 s of the restart (" << records << " records, the group's "
      << "committed offset " <<
      [&] {
        auto fresh = kafka::GroupOffsets::Create(props_, topic_ + ".consumers");
        if (!fresh) return std::string("?");
        auto c = (*fresh)->Committed({{StreamTopic(topic_, tag, IdBatch::Mode::kSegment), p}},
                                     milliseconds(10000));
        return c ? std::to_string(c->front().offset) : c.error().message;
      }()
      << ", end " << *consumed_to << "): " << last_error;
  ASSERT_FALSE(producer->fatal()) << last_error;
  EXPECT_EQ(producer->Ahead(0), 3);
  EXPECT_EQ(records, 6);
  EXPECT_EQ(values.size(), 6u);
}

}  // namespace
}  // namespace kleaf::integration
