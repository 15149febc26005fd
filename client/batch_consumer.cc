#include "kleaf/batch_consumer.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <deque>
#include <map>
#include <set>
#include <thread>
#include <utility>

#include "base/clock.h"
#include "base/mutex.h"
#include "client/batch_buffer.h"
#include "client/claim.h"
#include "kafka/client.h"

namespace kleaf {
namespace {

using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;
using client::BatchBuffer;
using client::BatchKey;

// now + timeout, saturated: milliseconds::max() means "no deadline", not an overflow.
SteadyClock::time_point DeadlineAfter(milliseconds timeout) {
  const auto now = SteadyClock::now();
  if (timeout >= std::chrono::duration_cast<milliseconds>(SteadyClock::time_point::max() - now)) {
    return SteadyClock::time_point::max();
  }
  return now + timeout;
}

// After a commit failed in a way that may still be applied (a local timeout, a broken
// connection), how long the partition waits before it reads the group's committed offset again
// and goes on from there. librdkafka no longer holds the request then; the broker answers queued
// requests in order within this.
constexpr milliseconds kSettle{5000};
constexpr milliseconds kOffsetQueryTimeout{5000};
// librdkafka's request timeout for this consumer unless the caller sets one: an unanswered
// commit gets its outcome within this.
constexpr const char* kSocketTimeoutMs = "10000";
// Fast failover (documented in docs/client-library.md and docs/operations.md): a member that died
// without leaving is dropped after 6 s (the broker's default group.min.session.timeout.ms, the
// least it accepts), and a heartbeat every second tells the live members of a rebalance within a
// second. A rebalance waits for every member of the group to rejoin or be dropped, so these two
// bound how long the group stops when a member dies, and how long a Close() started during such
// a rebalance waits before its leave is answered.
constexpr const char* kSessionTimeoutMs = "6000";
constexpr const char* kHeartbeatIntervalMs = "1000";
constexpr const char* kMetadataRefreshMs = "5000";
constexpr size_t kMaxTopicName = 249;  // Kafka's limit

using PartitionKey = std::pair<std::string, int32_t>;

ClientError Err(ClientError::Kind kind, std::string message) {
  return ClientError{kind, std::move(message), 0, ""};
}

// The default of Options::log: warnings and errors on stderr in kleaf's text log format, one write
// per line so that lines of several threads do not interleave.
void LogToStderr(const BatchConsumer::LogLine& line) {
  using Level = BatchConsumer::LogLine::Level;
  if (line.level != Level::kWarn && line.level != Level::kError) return;
  const auto ms =
      std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch());
  std::string text = FormatUtcMs(ms.count());
  text += line.level == Level::kWarn ? " warn [kafka] " : " error [kafka] ";
  text.append(line.client).append(" ").append(line.facility).append(": ");
  text.append(line.message).append("\n");
  std::fwrite(text.data(), 1, text.size(), stderr);
}

// Where a consumer's librdkafka lines go: the application's callback until Close() returns, then
// kleaf's default (a leave still under way in the background must not call into an application
// that may have destroyed what its callback uses). The mutex makes Close() wait for a line being
// written through the callback.
struct LogGate {
  explicit LogGate(BatchConsumer::LogCallback first) : callback(std::move(first)) {}

  Mutex mu;
  BatchConsumer::LogCallback callback KLEAF_GUARDED_BY(mu);

  void Write(const BatchConsumer::LogLine& line) {
    MutexLock lock(mu);
    callback(line);
  }
  void Detach() {
    MutexLock lock(mu);
    callback = LogToStderr;
  }
};

// librdkafka's lines, through the kafka wrapper's sink and the gate, to the application's callback.
kafka::LogSink SinkFor(std::shared_ptr<LogGate> gate) {
  return [gate = std::move(gate)](kafka::LogLevel level, std::string_view client,
                                  std::string_view facility, std::string_view message) {
    using Level = BatchConsumer::LogLine::Level;
    static constexpr Level kLevels[] = {Level::kDebug, Level::kInfo, Level::kWarn, Level::kError};
    gate->Write({kLevels[static_cast<int>(level)], client, facility, message});
  };
}

// The group leave of a closing consumer, run in a thread of its own so that Close() returns within
// Options::close_wait even while the coordinator holds the leave back.
struct Leave {
  Mutex mu;
  CondVar cv;
  bool done KLEAF_GUARDED_BY(mu) = false;
  bool clean KLEAF_GUARDED_BY(mu) = false;  // left cleanly within close_timeout
};

bool Contains(const std::vector<kafka::TopicPartition>& parts, const kafka::Message& m) {
  return std::any_of(parts.begin(), parts.end(), [&](const kafka::TopicPartition& p) {
    return p.topic == m.topic && p.partition == m.partition;
  });
}

}  // namespace

