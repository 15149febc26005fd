// Client-library integration support: ids topics of their own on the real broker, batches
// published into them with kleaf's kafka::Producer, and batch_consumer_example processes whose
// printed IDs the tests collect.
#pragma once

#include <chrono>
#include <cstdint>
#include <expected>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "kleaf/batch.h"
#include "tests/e2e/kleaf_process.h"

namespace kleaf::integration {

// A topic name no other test (or earlier run) uses.
std::string UniqueTopic(const std::string& base);

// Creates the stream topics (StreamTopic) of `tags` on the ids topic `topic`, segment and
// snowflake, with `partitions` partitions each, as the producer does.
std::expected<void, std::string> CreateIdsTopic(const std::string& bootstrap,
                                                const std::string& topic, int32_t partitions,
                                                const std::vector<std::string>& tags);

// Publishes `batches` (key = tag) to their streams' topics, the i-th batch of a stream to
// partition i % partitions, and waits until all are delivered.
std::expected<void, std::string> Publish(const std::string& bootstrap, const std::string& topic,
                                         int32_t partitions, const std::vector<IdBatch>& batches);

// Segment batches of `tag`: [first + i*size, first + (i+1)*size) for i in [0, count).
std::vector<IdBatch> SegmentBatches(const std::string& tag, int64_t first, int64_t size, int count);

// Starts batch_consumer_example in group `group` for the segment stream of `tag`, count 0 (until
// idle for `idle`), with a 6 s session timeout so that a killed member leaves the group quickly.
std::expected<std::unique_ptr<e2e::KleafProcess>, std::string> StartConsumer(
    const std::string& bootstrap, const std::string& topic, const std::string& group,
    const std::string& tag, std::chrono::milliseconds idle);

// The IDs of the complete lines `out` holds (a last line without '\n' is left out).
std::vector<int64_t> PrintedIds(const std::string& out);
}  // namespace kleaf::integration
