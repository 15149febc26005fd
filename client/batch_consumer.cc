#include "kleaf/batch_consumer.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>

#include "client/batch_buffer.h"
#include "kafka/client.h"

namespace kleaf {
namespace {

using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;
using client::BatchBuffer;
using client::BatchKey;

ClientError Err(ClientError::Kind kind, std::string message) {
  return ClientError{kind, std::move(message), 0, ""};
}

bool Contains(const std::vector<kafka::TopicPartition>& parts, const kafka::Message& m) {
  return std::any_of(parts.begin(), parts.end(), [&](const kafka::TopicPartition& p) {
    return p.topic == m.topic && p.partition == m.partition;
  });
}

}  // namespace

struct BatchConsumer::Impl {
  Options options;
  std::unique_ptr<kafka::GroupConsumer> consumer;  // used by the fetch thread only

  mutable std::mutex mu;
  std::condition_variable cv;  // a batch was added, or the consumer closed
  std::condition_variable demand;  // callers took a batch or wait: the fetch thread may claim
  BatchBuffer buffer;           // guarded by mu
  Stats stats;                  // guarded by mu
  bool closed = false;          // guarded by mu
  std::atomic<bool> stop{false};
  std::thread thread;

  // Fetch thread state.
  std::deque<kafka::Message> held;  // fetched, not claimed: claimed in order when wanted
  bool paused = false;
  SteadyClock::time_point backoff_until{};

  explicit Impl(Options o)
      : options(std::move(o)),
        buffer(BatchBuffer::Limits{options.max_buffered_batches, options.prefetch_batches}) {}