struct BatchConsumer::Impl {
  Options options;
  std::map<std::string, BatchKey> stream_of_topic;  // the subscribed topics; set before Run
  std::set<BatchKey> streams;                       // the same streams, by key
  std::unique_ptr<kafka::GroupConsumer> consumer;  // used by the fetch thread only
  std::unique_ptr<kafka::LogStartClient> floors;   // the claim floor; the fetch thread only
  std::shared_ptr<LogGate> log_gate;  // the consumer's log lines; detached when Close() returns

  mutable Mutex mu;
  CondVar cv;      // a batch was added, or the consumer closed
  CondVar demand;  // callers took a batch or wait: the fetch thread may claim
  BatchBuffer buffer KLEAF_GUARDED_BY(mu);
  Stats stats KLEAF_GUARDED_BY(mu);
  // Streams refused to callers, and why: their batches are published for another consumer group,
  // or the broker does not let this member move their claim floor. Until a claim of the stream
  // succeeds again.
  std::map<BatchKey, std::string> refusals KLEAF_GUARDED_BY(mu);
  bool closed KLEAF_GUARDED_BY(mu) = false;
  std::atomic<bool> stop{false};
  std::thread thread;

  // Fetch thread state.
  std::deque<kafka::Message> held;  // fetched, not claimed: claimed in order when wanted
  bool paused = false;              // fetching paused because `held` is long
  // What this member knows of each partition it holds (cleared on every rebalance: a new
  // generation, so commits of the old one are rejected by the broker).
  struct PartitionState {
    // The next offset that may be claimed: the group's committed offset when it was read, then
    // past each claim. A record below it was claimed already (librdkafka may fetch from a stale
    // position after pause/resume or seek); it is skipped, never handed out. Unknown until read.
    std::optional<int64_t> floor;
    // The broker let this member move the partition's log start (the claim floor's DELETE right
    // and cleanup.policy=delete), checked before the first claim.
    bool floor_rights = false;
    // A commit whose outcome is unknown, or that may still be applied. Until it is settled no
    // other commit goes for this partition (a later commit overtaken by it would move the
    // group's offset back, and the next owner would hand out IDs again), and the partition is
    // paused; then the floor is read again from the group.
    bool quarantined = false;
    std::unique_ptr<kafka::GroupConsumer::PendingCommit> unsettled;  // outcome still to come
    SteadyClock::time_point settle_until{};
  };
  std::map<PartitionKey, PartitionState> partitions;
  SteadyClock::time_point backoff_until{};

  explicit Impl(Options o)
      : options(std::move(o)),
        buffer(BatchBuffer::Limits{options.max_buffered_batches, options.prefetch_batches}) {}

  void Run();
  void SetPaused(bool pause);
  // Reads the group's committed offsets of `parts` into their floors; false if the broker did
  // not answer.
  bool LoadFloors(const std::vector<kafka::TopicPartition>& parts);
  // Takes quarantined partitions whose last commit is settled back into service.
  void SettleQuarantined();
  void Quarantine(const kafka::TopicPartition& p, std::unique_ptr<kafka::GroupConsumer::PendingCommit> unsettled,
                  const std::string& why);
  // Claims the first held record, and the ones of the same partition right behind it that fit
  // (one commit, then buffer), or lets them go. False if they must stay held (no room).
  bool ClaimHeld();
  // Lets the first held record go, or backs off, when it cannot be claimed now: its partition is
  // not assigned or quarantined, its floor unknown, or it lies below the floor. False if it may
  // be claimed.
  bool SkipUnclaimable(const kafka::Message& m);
  // The claim's commit of `m` and the records behind it was refused: released and rewound.
  void OnCommitRefused(const kafka::Message& m, const std::string& error);
  // A fetched record as a batch of its topic's stream, or why it is not one (malformed).
  std::expected<IdBatch, std::string> Decode(const kafka::Message& r) const;
  // The first held record is a batch published for another consumer group: skipped unclaimed,
  // and its stream refused to callers.
  void RefuseForeign(const kafka::Message& m, const std::string& group);
  // Whether this member may move the claim floor of m's partition (checked once per assignment,
  // before the first claim); if not, m's records are released and, for a missing right or a
  // compacted topic, its stream refused to callers.
  bool CheckFloorRights(const kafka::Message& m);
  // The first `run` held records were claimed but their floor did not move: not handed out.
  void DropClaimed(size_t run, const std::string& error);
  // Moves the first held records, claimed, into the buffer: `batches` are their decodings.
  void BufferClaimed(std::vector<std::expected<IdBatch, std::string>>& batches);
  // Callers want batches and no back-off is running.
  bool WantsRecords();
  void OnEvent(kafka::GroupConsumer::Event ev);
  void OnAssigned(const std::vector<kafka::TopicPartition>& parts);
  void OnRevoked(const std::vector<kafka::TopicPartition>& parts);
  void OnMessage(kafka::Message message);
  void Release(int32_t partition, const std::string& topic);
  void NoteError(std::string error) {
    MutexLock lock(mu);
    stats.last_error = std::move(error);
  }
};

