// BatchConsumer: how an event-driven service takes IDs from the ids topic (`<prefix>.ids`) that
// `kleaf producer` fills. It joins a consumer group, claims batches and hands their IDs out one
// at a time or in bulk. Installed with the library; no librdkafka type appears here.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kleaf/batch.h"
#include "kleaf/client_error.h"
#include "kleaf/export.h"

namespace kleaf {

// Why no ID is ever handed out twice (invariant I4), whatever crashes or rebalances happen:
//  - A batch is "claimed" by committing its offset + 1 to the group SYNCHRONOUSLY; no ID of it is
//    handed out before that commit succeeded (one commit may claim several consecutive batches
//    of a partition at once). A crash after the commit loses the batch (a gap),
//    never duplicates it: the next owner of the partition starts at the committed offset.
//  - After that commit and before any ID is handed out, the partition's log start is moved past
//    the batch (Kafka's DeleteRecords): the claim floor. Kafka deletes an empty group's committed
//    offsets offsets.retention.minutes after the group emptied, and a consumer without a
//    committed offset starts at the log start, so the floor, not the offset, is what keeps a
//    handed-out batch from being read again after every member was down that long. A batch whose
//    floor did not move is not handed out (a gap). The principal needs the DELETE right on the
//    stream topics (checked before the first claim of a partition: without it, or on a compacted
//    topic, the stream is refused as below).
//  - Each batch names the group its producer publishes it for (producer.group); a batch of
//    another group is never claimed (Stats::foreign_batches; Next/Take of its stream fail with
//    kRejected saying so): two groups on one stream would each claim every batch.
//  - Commits go only for partitions this member holds right now, and the broker checks the
//    member's generation: a member that was dropped from the group (SIGSTOP, a long GC-like
//    pause, session timeout) gets ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID, so it drops the batch
//    instead of handing it out. The broker rejects commits while a rebalance completes, and a
//    new owner reads the committed offset only after it joined the new generation, so a commit
//    that succeeded is seen by every later owner.
//  - The group uses an eager assignor (roundrobin by default; range is allowed): every member
//    gives up all partitions before a new assignment. Cooperative assignors are refused.
//  - Batches fetched but not committed yet are dropped when their partition is revoked, and
//    when a commit fails (the partition is rewound, so the rightful owner reads them).
//  - A commit whose outcome is unknown (no answer within commit_timeout, or a local timeout: it
//    may still be applied) is never overtaken: its partition is paused and gets no other commit
//    until that one is settled, then reads on from the group's committed offset. Otherwise an
//    older commit landing after a newer one would move the group's offset back. "Settled" is
//    librdkafka's answer, or, when librdkafka gave the request up (a local timeout), 5 s after
//    that: a margin for a broker still holding it, not a proof (only a new generation fences
//    such a request for certain; any rebalance gives one).
//  - Each partition keeps a floor, the group's committed offset read at assignment and moved
//    past each claim: a record below it (librdkafka can fetch from a stale position after a
//    pause or seek) is skipped, never handed out (Stats::stale_batches).
//  - Reads are read_committed: batches of aborted producer transactions are never seen.
// One consumer group per ids topic: two groups on the same topic would each receive every batch
// (refused, above). Give each consuming application its own ids topic and use one group_id for
// all its processes.
//
// One topic per stream (Options::streams): a member fetches only the streams it named, so no
// batch of another stream is ever claimed or dropped by it; see docs/architecture.md.
//
// Threads: one background thread owns the librdkafka consumer (polls, claims, rebalances); it
// claims the next batch of a (tag, mode) key before the current one runs out, so Next() rarely
// waits. Records it fetched and has not claimed wait in a bounded queue (uncommitted, so not
// ours: dropped on revoke). Batches of keys nobody asked for stay in a bounded buffer; when the
// buffer is full and a caller waits for another key of which nothing is buffered, the newest
// buffered batch of an unwanted key is dropped (a gap; counted in Stats::dropped_batches). Claimed
// batches still buffered when the consumer closes or crashes are gaps
// too. All public methods are thread-safe.
class BatchConsumer {
 public:
  // One of librdkafka's log lines (connection failures, request timeouts, group changes).
  struct LogLine {
    enum class Level { kDebug, kInfo, kWarn, kError };
    Level level = Level::kInfo;
    std::string_view client;    // librdkafka's name of the handle, e.g. "rdkafka#consumer-1"
    std::string_view facility;  // librdkafka's subsystem tag, e.g. "FAIL", "REQTMOUT"
    std::string_view message;
  };
  // Called on librdkafka's threads: must be thread-safe, quick, and must not call back into the
  // consumer. The views are valid during the call only. Never called once Close() returned (the
  // lines of a leave still under way then go to stderr, as with no callback).
  using LogCallback = std::function<void(const LogLine&)>;

  // A stream of IDs: the batches of one tag in one mode.
  struct Stream {
    std::string tag;
    IdBatch::Mode mode = IdBatch::Mode::kSegment;
  };