  void Run();
  void SetPaused(bool pause);
  // Claims the first held record, and the ones of the same partition right behind it that fit
  // (one commit, then buffer), or lets them go. False if they must stay held (no room).
  bool ClaimHeld();
  void Release(int32_t partition, const std::string& topic);
  void NoteError(std::string error) {
    std::lock_guard lock(mu);
    stats.last_error = std::move(error);
  }
};

void BatchConsumer::Impl::SetPaused(bool pause) {
  if (pause == paused) return;
  auto parts = consumer->Assignment();
  auto r = pause ? consumer->Pause(parts) : consumer->Resume(parts);
  if (r) paused = pause;
}

void BatchConsumer::Impl::Release(int32_t partition, const std::string& topic) {
  int64_t n = 0;
  std::erase_if(held, [&](const kafka::Message& m) {
    bool match = m.partition == partition && m.topic == topic;
    n += match ? 1 : 0;
    return match;
  });
  std::lock_guard lock(mu);
  stats.released_batches += n;
}

bool BatchConsumer::Impl::ClaimHeld() {
  const kafka::Message& m = held.front();
  // Only for a partition held right now; the broker's generation check does the rest.
  if (!Contains(consumer->Assignment(), m)) {
    held.pop_front();
    std::lock_guard lock(mu);
    ++stats.released_batches;
    return true;
  }
  // The run of held records of m's partition that the buffer has room for: one commit claims
  // them all (a synchronous commit per batch would bound the rate by the commit round trip).
  size_t run = 0;
  {
    std::lock_guard lock(mu);
    if (buffer.Full() && !(buffer.WantsMore() && buffer.EvictForWaiter())) return false;
    const size_t room = static_cast<size_t>(std::max(1, buffer.Room()));
    while (run < held.size() && run < room && held[run].partition == m.partition &&
           held[run].topic == m.topic) {
      ++run;
    }
  }
  const kafka::Message& last = held[run - 1];
  auto committed =
      consumer->Commit({{last.topic, last.partition, last.offset + 1}}, options.commit_timeout);
  if (!committed) {
    // Not claimed: never hand it out. Rewind so that whoever owns the partition reads it again.
    const kafka::TopicPartition rewind{m.topic, m.partition, m.offset};
    {
      std::lock_guard lock(mu);
      ++stats.commit_failures;
      stats.last_error = committed.error().message;
    }
    Release(rewind.partition, rewind.topic);
    (void)consumer->Seek(rewind, milliseconds(1000));
    backoff_until = SteadyClock::now() + milliseconds(100);
    return true;
  }
  std::lock_guard lock(mu);
  for (size_t i = 0; i < run; ++i) {
    const kafka::Message& r = held.front();
    auto batch = r.value ? DecodeBatch(*r.value) : std::unexpected(std::string("tombstone"));
    if (batch) {
      buffer.Add(std::move(*batch));
      ++stats.claimed_batches;
    } else {
      ++stats.malformed_batches;
      stats.last_error = "offset " + std::to_string(r.offset) + ": " + batch.error();
    }
    held.pop_front();
  }
  stats.dropped_batches = buffer.dropped_batches();
  cv.notify_all();
  return true;
}

void BatchConsumer::Impl::Run() {
  // Fetched records wait in `held` (not claimed, not committed) until the buffer wants them. At
  // held_limit of them the partitions are paused, and resumed at half of it: pausing makes
  // librdkafka drop what it fetched ahead, so it must not toggle on every claim.
  const size_t held_limit = static_cast<size_t>(std::max(64, 4 * options.max_buffered_batches));
  while (!stop.load()) {
    bool want;
    {
      std::lock_guard lock(mu);
      want = buffer.WantsMore() && SteadyClock::now() >= backoff_until;
    }
    if (want && !held.empty()) {
      if (ClaimHeld()) continue;
      want = false;  // no room: callers must take IDs first
    }
    if (!want && !held.empty()) {
      // Records are at hand; what is missing is demand. Wait for it (not in Poll), then serve
      // rebalance events without blocking.
      std::unique_lock lock(mu);
      demand.wait_for(lock, milliseconds(20), [&] {
        return stop.load() || (buffer.WantsMore() && SteadyClock::now() >= backoff_until);
      });
    }
    if (held.size() >= held_limit) {
      SetPaused(true);
    } else if (held.size() <= held_limit / 2) {
      SetPaused(false);
    }
    auto ev = consumer->Poll(milliseconds(held.empty() ? 20 : 0));
    switch (ev.kind) {
      case kafka::GroupConsumer::Event::Kind::kAssigned: {
        paused = false;  // a new assignment starts unpaused
        std::lock_guard lock(mu);
        ++stats.rebalances;
        stats.assigned_partitions = static_cast<int>(ev.partitions.size());
        break;
      }
      case kafka::GroupConsumer::Event::Kind::kRevoked: {
        // Not claimed, so not ours to hand out: the next owner reads them from the committed offset.
        for (const auto& p : ev.partitions) Release(p.partition, p.topic);
        std::lock_guard lock(mu);
        stats.assigned_partitions = 0;
        break;
      }
      case kafka::GroupConsumer::Event::Kind::kMessage:
        held.push_back(std::move(ev.message));
        break;
      case kafka::GroupConsumer::Event::Kind::kError:
        NoteError(ev.error);
        break;
      case kafka::GroupConsumer::Event::Kind::kNone:
        break;
    }
    std::lock_guard lock(mu);
    stats.held_batches = static_cast<int>(held.size());
  }
  held.clear();
  consumer->Close();
}

BatchConsumer::BatchConsumer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

BatchConsumer::~BatchConsumer() { Close(); }

ClientResult<std::unique_ptr<BatchConsumer>> BatchConsumer::Create(Options options) {
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
  if (options.commit_timeout.count() <= 0) {
    return std::unexpected(Err(Kind::kInvalidArgument, "commit_timeout must be positive"));
  }
  kafka::Properties props(options.properties.begin(), options.properties.end());
  auto refuse = [&](const std::string& key, auto bad) -> bool {
    auto it = props.find(key);
    return it != props.end() && bad(it->second);
  };
  if (refuse("enable.auto.commit", [](const std::string& v) { return v != "false"; }) ||
      refuse("isolation.level", [](const std::string& v) { return v != "read_committed"; }) ||
      refuse("partition.assignment.strategy",
             [](const std::string& v) { return v.find("cooperative") != std::string::npos; })) {
    return std::unexpected(Err(Kind::kInvalidArgument,
                               "properties: enable.auto.commit must stay false, isolation.level "
                               "read_committed, and the assignor eager (range or roundrobin)"));
  }
  props["bootstrap.servers"] = options.bootstrap;
  props["group.id"] = options.group_id;
  props.emplace("enable.partition.eof", "false");
  auto consumer = kafka::GroupConsumer::Create(props, {options.topic});
  if (!consumer) return std::unexpected(Err(Kind::kInvalidArgument, consumer.error().message));
  auto impl = std::make_unique<Impl>(std::move(options));
  impl->consumer = std::move(*consumer);
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->Run(); });
  return std::unique_ptr<BatchConsumer>(new BatchConsumer(std::move(impl)));
}