void BatchConsumer::Impl::SetPaused(bool pause) {
  if (pause == paused) return;
  auto parts = consumer->Assignment();
  if (!pause) {
    std::erase_if(parts, [&](const kafka::TopicPartition& p) {
      auto it = partitions.find({p.topic, p.partition});
      return it != partitions.end() && it->second.quarantined;
    });
  }
  auto r = pause ? consumer->Pause(parts) : consumer->Resume(parts);
  if (r) paused = pause;
}

bool BatchConsumer::Impl::LoadFloors(const std::vector<kafka::TopicPartition>& parts) {
  if (parts.empty()) return true;
  auto committed = consumer->Committed(parts, kOffsetQueryTimeout);
  if (!committed) {
    NoteError(committed.error().message);
    return false;
  }
  for (const auto& c : *committed) {
    // No commit yet (a negative logical offset): every record may be claimed.
    partitions[{c.topic, c.partition}].floor = std::max<int64_t>(c.offset, 0);
  }
  return true;
}

void BatchConsumer::Impl::Quarantine(const kafka::TopicPartition& p,
                                     std::unique_ptr<kafka::GroupConsumer::PendingCommit> unsettled,
                                     const std::string& why) {
  auto& st = partitions[{p.topic, p.partition}];
  st.quarantined = true;
  st.unsettled = std::move(unsettled);
  st.settle_until = SteadyClock::now() + kSettle;
  // Best effort: records of a quarantined partition are dropped when fetched anyway.
  (void)consumer->Pause({{p.topic, p.partition}});
  Release(p.partition, p.topic);
  MutexLock lock(mu);
  ++stats.commit_failures;
  ++stats.quarantines;
  stats.last_error = why + "; partition " + std::to_string(p.partition) +
                     " waits until that commit is settled";
}

void BatchConsumer::Impl::SettleQuarantined() {
  // At most one partition's broker round trips per call: the loop checks `stop` in between.
  for (auto& [key, st] : partitions) {
    if (!st.quarantined) continue;
    const auto now = SteadyClock::now();
    if (st.unsettled) {
      auto outcome = st.unsettled->Wait(milliseconds(0));
      if (!outcome) continue;
      st.unsettled.reset();
      // Applied or refused by the broker: settled now. Still maybe in flight: settle first.
      st.settle_until = outcome->may_land ? now + kSettle : now;
    }
    if (now < st.settle_until) continue;
    const kafka::TopicPartition p{key.first, key.second};
    auto retry_later = [&] { st.settle_until = SteadyClock::now() + milliseconds(1000); };
    // Read on from the group's offset, whichever commit landed. Records fetched before the
    // pause took effect were dropped (quarantined partitions hold none).
    if (!LoadFloors({p}) || !consumer->Seek({p.topic, p.partition, *st.floor}, milliseconds(1000))) {
      retry_later();
      return;
    }
    if (!paused && !consumer->Resume({p})) {
      retry_later();
      return;
    }
    st.quarantined = false;
    return;
  }
}

void BatchConsumer::Impl::Release(int32_t partition, const std::string& topic) {
  int64_t n = 0;
  std::erase_if(held, [&](const kafka::Message& m) {
    bool match = m.partition == partition && m.topic == topic;
    n += match ? 1 : 0;
    return match;
  });
  MutexLock lock(mu);
  stats.released_batches += n;
}

bool BatchConsumer::Impl::ClaimHeld() {
  const kafka::Message& m = held.front();
  if (SkipUnclaimable(m)) return true;
  // The run of held records of m's partition that the buffer has room for: one commit claims
  // them all (a synchronous commit per batch would bound the rate by the commit round trip).
  size_t run = 0;
  {
    MutexLock lock(mu);
    if (buffer.Full() && !(buffer.WantsMore() && buffer.EvictForWaiter())) return false;
    run = client::ClaimableRun(held, static_cast<size_t>(std::max(1, buffer.Room())));
  }
  // Decoded before the claim: a batch published for another group is not ours to claim, and
  // the run ends before it.
  std::vector<std::expected<IdBatch, std::string>> batches;
  for (size_t i = 0; i < run; ++i) {
    auto batch = Decode(held[i]);
    if (batch && !batch->group.empty() && batch->group != options.group_id) {
      if (i == 0) {
        RefuseForeign(held.front(), batch->group);
        return true;
      }
      run = i;
      break;
    }
    batches.push_back(std::move(batch));
  }
  if (!CheckFloorRights(m)) return true;
  const kafka::Message& last = held[run - 1];
  const int64_t next = last.offset + 1;
  auto pending = consumer->StartCommit({{last.topic, last.partition, next}});
  std::optional<kafka::GroupConsumer::PendingCommit::Outcome> outcome;
  if (!pending) {
    outcome = kafka::GroupConsumer::PendingCommit::Outcome{false, false, pending.error().message};
  } else {
    outcome = (*pending)->Wait(options.commit_timeout);
  }
  if (!outcome || outcome->may_land) {
    // Not claimed, but it may still be: hand nothing out, commit nothing more here until that is
    // settled.
    Quarantine({m.topic, m.partition},
               outcome ? nullptr : std::move(*pending),
               outcome ? outcome->error
                       : "commit: no outcome within " + std::to_string(options.commit_timeout.count()) + " ms");
    return true;
  }
  if (!outcome->committed) {
    OnCommitRefused(m, outcome->error);
    return true;
  }
  partitions[{m.topic, m.partition}].floor = next;
  // Claimed in the group. Then the claim floor: the partition's log start moves past the run, so
  // that no reader can fetch it again whatever becomes of the group's committed offsets (Kafka
  // deletes them offsets.retention.minutes after the group emptied). IDs are handed out only once
  // both succeeded; a run claimed whose floor did not move is a gap.
  if (auto floor =
          floors->DeleteRecordsBefore({{last.topic, last.partition, next}}, options.commit_timeout);
      !floor) {
    DropClaimed(batches.size(), "claim floor: " + floor.error().message);
    return true;
  }
  BufferClaimed(batches);
  return true;
}