  struct Options {
    std::string bootstrap;  // Kafka bootstrap servers, host:port[,host:port...]
    // The ids topic: each stream's batches are on a topic of its own, StreamTopic(topic, tag,
    // mode) (kleaf/batch.h), which the producer creates.
    std::string topic = "kleaf.ids";
    std::string group_id = "kleaf.ids.consumers";
    // The streams this consumer takes IDs of (at least one). It subscribes to their topics and
    // to nothing else, so it never claims a batch of another stream; Next/Take of a stream not
    // listed is refused (kInvalidArgument). Every member of the group asking for a stream holds
    // partitions of it while the stream's topic has at least as many partitions as such members.
    std::vector<Stream> streams;
    // Extra librdkafka properties (e.g. security settings). Unless given here, kleaf sets
    // session.timeout.ms 6000 and heartbeat.interval.ms 1000 (a dead member's partitions move
    // after 6 s), socket.timeout.ms 10000 and the roundrobin assignor.
    // enable.auto.commit=true, isolation.level=read_uncommitted and cooperative assignors are
    // refused: they would break the guarantee above. group.protocol may be "classic" (the
    // default), "consumer" (KIP-848, Kafka 4.x: partitions move incrementally, the broker decides
    // the session timeout: 45 s unless its group.consumer.* settings say less) or "auto" (the
    // consumer protocol where the brokers offer it); docs/ids-topic.md argues why each keeps it.
    std::map<std::string, std::string> properties;
    int max_buffered_batches = 16;  // claimed batches buffered at most, all keys together
    int prefetch_batches = 1;       // batches claimed ahead of the current one per key in use
    std::chrono::milliseconds commit_timeout{5000};
    // How long the group leave of Close() is tried; past it the member is dropped by the
    // coordinator at its session timeout instead. Then librdkafka still waits for a commit in
    // flight: up to socket.timeout.ms (10 s unless set in `properties`), or session.timeout.ms
    // (6 s unless set in `properties`) while the coordinator is unknown. Measured with a frozen
    // broker and with a stopped one: 10 s in all.
    std::chrono::milliseconds close_timeout{10000};
    // How long Close() itself waits for that leave; past it the leave goes on in a thread of its
    // own (for up to close_timeout) and Close() returns. With the broker up a leave takes
    // milliseconds, except during a rebalance that waits for a member that died without leaving:
    // the coordinator answers the leave once that member's session expired (up to 6 s). A
    // process that exits right after Close() ends a leave still under way (the group then drops
    // this member at its session timeout): set close_wait to close_timeout to wait it out.
    std::chrono::milliseconds close_wait{500};
    // Where librdkafka's log lines go. Empty (the default): warnings and errors to stderr, one
    // line each in kleaf's text format ("<UTC time> warn [kafka] <client> <facility>: <message>");
    // info and debug lines are dropped. A callback that does nothing silences them.
    LogCallback log;
  };

  struct Stats {
    int64_t claimed_batches = 0;    // committed and buffered
    int64_t dropped_batches = 0;    // claimed but given up (eviction): gaps
    int64_t released_batches = 0;   // fetched, not committed, let go (revoked, commit failed)
    int64_t commit_failures = 0;
    int64_t malformed_batches = 0;  // not a batch: skipped
    int64_t stale_batches = 0;      // fetched below the group's committed offset: skipped
    // Published for another consumer group (the batch's "group"): skipped, never claimed.
    int64_t foreign_batches = 0;
    int64_t floor_failures = 0;     // claims whose floor (log start) did not move after the commit
    int64_t unfloored_batches = 0;  // their batches: committed, not handed out (gaps)
    int64_t quarantines = 0;        // commits whose outcome was unknown (see above)
    int64_t rebalances = 0;
    int assigned_partitions = 0;
    int held_batches = 0;           // fetched, not claimed yet (fetching pauses when many)
    std::string last_error;
  };

  // Joins the group (in the background; the first IDs arrive once partitions are assigned).
  KLEAF_CLIENT_API static ClientResult<std::unique_ptr<BatchConsumer>> Create(Options options);
  KLEAF_CLIENT_API ~BatchConsumer();  // Close()
  BatchConsumer(const BatchConsumer&) = delete;
  BatchConsumer& operator=(const BatchConsumer&) = delete;

  // The next ID of (tag, mode), waiting up to `timeout` for a batch of that key.
  // 64-bit streams (segment, snowflake) only; a uuid7 or ulid stream is refused
  // (kInvalidArgument, naming NextText/TakeText).
  KLEAF_CLIENT_API ClientResult<int64_t> Next(const std::string& tag, IdBatch::Mode mode,
                                              std::chrono::milliseconds timeout);
  // `n` IDs of (tag, mode); if the deadline passes first, the ones gathered so far (at least
  // one), else kTimeout. 64-bit streams only, as Next.
  KLEAF_CLIENT_API ClientResult<std::vector<int64_t>> Take(const std::string& tag,
                                                           IdBatch::Mode mode, int64_t n,
                                                           std::chrono::milliseconds timeout);
  // Next and Take for the 128-bit streams (IdBatch::Mode::kUuid7, kUlid): the IDs in canonical
  // text (a UUIDv7 in lowercase 8-4-4-4-12 hex, a ULID in 26 uppercase Crockford base32
  // characters), in batch order. A segment or snowflake stream is refused (kInvalidArgument,
  // naming Next/Take).
  KLEAF_CLIENT_API ClientResult<std::string> NextText(const std::string& tag, IdBatch::Mode mode,
                                                      std::chrono::milliseconds timeout);
  KLEAF_CLIENT_API ClientResult<std::vector<std::string>> TakeText(
      const std::string& tag, IdBatch::Mode mode, int64_t n, std::chrono::milliseconds timeout);
  // The next claimed batch of any of the streams (the unused rest of it), for generic consumers.
  KLEAF_CLIENT_API ClientResult<IdBatch> NextBatch(std::chrono::milliseconds timeout);

  KLEAF_CLIENT_API Stats stats() const;
  // Leaves the group; buffered IDs are given up. Later calls return kClosed.
  KLEAF_CLIENT_API void Close();

  struct Impl;

 private:
  explicit BatchConsumer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kleaf