ClientResult<int64_t> BatchConsumer::Next(const std::string& tag, IdBatch::Mode mode,
                                          milliseconds timeout) {
  auto ids = Take(tag, mode, 1, timeout);
  if (!ids) return std::unexpected(ids.error());
  return ids->front();
}

ClientResult<std::vector<int64_t>> BatchConsumer::Take(const std::string& tag, IdBatch::Mode mode,
                                                       int64_t n, milliseconds timeout) {
  if (tag.empty() || n < 1) {
    return std::unexpected(Err(ClientError::Kind::kInvalidArgument, "tag must be non-empty and n >= 1"));
  }
  const auto deadline = SteadyClock::now() + timeout;
  const BatchKey key{tag, mode};
  std::vector<int64_t> out;
  std::unique_lock lock(impl_->mu);
  for (;;) {
    if (impl_->closed) return std::unexpected(Err(ClientError::Kind::kClosed, "consumer closed"));
    const int before = impl_->buffer.total_batches();
    impl_->buffer.Take(key, n - static_cast<int64_t>(out.size()), out);
    if (impl_->buffer.total_batches() < before) impl_->demand.notify_one();  // room to prefetch
    if (static_cast<int64_t>(out.size()) == n) return out;
    impl_->buffer.AddWaiter(key, 1);
    impl_->demand.notify_one();
    bool woke = impl_->cv.wait_until(lock, deadline) == std::cv_status::no_timeout;
    impl_->buffer.AddWaiter(key, -1);
    if (!woke) {
      impl_->buffer.Take(key, n - static_cast<int64_t>(out.size()), out);
      if (!out.empty()) return out;
      std::string why = impl_->stats.last_error.empty() ? "" : " (last error: " + impl_->stats.last_error + ")";
      return std::unexpected(Err(ClientError::Kind::kTimeout,
                                 "no batch of " + tag + "/" + std::string(ModeName(mode)) +
                                     " within the deadline" + why));
    }
  }
}

ClientResult<IdBatch> BatchConsumer::NextBatch(milliseconds timeout) {
  const auto deadline = SteadyClock::now() + timeout;
  std::unique_lock lock(impl_->mu);
  for (;;) {
    if (impl_->closed) return std::unexpected(Err(ClientError::Kind::kClosed, "consumer closed"));
    if (auto b = impl_->buffer.TakeBatch()) {
      impl_->demand.notify_one();
      return std::move(*b);
    }
    impl_->buffer.AddGenericWaiter(1);
    impl_->demand.notify_one();
    bool woke = impl_->cv.wait_until(lock, deadline) == std::cv_status::no_timeout;
    impl_->buffer.AddGenericWaiter(-1);
    if (!woke) {
      if (auto b = impl_->buffer.TakeBatch()) return std::move(*b);
      return std::unexpected(Err(ClientError::Kind::kTimeout, "no batch within the deadline"));
    }
  }
}

BatchConsumer::Stats BatchConsumer::stats() const {
  std::lock_guard lock(impl_->mu);
  return impl_->stats;
}

void BatchConsumer::Close() {
  if (!impl_) return;
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->closed) return;
    impl_->closed = true;
    impl_->cv.notify_all();
  }
  impl_->stop.store(true);
  impl_->demand.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
}

}  // namespace kleaf