bool BatchConsumer::Impl::CheckFloorRights(const kafka::Message& m) {
  auto& st = partitions[{m.topic, m.partition}];
  if (st.floor_rights) return true;
  // A deletion before offset 0 deletes nothing, but the broker checks it as any other: the
  // DELETE right on the topic and cleanup.policy=delete. Without them every claim's floor would
  // fail after its commit, and every batch would be a gap: refuse the stream before claiming.
  auto probe = floors->DeleteRecordsBefore({{m.topic, m.partition, 0}}, options.commit_timeout);
  if (probe) {
    st.floor_rights = true;
    return true;
  }
  const kafka::TopicPartition rewind{m.topic, m.partition, m.offset};
  Release(rewind.partition, rewind.topic);
  (void)consumer->Seek(rewind, milliseconds(1000));  // best effort: nothing was claimed
  std::string why = "claim floor of " + rewind.topic + ": " + probe.error().message;
  const bool refused = probe.error().code == Code::kFailedPrecondition;
  backoff_until = SteadyClock::now() + milliseconds(refused ? 1000 : 100);
  MutexLock lock(mu);
  stats.last_error = why;
  if (auto stream = stream_of_topic.find(rewind.topic);
      refused && stream != stream_of_topic.end()) {
    refusals[stream->second] = std::move(why);
    cv.NotifyAll();
  }
  return false;
}

void BatchConsumer::Impl::DropClaimed(size_t run, const std::string& error) {
  MutexLock lock(mu);
  for (size_t i = 0; i < run; ++i) held.pop_front();
  stats.floor_failures += 1;
  stats.unfloored_batches += static_cast<int64_t>(run);
  stats.last_error = error;
}

std::expected<IdBatch, std::string> BatchConsumer::Impl::Decode(const kafka::Message& r) const {
  auto batch = r.value ? DecodeBatch(*r.value) : std::unexpected(std::string("tombstone"));
  if (!batch) return batch;
  // A stream's topic holds only that stream's batches; anything else is not a batch of it.
  auto stream = stream_of_topic.find(r.topic);
  if (stream == stream_of_topic.end() || !(stream->second == BatchKey{batch->tag, batch->mode})) {
    return std::unexpected("a batch of " + batch->tag + "/" + std::string(ModeName(batch->mode)) +
                           " on topic " + r.topic);
  }
  return batch;
}

void BatchConsumer::Impl::RefuseForeign(const kafka::Message& m, const std::string& group) {
  // Never claimed, never committed past by this member on its own: it is skipped. Its stream is
  // refused to callers, who would otherwise wait for batches that never come.
  std::string why = "the batches of topic " + m.topic + " are published for consumer group " +
                    group + " (the producer's producer.group), and this consumer is in group " +
                    options.group_id +
                    ": two groups on one stream would hand out the same IDs, so none is claimed "
                    "here (docs/ids-topic.md, \"One group per stream\")";
  const auto stream = stream_of_topic.find(m.topic);
  held.pop_front();
  MutexLock lock(mu);
  ++stats.foreign_batches;
  stats.last_error = why;
  if (stream != stream_of_topic.end()) refusals[stream->second] = std::move(why);
  cv.NotifyAll();
}

bool BatchConsumer::Impl::SkipUnclaimable(const kafka::Message& m) {
  // Only for a partition held right now; the broker's generation check does the rest.
  if (!Contains(consumer->Assignment(), m)) {
    held.pop_front();
    MutexLock lock(mu);
    ++stats.released_batches;
    return true;
  }
  auto& st = partitions[{m.topic, m.partition}];
  if (st.quarantined) {
    Release(m.partition, std::string(m.topic));  // copies: m is among the records erased
    return true;
  }
  if (!st.floor && !LoadFloors({{m.topic, m.partition}})) {
    backoff_until = SteadyClock::now() + milliseconds(500);
    return true;
  }
  if (m.offset < *st.floor) {
    held.pop_front();
    MutexLock lock(mu);
    ++stats.stale_batches;
    return true;
  }
  return false;
}

void BatchConsumer::Impl::OnCommitRefused(const kafka::Message& m, const std::string& error) {
  // Not claimed, never hand it out. Rewind so that whoever owns the partition reads it again.
  const kafka::TopicPartition rewind{m.topic, m.partition, m.offset};
  {
    MutexLock lock(mu);
    ++stats.commit_failures;
    stats.last_error = error;
  }
  Release(rewind.partition, rewind.topic);
  (void)consumer->Seek(rewind,
                       milliseconds(1000));  // best effort: the record is unclaimed either way
  backoff_until = SteadyClock::now() + milliseconds(100);
}

void BatchConsumer::Impl::BufferClaimed(std::vector<std::expected<IdBatch, std::string>>& batches) {
  MutexLock lock(mu);
  for (auto& batch : batches) {
    const kafka::Message& r = held.front();
    if (batch) {
      refusals.erase(BatchKey{batch->tag, batch->mode});  // claimed: the stream is served again
      buffer.Add(std::move(*batch));
      ++stats.claimed_batches;
    } else {
      ++stats.malformed_batches;
      stats.last_error = "offset " + std::to_string(r.offset) + ": " + batch.error();
    }
    held.pop_front();
  }
  stats.dropped_batches = buffer.dropped_batches();
  cv.NotifyAll();
}

void BatchConsumer::Impl::Run() {
  // Fetched records wait in `held` (not claimed, not committed) until the buffer wants them. At
  // held_limit of them the partitions are paused, and resumed at half of it: pausing makes
  // librdkafka drop what it fetched ahead, so it must not toggle on every claim.
  const size_t held_limit = static_cast<size_t>(std::max(64, 4 * options.max_buffered_batches));
  while (!stop.load()) {
    SettleQuarantined();
    bool want = WantsRecords();
    if (want && !held.empty()) {
      if (ClaimHeld()) continue;
      want = false;  // no room: callers must take IDs first
    }
    if (!want && !held.empty()) {
      // Records are at hand; what is missing is demand. Wait for it (not in Poll), then serve
      // rebalance events without blocking.
      MutexLock lock(mu);
      demand.WaitFor(lock, milliseconds(20), [&]() KLEAF_REQUIRES(mu) {
        return stop.load() || (buffer.WantsMore() && SteadyClock::now() >= backoff_until);
      });
    }
    if (held.size() >= held_limit) {
      SetPaused(true);
    } else if (held.size() <= held_limit / 2) {
      SetPaused(false);
    }
    OnEvent(consumer->Poll(milliseconds(held.empty() ? 20 : 0)));
    MutexLock lock(mu);
    stats.held_batches = static_cast<int>(held.size());
  }
  held.clear();
  partitions.clear();  // pending commits must go before the consumer (Close() leaves the group)
}

bool BatchConsumer::Impl::WantsRecords() {
  MutexLock lock(mu);
  return buffer.WantsMore() && SteadyClock::now() >= backoff_until;
}

void BatchConsumer::Impl::OnEvent(kafka::GroupConsumer::Event ev) {
  switch (ev.kind) {
    case kafka::GroupConsumer::Event::Kind::kAssigned:
      return OnAssigned(ev.partitions);
    case kafka::GroupConsumer::Event::Kind::kRevoked:
      return OnRevoked(ev.partitions);
    case kafka::GroupConsumer::Event::Kind::kMessage:
      return OnMessage(std::move(ev.message));
    case kafka::GroupConsumer::Event::Kind::kError:
      return NoteError(ev.error);
    case kafka::GroupConsumer::Event::Kind::kNone:
      return;
  }
}

void BatchConsumer::Impl::OnAssigned(const std::vector<kafka::TopicPartition>& parts) {
  if (consumer->Protocol() == "classic") {
    // Eager: this is the whole assignment, and it starts unpaused (GroupConsumer lifts pauses
    // on revoke).
    paused = false;
    partitions.clear();
  } else if (paused) {
    // Incremental (KIP-848): added to what is held, and held back like the rest while `held` is
    // long.
    (void)consumer->Pause(parts);
  }
  for (const auto& p : parts) partitions[{p.topic, p.partition}];
  (void)LoadFloors(parts);  // else read when a record of the partition is claimed
  MutexLock lock(mu);
  ++stats.rebalances;
  stats.assigned_partitions = static_cast<int>(partitions.size());
}

void BatchConsumer::Impl::OnRevoked(const std::vector<kafka::TopicPartition>& parts) {
  // Not claimed, so not ours to hand out: the next owner reads them from the committed offset.
  for (const auto& p : parts) {
    Release(p.partition, p.topic);
    partitions.erase({p.topic, p.partition});
  }
  MutexLock lock(mu);
  stats.assigned_partitions = static_cast<int>(partitions.size());
}

void BatchConsumer::Impl::OnMessage(kafka::Message message) {
  // Below the floor (claimed already: a stale re-fetch) or of a quarantined partition: not held.
  // The rest is checked again when claimed.
  auto it = partitions.find({message.topic, message.partition});
  const bool stale =
      it != partitions.end() && it->second.floor && message.offset < *it->second.floor;
  const bool quarantined = it != partitions.end() && it->second.quarantined;
  if (stale || quarantined) {
    MutexLock lock(mu);
    ++(stale ? stats.stale_batches : stats.released_batches);
    return;
  }
  held.push_back(std::move(message));
}

BatchConsumer::BatchConsumer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

BatchConsumer::~BatchConsumer() { Close(); }

namespace {

// The options Create checks without Kafka: present, positive, buffer sizes that fit.
[[nodiscard]] ClientResult<void> CheckOptions(const BatchConsumer::Options& options) {
  using Kind = ClientError::Kind;
  if (options.bootstrap.empty()) return std::unexpected(Err(Kind::kInvalidArgument, "bootstrap: empty"));
  if (options.topic.empty()) return std::unexpected(Err(Kind::kInvalidArgument, "topic: empty"));
  if (options.group_id.empty()) return std::unexpected(Err(Kind::kInvalidArgument, "group_id: empty"));
  if (options.max_buffered_batches < 1 || options.prefetch_batches < 0 ||
      options.prefetch_batches >= options.max_buffered_batches) {
    return std::unexpected(Err(Kind::kInvalidArgument,
                               "max_buffered_batches must be >= 1 and prefetch_batches in "
                               "[0, max_buffered_batches)"));
  }
  if (options.commit_timeout.count() <= 0 || options.close_timeout.count() <= 0) {
    return std::unexpected(Err(Kind::kInvalidArgument, "commit_timeout and close_timeout must be positive"));
  }
  if (options.streams.empty()) {
    return std::unexpected(Err(Kind::kInvalidArgument, "streams: name at least one (tag, mode)"));
  }
  return {};
}

// The topic of each stream the options name, mapped to its stream.
[[nodiscard]] ClientResult<std::map<std::string, BatchKey>> StreamOfTopic(
    const BatchConsumer::Options& options) {
  using Kind = ClientError::Kind;
  std::map<std::string, BatchKey> stream_of_topic;
  for (const auto& stream : options.streams) {
    if (stream.tag.empty())
      return std::unexpected(Err(Kind::kInvalidArgument, "streams: empty tag"));
    std::string topic = StreamTopic(options.topic, stream.tag, stream.mode);
    if (topic.size() > kMaxTopicName) {
      return std::unexpected(
          Err(Kind::kInvalidArgument, "streams: the topic of " + stream.tag +
                                          " would be longer than 249 characters: " + topic));
    }
    stream_of_topic.emplace(std::move(topic), BatchKey{stream.tag, stream.mode});
  }
  return stream_of_topic;
}

// The group consumer's librdkafka properties: the caller's, refused where they would break the
// claim rule (auto commit, uncommitted reads, a cooperative assignor), plus kleaf's defaults.
[[nodiscard]] ClientResult<kafka::Properties> ConsumerProperties(
    const BatchConsumer::Options& options) {
  kafka::Properties props(options.properties.begin(), options.properties.end());
  auto refuse = [&](const std::string& key, auto bad) -> bool {
    auto it = props.find(key);
    return it != props.end() && bad(it->second);
  };
  if (refuse("enable.auto.commit", [](const std::string& v) { return v != "false"; }) ||
      refuse("isolation.level", [](const std::string& v) { return v != "read_committed"; }) ||
      refuse("partition.assignment.strategy",
             [](const std::string& v) { return v.find("cooperative") != std::string::npos; })) {
    return std::unexpected(Err(ClientError::Kind::kInvalidArgument,
                               "properties: enable.auto.commit must stay false, isolation.level "
                               "read_committed, and the assignor eager (range or roundrobin)"));
  }
  props["bootstrap.servers"] = options.bootstrap;
  props["group.id"] = options.group_id;
  props.emplace("enable.partition.eof", "false");
  props.emplace("socket.timeout.ms", kSocketTimeoutMs);
  // librdkafka also keeps a commit without an answer queued for session.timeout.ms while the
  // broker is down, and Close() and a quarantined partition wait for it: 6 s, not the 45 s of
  // librdkafka 2.8's default.
  props.emplace("session.timeout.ms", kSessionTimeoutMs);
  props.emplace("heartbeat.interval.ms", kHeartbeatIntervalMs);
  // A stream topic created after this consumer subscribed is seen at the next metadata refresh.
  props.emplace("topic.metadata.refresh.interval.ms", kMetadataRefreshMs);
  return props;
}

}  // namespace

ClientResult<std::unique_ptr<BatchConsumer>> BatchConsumer::Create(Options options) {
  if (auto checked = CheckOptions(options); !checked) return std::unexpected(checked.error());
  auto stream_of_topic = StreamOfTopic(options);
  if (!stream_of_topic) return std::unexpected(stream_of_topic.error());
  auto props = ConsumerProperties(options);
  if (!props) return std::unexpected(props.error());
  std::vector<std::string> topics;
  for (const auto& [topic, key] : *stream_of_topic) topics.push_back(topic);
  auto log_gate = std::make_shared<LogGate>(options.log ? options.log : LogToStderr);
  auto consumer = kafka::GroupConsumer::Create(*props, topics, SinkFor(log_gate));
  if (!consumer) {
    return std::unexpected(Err(ClientError::Kind::kInvalidArgument, consumer.error().message));
  }
  // The floors' handle joins no group: the group protocol (and with it, under the consumer
  // protocol, librdkafka's refusal of the classic-only properties) is not its business.
  kafka::Properties floor_props = *props;
  floor_props.erase("group.protocol");
  auto floors = kafka::LogStartClient::Create(floor_props);
  if (!floors) {
    return std::unexpected(Err(ClientError::Kind::kInvalidArgument, floors.error().message));
  }
  auto impl = std::make_unique<Impl>(std::move(options));
  impl->consumer = std::move(*consumer);
  impl->floors = std::move(*floors);
  impl->log_gate = std::move(log_gate);
  for (const auto& [topic, key] : *stream_of_topic) impl->streams.insert(key);
  impl->stream_of_topic = std::move(*stream_of_topic);
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->Run(); });
  return std::unique_ptr<BatchConsumer>(new BatchConsumer(std::move(impl)));
}

namespace {

// BatchBuffer::Take or TakeText.
template <typename T>
using TakeMethod = int64_t (BatchBuffer::*)(const BatchKey&, int64_t, std::vector<T>&);

// Take and TakeText: `n` IDs of (tag, mode) appended to a vector of T by `take`, called with
// impl.mu held, waiting for batches until the deadline. `text` says which of the two the caller
// used: 128-bit streams (IdBatch::Is128Bit) give text only, 64-bit streams integers only.
template <typename T>
[[nodiscard]] ClientResult<std::vector<T>> TakeIds(BatchConsumer::Impl& impl,
                                                   const std::string& tag, IdBatch::Mode mode,
                                                   int64_t n, milliseconds timeout, bool text,
                                                   TakeMethod<T> take) {
  using Kind = ClientError::Kind;
  if (tag.empty() || n < 1) {
    return std::unexpected(Err(Kind::kInvalidArgument, "tag must be non-empty and n >= 1"));
  }
  const std::string stream = tag + "/" + std::string(ModeName(mode));
  if (Is128Bit(mode) && !text) {
    return std::unexpected(Err(Kind::kInvalidArgument,
                               stream + " carries 128-bit IDs: take them with NextText/TakeText"));
  }
  if (!Is128Bit(mode) && text) {
    return std::unexpected(
        Err(Kind::kInvalidArgument, stream + " carries 64-bit IDs: take them with Next/Take"));
  }
  const BatchKey key{tag, mode};
  if (!impl.streams.contains(key)) {
    return std::unexpected(Err(Kind::kInvalidArgument,
                               stream + " is not among the consumer's streams (Options::streams)"));
  }
  const auto deadline = DeadlineAfter(timeout);
  std::vector<T> out;
  MutexLock lock(impl.mu);
  for (;;) {
    if (impl.closed) return std::unexpected(Err(Kind::kClosed, "consumer closed"));
    const int before = impl.buffer.total_batches();
    (impl.buffer.*take)(key, n - static_cast<int64_t>(out.size()), out);
    if (impl.buffer.total_batches() < before) impl.demand.NotifyOne();  // room to prefetch
    if (static_cast<int64_t>(out.size()) == n) return out;
    if (auto refused = impl.refusals.find(key); refused != impl.refusals.end() && out.empty()) {
      return std::unexpected(
          ClientError{Kind::kRejected, refused->second, 0, "failed_precondition"});
    }
    impl.buffer.AddWaiter(key, 1);
    impl.demand.NotifyOne();
    bool woke = impl.cv.WaitUntil(lock, deadline);
    impl.buffer.AddWaiter(key, -1);
    if (!woke) {
      (impl.buffer.*take)(key, n - static_cast<int64_t>(out.size()), out);
      if (!out.empty()) return out;
      std::string why =
          impl.stats.last_error.empty() ? "" : " (last error: " + impl.stats.last_error + ")";
      return std::unexpected(
          Err(Kind::kTimeout, "no batch of " + stream + " within the deadline" + why));
    }
  }
}

}  // namespace

ClientResult<int64_t> BatchConsumer::Next(const std::string& tag, IdBatch::Mode mode,
                                          milliseconds timeout) {
  // The common case first: an ID of a buffered batch, without the deadline and the vector of
  // Take (the clock read and the allocation were most of the cost of an ID).
  const BatchKey key{tag, mode};
  if (impl_->streams.contains(key)) {
    MutexLock lock(impl_->mu);
    if (!impl_->closed) {
      const int before = impl_->buffer.total_batches();
      if (auto id = impl_->buffer.Next(key)) {
        if (impl_->buffer.total_batches() < before) impl_->demand.NotifyOne();  // room to prefetch
        return *id;
      }
    }
  }
  auto ids = Take(tag, mode, 1, timeout);
  if (!ids) return std::unexpected(ids.error());
  return ids->front();
}

ClientResult<std::vector<int64_t>> BatchConsumer::Take(const std::string& tag, IdBatch::Mode mode,
                                                       int64_t n, milliseconds timeout) {
  return TakeIds<int64_t>(*impl_, tag, mode, n, timeout, /*text=*/false, &BatchBuffer::Take);
}

ClientResult<std::string> BatchConsumer::NextText(const std::string& tag, IdBatch::Mode mode,
                                                  milliseconds timeout) {
  auto ids = TakeText(tag, mode, 1, timeout);
  if (!ids) return std::unexpected(ids.error());
  return std::move(ids->front());
}

ClientResult<std::vector<std::string>> BatchConsumer::TakeText(const std::string& tag,
                                                               IdBatch::Mode mode, int64_t n,
                                                               milliseconds timeout) {
  return TakeIds<std::string>(*impl_, tag, mode, n, timeout, /*text=*/true, &BatchBuffer::TakeText);
}

ClientResult<IdBatch> BatchConsumer::NextBatch(milliseconds timeout) {
  const auto deadline = DeadlineAfter(timeout);
  MutexLock lock(impl_->mu);
  for (;;) {
    if (impl_->closed) return std::unexpected(Err(ClientError::Kind::kClosed, "consumer closed"));
    if (auto b = impl_->buffer.TakeBatch()) {
      impl_->demand.NotifyOne();
      return std::move(*b);
    }
    impl_->buffer.AddGenericWaiter(1);
    impl_->demand.NotifyOne();
    bool woke = impl_->cv.WaitUntil(lock, deadline);
    impl_->buffer.AddGenericWaiter(-1);
    if (!woke) {
      if (auto b = impl_->buffer.TakeBatch()) return std::move(*b);
      return std::unexpected(Err(ClientError::Kind::kTimeout, "no batch within the deadline"));
    }
  }
}

BatchConsumer::Stats BatchConsumer::stats() const {
  MutexLock lock(impl_->mu);
  return impl_->stats;
}

void BatchConsumer::Close() {
  if (!impl_) return;
  {
    MutexLock lock(impl_->mu);
    if (impl_->closed) return;
    impl_->closed = true;
    impl_->cv.NotifyAll();
  }
  impl_->stop.store(true);
  impl_->demand.NotifyAll();
  if (impl_->thread.joinable()) impl_->thread.join();
  if (!impl_->consumer) return;
  // The leave runs in a thread that owns the librdkafka handle and nothing of this consumer, so it
  // may outlive it. Close() waits for it up to close_wait: a clean leave takes milliseconds, but
  // a rebalance that waits for a member that died without leaving holds it back until that
  // member's session expires (the coordinator answers a connection's requests in order).
  auto leave = std::make_shared<Leave>();
  std::thread([consumer = std::move(impl_->consumer), timeout = impl_->options.close_timeout,
               leave]() mutable {
    const bool clean = consumer->Close(timeout);
    consumer.reset();  // librdkafka's last lines go out before `done`
    MutexLock lock(leave->mu);
    leave->done = true;
    leave->clean = clean;
    leave->cv.NotifyAll();
  }).detach();
  const auto wait = std::min(impl_->options.close_wait, impl_->options.close_timeout);
  MutexLock lock(leave->mu);
  const bool done =
      leave->cv.WaitFor(lock, wait, [&]() KLEAF_REQUIRES(leave->mu) { return leave->done; });
  if (done && !leave->clean) {
    impl_->NoteError("close: the group coordinator did not answer within " +
                     std::to_string(impl_->options.close_timeout.count()) +
                     " ms; left without a clean leave");
  } else if (!done) {
    impl_->NoteError("close: the group leave was still under way after " +
                     std::to_string(wait.count()) + " ms; it goes on in the background for up to " +
                     std::to_string(impl_->options.close_timeout.count()) + " ms");
  }
  lock.Unlock();
  impl_->log_gate->Detach();
}

}  // namespace kleaf
