#include "cluster/allocator_node.h"

#include <spdlog/spdlog.h>

#include <functional>
#include <random>
#include <system_error>
#include <unordered_map>

#include "cluster/owner_hop.h"
#include "cluster/wire.h"

namespace kleaf::cluster {
namespace {

using std::chrono::milliseconds;
using Kind = kafka::TxnError::Kind;

// An abort that is not answered in this long leaves the transaction's outcome unknown.
constexpr milliseconds kAbortTimeout{5000};
constexpr const char* kRevoked = "revoked";  // Release()'s reason for an ordinary rebalance
// The largest sequence.lease_ms the config accepts: a lease record naming more was not written by
// a kleaf allocator with a valid config.
constexpr int64_t kMaxLeaseMs = 60000;
// The longest lease a takeover waits out: a record naming more (a writer other than kleaf's
// allocators) is waited out only this long, with a warning, rather than for days.
constexpr int64_t kLongestWaitedLeaseMs = 10 * kMaxLeaseMs;
// R5: a release's transaction (its commit, or its abort) is bounded by this.
constexpr milliseconds kReleaseTimeout{1000};
// A partition whose lease-only transaction began or renewed nothing tries again after this.
constexpr int64_t kLeaseRetryNs = 100'000'000;

// R3's holder: a random token, drawn once per process and kept in memory only.
std::string NewHolder() {
  std::random_device rd;
  std::mt19937_64 g((static_cast<uint64_t>(rd()) << 32) ^ rd());
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(g()));
  return buf;
}

metrics::Counter& ReleasesCounter(int32_t p, const char* reason, const char* outcome) {
  return metrics::Registry::Default().GetCounter(
      "kleaf_sequence_releases_total",
      "Sequence leases of the partition released, by reason (revoked, stopping, idle) and outcome "
      "(committed: a released record committed, the next owner does not wait; not_written: the "
      "owner's wait was not over or it never held a lease; failed: the record did not commit).",
      {{"partition", std::to_string(p)}, {"reason", reason}, {"outcome", outcome}});
}

// An owner-hop call refused: the status of `why`, its error body, p's lease generation (R8).
AllocatorNode::HopAnswer HopRefusal(const Error& why, uint64_t generation = 0) {
  return AllocatorNode::HopAnswer{HttpStatus(why.code), wire::EncodeError(why), generation};
}

metrics::Counter& ClockEventsCounter(const char* event) {
  return metrics::Registry::Default().GetCounter(
      "kleaf_sequence_clock_events_total",
      "Clock events seen in a held sequence lease (R9): a forward step of the wall clock, a step "
      "back, a suspend. A forward step and a suspend end every lease held.",
      {{"event", event}});
}

}  // namespace

// Reads the partition's records from the store, overlaid by the writes staged in this batch.
class BatchReader final : public allocator::StateReader {
 public:
  BatchReader(state::Store& store, const ClusterTopics& topics, int32_t partition)
      : store_(store), topics_(topics), partition_(partition) {}

  Result<std::optional<state::TagRecord>> Get(const std::string& tag) override {
    if (auto it = staged_.find(tag); it != staged_.end()) return std::optional(it->second);
    return store_.GetTag(tag);
  }
  Result<std::vector<state::TagRecord>> List() override {
    auto all = store_.ListTags();
    if (!all) return all;
    std::map<std::string, state::TagRecord> mine;
    for (auto& r : *all) {
      if (topics_.PartitionOf(r.tag) == partition_) mine[r.tag] = std::move(r);
    }
    for (const auto& [tag, r] : staged_) mine[tag] = r;
    std::vector<state::TagRecord> out;
    for (auto& [tag, r] : mine) out.push_back(std::move(r));
    return out;
  }
  Result<std::vector<state::WorkerRecord>> ListWorkers() override {
    auto all = store_.ListWorkers();
    if (!all) return all;
    std::map<int64_t, state::WorkerRecord> merged;
    for (auto& w : *all) merged[w.worker_id] = std::move(w);
    for (const auto& [id, w] : staged_workers_) merged[id] = w;
    std::vector<state::WorkerRecord> out;
    for (auto& [id, w] : merged) out.push_back(std::move(w));
    return out;
  }
  Result<std::optional<state::SpaceRecord>> GetSpace(const std::string& space) override {
    if (auto it = staged_spaces_.find(space); it != staged_spaces_.end()) {
      return std::optional(it->second);
    }
    return store_.GetSpace(space);
  }
  Result<std::vector<state::SpaceRecord>> ListSpaces() override {
    auto all = store_.ListSpaces();
    if (!all) return all;
    std::map<std::string, state::SpaceRecord> mine;
    for (auto& r : *all) {
      if (topics_.PartitionOf(r.space) == partition_) mine[r.space] = std::move(r);
    }
    for (const auto& [space, r] : staged_spaces_) mine[space] = r;
    std::vector<state::SpaceRecord> out;
    for (auto& [space, r] : mine) out.push_back(std::move(r));
    return out;
  }
  void Stage(const state::TagRecord& r) { staged_[r.tag] = r; }
  void Stage(const state::WorkerRecord& w) { staged_workers_[w.worker_id] = w; }
  void Stage(const state::SpaceRecord& r) { staged_spaces_[r.space] = r; }
  void Stage(const state::SectionRecord& r) { staged_sections_[{r.space, r.section}] = r; }
  state::Store::Batch Staged() const {
    state::Store::Batch b;  // one record per key: the last staged
    for (const auto& [tag, r] : staged_) b.tags.push_back(r);
    for (const auto& [id, w] : staged_workers_) b.workers.push_back(w);
    for (const auto& [space, r] : staged_spaces_) b.spaces.push_back(r);
    for (const auto& [key, r] : staged_sections_) b.sections.push_back(r);
    return b;
  }

 private:
  state::Store& store_;
  const ClusterTopics& topics_;
  int32_t partition_;
  std::map<std::string, state::TagRecord> staged_;
  std::map<int64_t, state::WorkerRecord> staged_workers_;
  std::map<std::string, state::SpaceRecord> staged_spaces_;
  std::map<std::pair<std::string, uint64_t>, state::SectionRecord> staged_sections_;
};

AllocatorNode::AllocatorNode(AllocatorNodeOptions options, state::Store& store, Clock& clock)
    : options_(std::move(options)),
      store_(store),
      clock_(clock),
      holder_(NewHolder()),
      commit_latency_(metrics::Registry::Default().GetHistogram(
          "kleaf_allocator_commit_seconds",
          "Time to commit one batch's transaction (consumed offsets and commit).")),
      serving_gauge_(metrics::Registry::Default().GetGauge(
          "kleaf_allocator_partitions_serving",
          "Partitions this allocator has restored and serves.")),
      assigned_events_(RebalanceCounter("assigned")),
      revoked_events_(RebalanceCounter("revoked")),
      fenced_(metrics::Registry::Default().GetCounter(
          "kleaf_allocator_fenced_total",
          "Times another allocator fenced this one's transactional producer of a partition.")),
      raises_at_need_(RaisesCounter(false)),
      raises_ahead_(RaisesCounter(true)),
      raise_waits_(metrics::Registry::Default().GetCounter(
          "kleaf_sequence_raise_waits_total",
          "Sequence requests that waited for a raise of their section's maximum: the batch ended "
          "before them and they were read again after the raise committed (R6; steady state has "
          "none, the raises come ahead of need).")) {
  // Every series present from the first scrape, at 0 (alerts on rate() need the start).
  constexpr std::pair<kafka::TxnOutcome, const char*> kOutcomes[] = {
      {kafka::TxnOutcome::kCommitted, "committed"},
      {kafka::TxnOutcome::kAborted, "aborted"},
      {kafka::TxnOutcome::kUnknown, "unknown"},
      {kafka::TxnOutcome::kFatal, "fatal"}};
  for (const auto& [outcome, name] : kOutcomes) {
    transactions_[static_cast<size_t>(outcome)] = &metrics::Registry::Default().GetCounter(
        "kleaf_allocator_transactions_total",
        "Transactions of request batches, per outcome (committed, aborted, unknown, fatal).",
        {{"outcome", name}});
  }
  for (int32_t p = 0; p < options_.topics.partitions; ++p) {
    SegmentsAllocated(p);
    MetricsOf(p);
  }
}

metrics::Counter& AllocatorNode::RebalanceCounter(const char* event) {
  return metrics::Registry::Default().GetCounter(
      "kleaf_allocator_rebalances_total",
      "Group rebalance events this allocator took part in: partitions assigned or revoked.",
      {{"event", event}});
}

metrics::Counter& AllocatorNode::RaisesCounter(bool ahead) {
  return metrics::Registry::Default().GetCounter(
      "kleaf_sequence_raises_total",
      "Section maximum raises written, asked for by a value that needed one (ahead=\"false\") or "
      "ahead of need, once less than sequence.raise_ahead_percent of a step was left "
      "(ahead=\"true\").",
      {{"ahead", ahead ? "true" : "false"}});
}

metrics::Counter& AllocatorNode::SegmentsAllocated(int32_t p) {
  auto& counter = segments_allocated_[p];
  if (counter == nullptr) {
    counter = &metrics::Registry::Default().GetCounter(
        "kleaf_allocator_segments_allocated_total",
        "Segments this allocator allocated (committed), per partition of the requests topic.",
        {{"partition", std::to_string(p)}});
  }
  return *counter;
}

AllocatorNode::~AllocatorNode() { Stop(); }

Result<void> AllocatorNode::Start() {
  kafka::Properties consumer_props = options_.props;
  consumer_props["group.id"] = options_.group_id;
  consumer_props["group.protocol"] = options_.group_protocol;
  consumer_props["client.id"] =
      (options_.props.contains("client.id") ? options_.props.at("client.id") : "kleaf") +
      kSeqWaitMark;
  // The classic protocol's (the consumer protocol leaves them to the broker; GroupConsumer drops
  // them there).
  consumer_props["session.timeout.ms"] = std::to_string(options_.session_timeout.count());
  // Partitions added to the requests topic reach the group (and RetryPending's refusal, logged
  // for the operator) within seconds instead of librdkafka's default five minutes. Unless the
  // caller chose already: KafkaProperties sets 5 s for every handle of a node.
  consumer_props.emplace("topic.metadata.refresh.interval.ms", "10000");
  consumer_props["heartbeat.interval.ms"] =
      std::to_string(std::max<int64_t>(options_.session_timeout.count() / 6, 100));
  // Each partition's fetch starts at its takeover, at its resume point (an absolute offset): no
  // committed-offset fetch whose loss would leave it unfetched for good, no lookup of its end
  // whose late answer would undo the takeover's seek and skip the requests in between.
  auto consumer = kafka::GroupConsumer::Create(consumer_props, {options_.topics.requests}, nullptr,
                                               kafka::GroupConsumer::Start::kSought);
  if (!consumer) return std::unexpected(consumer.error());
  consumer_ = std::move(*consumer);
  spdlog::info("[allocator] group {}: the {} protocol (kafka.group_protocol {})", options_.group_id,
               consumer_->Protocol(), options_.group_protocol);
  if (options_.lease.lease_ms > 0) {
    SeqWaitCheck::Describe describe = options_.describe_group;
    if (!describe) {
      describe = [props = options_.props, group = options_.group_id] {
        return kafka::DescribeGroupMembers(props, group, milliseconds(5000));
      };
    }
    seq_wait_check_ = std::make_unique<SeqWaitCheck>(
        std::move(describe), options_.group_check_period, milliseconds(1000));
  }
  thread_ = std::thread([this] { Run(); });
  if (options_.lease.lease_ms > 0) watch_thread_ = std::thread([this] { WatchClocks(); });
  return {};
}

void AllocatorNode::Stop() {
  if (stop_.exchange(true) || !thread_.joinable()) return;
  thread_.join();
  if (watch_thread_.joinable()) {
    {
      MutexLock lock(watch_mu_);
      watch_stop_ = true;
    }
    watch_wake_.NotifyAll();
    watch_thread_.join();
  }
  if (seq_wait_check_) seq_wait_check_->Stop();
}

allocator::LeaseTiming AllocatorNode::WaitTiming() const {
  allocator::LeaseTiming t = options_.lease;
  // A1's check: in drift, ρ is replaced by twice the correction's size (a margin, not a proof).
  t.drift_ppm = std::max(t.drift_ppm, wait_rho_ppm_.load());
  return t;
}

void AllocatorNode::WatchClocks() {
  auto& registry = metrics::Registry::Default();
  // Exported from the first reading on: a kernel that cannot be read shows no clock series (and
  // no false "unsynchronized"), only the warning below.
  metrics::Gauge* slew = nullptr;
  metrics::Gauge* synchronized = nullptr;
  metrics::Gauge* pending = nullptr;
  const auto export_clock = [&] {
    slew = &registry.GetGauge(
        "kleaf_sequence_clock_slew_ppm",
        "The kernel's frequency correction of this node's clock (adjtimex: freq plus the tick's), "
        "in ppm: the time daemon's measure of the oscillator's rate error, plus any slew chrony "
        "applies (A1).");
    synchronized = &registry.GetGauge(
        "kleaf_sequence_clock_synchronized",
        "1 while the kernel calls this node's clock synchronized (adjtimex's STA_UNSYNC clear).");
    pending = &registry.GetGauge(
        "kleaf_sequence_clock_slew_pending_seconds",
        "The offset the kernel still has to slew (the PLL's and adjtime()'s), in seconds.");
  };
  metrics::Gauge& drift = registry.GetGauge(
      "kleaf_sequence_clock_drift",
      "1 while the clock's frequency correction has stayed above half of sequence.clock_drift_ppm "
      "for the drift window (10 minutes): the node holds no sequence lease and waits longer (A1).");
  metrics::Gauge& blocked = registry.GetGauge("kleaf_sequence_lease_blocked", kLeaseBlockedHelp,
                                              {{"reason", "clock_drift"}});
  allocator::KernelClockRateSource& source =
      options_.clock_rate != nullptr ? *options_.clock_rate : allocator::KernelClockRate();
  allocator::ClockDriftWatch watch(options_.lease.drift_ppm, options_.drift_window_ns);
  wait_rho_ppm_.store(options_.lease.drift_ppm);
  bool read_failed_logged = false;
  for (int turn = 0;; ++turn) {
    {
      MutexLock lock(watch_mu_);
      if (turn > 0) {
        watch_wake_.WaitFor(lock, milliseconds(100),
                            [this]() KLEAF_REQUIRES(watch_mu_) { return watch_stop_; });
      }
      if (watch_stop_) break;
    }
    // R9's watchdog: a clock event ends a lease now, not at the loop's next turn; and a lease the
    // group check or the drift check no longer allows is dropped within 100 ms of its verdict, so
    // a transaction in flight then begins or renews nothing.
    {
      const bool allowed = LeaseAllowed();
      MutexLock lock(seq_mu_);
      if (auto now = allocator::TakeReading(LeaseClocks())) {
        for (auto& [p, h] : leases_) DropAtClockEvent(p, h, *now);
      }
      if (!allowed) {
        for (auto& [p, h] : leases_) {
          if (h.lease->Mark()) {
            spdlog::warn("[allocator] partition {}: sequence lease dropped: {}", p,
                         LeaseBlocked().value_or("the lease checks changed"));
          }
        }
      }
    }
    if (turn % 10 != 0) continue;
    // A1's check on the node.
    auto state = source.Read();
    if (!state) {
      if (!read_failed_logged) {
        spdlog::warn("[allocator] the clock's rate cannot be checked: {}", state.error().message);
        read_failed_logged = true;
      }
      continue;
    }
    if (read_failed_logged) spdlog::info("[allocator] the clock's rate can be checked again");
    read_failed_logged = false;
    if (slew == nullptr) export_clock();
    slew->Set(state->correction_ppm);
    synchronized->Set(state->synchronized ? 1 : 0);
    pending->Set(state->pending_s);
    watch.Note(clock_.MonotonicNs(), *state);
    const bool now_drifting = watch.Drifting();
    wait_rho_ppm_.store(watch.WaitRhoPpm());
    if (drifting_.exchange(now_drifting) != now_drifting) {
      if (now_drifting) {
        spdlog::error(
            "[allocator] the clock's frequency correction has stayed above {} ppm (half of "
            "sequence.clock_drift_ppm) for {} s: {:.0f} ppm now. No sequence lease is held (a "
            "commit per batch) and takeovers wait with {} ppm until it stays below for as long "
            "(docs/operations.md, \"Sequence leases\")",
            options_.lease.drift_ppm / 2, options_.drift_window_ns / 1'000'000'000,
            state->correction_ppm, watch.WaitRhoPpm());
      } else {
        spdlog::info(
            "[allocator] the clock's frequency correction is within half of "
            "sequence.clock_drift_ppm again: sequence leases are held again");
      }
    }
    drift.Set(now_drifting ? 1 : 0);
    blocked.Set(now_drifting ? 1 : 0);
  }
  drift.Set(0);
  blocked.Set(0);
}

std::optional<std::string> AllocatorNode::LeaseBlocked() const {
  if (drifting_.load()) {
    return "the clock's frequency correction has stayed above half of sequence.clock_drift_ppm "
           "(A1)";
  }
  if (!seq_wait_check_) return std::nullopt;
  return seq_wait_check_->Blocked();
}

bool AllocatorNode::LeaseAllowed() const {
  return !drifting_.load(std::memory_order_acquire) &&
         (!seq_wait_check_ || seq_wait_check_->AllWait());
}

void AllocatorNode::MarkAllLeases(const std::string& why) {
  MutexLock lock(seq_mu_);
  for (auto& [p, h] : leases_) {
    if (h.lease->Mark())
      spdlog::warn("[allocator] partition {}: sequence lease dropped: {}", p, why);
  }
}

std::vector<int32_t> AllocatorNode::Serving() const {
  MutexLock lock(serving_mu_);
  return serving_snapshot_;
}

AllocatorNode::Status AllocatorNode::status() const {
  Status s;
  s.member = member_.load();
  if (const int64_t left = left_group_ns_.load(); !s.member && left >= 0) {
    s.left_group_ms_ago = (clock_.MonotonicNs() - left) / 1'000'000;
  }
  s.pending = pending_count_.load();
  if (const int64_t since = pending_since_ns_.load(); s.pending > 0 && since >= 0) {
    s.pending_for_ms = (clock_.MonotonicNs() - since) / 1'000'000;
  }
  s.served_all_once = served_all_once_.load();
  s.serving = Serving();
  s.takeovers = takeovers_.load();
  return s;
}

void AllocatorNode::Run() {
  std::vector<kafka::Message> batch;
  while (!stop_.load()) {
    if (const int32_t p = inject_fatal_.exchange(-1); p >= 0) {
      if (auto it = serving_.find(p); it != serving_.end())
        it->second->InjectFatalErrorForTesting();
    }
    RetryPending();
    // Only a rewind after this poll makes a message it returned one to read again (OnEvent).
    rewound_.clear();
    auto event = consumer_->Poll(milliseconds(50));
    // The owner hop's requests first: SubmitHop's wake ends the poll, and they wait for nothing
    // else of this turn.
    ServeHop();
    // Gather a batch: this message and whatever else is already fetched.
    // Up to batch_max requests per served partition: each partition is its own transaction.
    const size_t limit =
        static_cast<size_t>(options_.batch_max) * std::max<size_t>(1, serving_.size());
    while (event.kind == kafka::GroupConsumer::Event::Kind::kMessage && batch.size() < limit) {
      batch.push_back(std::move(event.message));
      event = consumer_->Poll(milliseconds(0));
    }
    if (!batch.empty()) {
      std::map<int32_t, std::vector<kafka::Message>> by_partition;
      for (auto& m : batch) by_partition[m.partition].push_back(std::move(m));
      batch.clear();
      ProcessBatches(std::move(by_partition));
    }
    OnEvent(event, batch);
    TendLeases();
    ServeHop();  // the calls whose raise TendLeases just committed
    PublishProgress();
  }
  {
    // The owner hop serves nothing from here on; the calls waiting for a raise are refused.
    std::vector<HopRequest> left;
    {
      MutexLock lock(seq_mu_);
      hop_served_.clear();
      for (auto& [p, waiting] : hop_raise_waits_) {
        for (auto& r : waiting) left.push_back(std::move(r));
      }
      hop_raise_waits_.clear();
    }
    for (auto& r : left) r.done(HopRefusal({Code::kUnavailable, "the allocator is stopping"}));
  }
  // R5: a planned stop releases every lease, so the next owners do not wait them out.
  std::vector<int32_t> served;
  for (const auto& [p, unused] : serving_) served.push_back(p);
  ReleaseLeases(served, "stopping");
  // Best effort, as at a release below: the transaction coordinator aborts what is left.
  for (auto& [p, producer] : serving_) (void)producer->Abort(milliseconds(2000));
  serving_.clear();
  takeovers_in_flight_.clear();  // waits for each: bounded, and they see stop_ between steps
  consumer_->Close();
}

void AllocatorNode::OnEvent(kafka::GroupConsumer::Event& event,
                            std::vector<kafka::Message>& batch) {
  switch (event.kind) {
    case kafka::GroupConsumer::Event::Kind::kMessage:
      // The batch was full: this message starts the next one, unless its partition was just
      // rewound below it (then the consumer delivers it again).
      if (!rewound_.contains(event.message.partition)) batch.push_back(std::move(event.message));
      break;
    case kafka::GroupConsumer::Event::Kind::kAssigned:
      member_.store(true);
      // The group's membership may have changed: no lease until it is described again, and a
      // transaction in flight begins or renews none (R2's count moves on).
      if (seq_wait_check_) {
        seq_wait_check_->Changed();
        MarkAllLeases("the allocators' group changed; held again once it is described");
      }
      OnAssigned(event.partitions);
      break;
    case kafka::GroupConsumer::Event::Kind::kRevoked:
      // Eagerly every partition goes (a rebalance under way); incrementally (the consumer
      // protocol) only those named, and the node stays a member unless it lost them.
      if (consumer_->Protocol() == "classic" || event.lost) {
        if (member_.exchange(false)) left_group_ns_.store(clock_.MonotonicNs());
      }
      if (seq_wait_check_) {
        seq_wait_check_->Changed();
        MarkAllLeases("the allocators' group changed; held again once it is described");
      }
      OnRevoked(event.partitions);
      break;
    case kafka::GroupConsumer::Event::Kind::kError:
      spdlog::warn("[allocator] consumer: {}", event.error);
      if (kafka::IsAuthorizationFailure(event.error)) {
        // Without these rights the node never joins its group: it would run and serve nothing.
        const bool group = event.error.find("Group authorization") != std::string::npos;
        Unauthorized("consumer group " + options_.group_id + ": " + event.error +
                     ": the Kafka principal needs READ on " +
                     (group ? "group " + options_.group_id : "topic " + options_.topics.requests));
      }
      break;
    case kafka::GroupConsumer::Event::Kind::kNone:
      break;
  }
}

void AllocatorNode::Unauthorized(const std::string& why) {
  const std::string message = why + " (" + kafka::kAclHint + ")";
  spdlog::error("[allocator] {}", message);
  if (options_.on_unauthorized) options_.on_unauthorized(message);
}

void AllocatorNode::PublishProgress() {
  pending_count_.store(static_cast<int>(pending_.size()));
  if (pending_.empty()) {
    pending_since_ns_.store(-1);
    if (member_.load()) served_all_once_.store(true);
  } else if (pending_since_ns_.load() < 0) {
    pending_since_ns_.store(clock_.MonotonicNs());
  }
  serving_gauge_.Set(static_cast<double>(serving_.size()));
  // A partition whose wait ended without a sequence call ends it here, so that
  // kleaf_sequence_takeover_waiting goes back to 0 (a rollback past the bridge waits for that).
  MutexLock lock(seq_mu_);
  for (auto it = sequence_waits_.begin(); it != sequence_waits_.end();) {
    const int32_t p = it->first;
    ++it;
    (void)SequenceRefusal(p, /*count=*/false);
  }
}

void AllocatorNode::OnAssigned(const std::vector<kafka::TopicPartition>& partitions) {
  assigned_events_.Inc();
  for (const auto& tp : partitions) {
    spdlog::info("[allocator] partition {} assigned", tp.partition);
    // Partitions beyond the layout are refused (RetryPending): no series of theirs is made after
    // the constructor, so the owner hop's threads only ever read the map of series.
    if (tp.partition < options_.topics.partitions) MetricsOf(tp.partition).assignments.Inc();
    pending_.insert(tp.partition);
    retry_at_ns_.erase(tp.partition);
  }
  RetryPending();
}

void AllocatorNode::OnRevoked(const std::vector<kafka::TopicPartition>& partitions) {
  revoked_events_.Inc();
  std::vector<int32_t> served;
  for (const auto& tp : partitions) {
    if (serving_.contains(tp.partition)) served.push_back(tp.partition);
  }
  ReleaseLeases(served, "revoked");
  for (const auto& tp : partitions) {
    pending_.erase(tp.partition);
    if (auto t = takeovers_in_flight_.find(tp.partition); t != takeovers_in_flight_.end()) {
      t->second.revoked->store(true);
    }
    Release(tp.partition, kRevoked);
  }
}

bool AllocatorNode::StillAssigned(int32_t p) {
  for (const auto& tp : consumer_->Assignment()) {
    if (tp.topic == options_.topics.requests && tp.partition == p) return true;
  }
  return false;
}

void AllocatorNode::RetryPending() {
  FinishTakeovers();
  const int64_t now = clock_.MonotonicNs();
  for (auto it = pending_.begin(); it != pending_.end();) {
    int32_t p = *it;
    if (p >= options_.topics.partitions) {
      // The group hands out every partition the topic has: these were added after the layout
      // was recorded. Tags that map to them under the new count have their state elsewhere.
      spdlog::error(
          "[allocator] partition {} of {} is beyond the {} partitions of this cluster's "
          "layout: partitions were added to a live topic; not serving it (see "
          "docs/operations.md, \"Layout refusals\")",
          p, options_.topics.requests, options_.topics.partitions);
      it = pending_.erase(it);
      continue;
    }
    if (takeovers_in_flight_.contains(p) || (retry_at_ns_.contains(p) && now < retry_at_ns_[p])) {
      ++it;
      continue;
    }
    if (!StillAssigned(p)) {
      // A queued assignment event that a later rebalance already overtook: taking p over now
      // would fence its real owner.
      spdlog::info("[allocator] partition {} no longer assigned here; not taking it over", p);
      it = pending_.erase(it);
      continue;
    }
    auto revoked = std::make_shared<std::atomic<bool>>(false);
    std::optional<allocator::HeldBefore> before;
    if (auto h = held_before_.find(p); h != held_before_.end()) before = h->second;
    takeovers_in_flight_.emplace(
        p, Takeover{revoked, std::async(std::launch::async, [this, p, revoked, before] {
                      return FenceAndRestore(p, *revoked, before);
                    })});
    ++it;
  }
}

void AllocatorNode::FinishTakeovers() {
  for (auto it = takeovers_in_flight_.begin(); it != takeovers_in_flight_.end();) {
    if (it->second.result.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
      ++it;
      continue;
    }
    const int32_t p = it->first;
    auto fenced = it->second.result.get();
    it = takeovers_in_flight_.erase(it);
    if (!pending_.contains(p)) {  // revoked meanwhile: its producer goes unused
      spdlog::info("[allocator] partition {}: a takeover ended after it was revoked ({})", p,
                   fenced ? "fenced and restored" : fenced.error().message);
      continue;
    }
    // A takeover revoked and assigned again before it ended is served as it is: if another owner
    // held p in between, that owner's fence came after this one's, so this producer commits
    // nothing, its first batch fails and p is taken over again (its answers wait for a commit).
    if (!StillAssigned(p)) {
      spdlog::info("[allocator] partition {} no longer assigned here; not serving it", p);
      pending_.erase(p);
      continue;
    }
    auto resume =
        fenced ? Serve(p, std::move(*fenced)) : Result<int64_t>(std::unexpected(fenced.error()));
    if (!resume) {
      spdlog::warn("[allocator] cannot take over partition {} yet: {}", p, resume.error().message);
      if (kafka::IsAuthorizationFailure(resume.error().message)) {
        Unauthorized("taking over partition " + std::to_string(p) + ": " + resume.error().message +
                     ": the Kafka principal needs WRITE on transactional id " +
                     options_.topics.TransactionalId(p) + " (one per partition: PREFIXED " +
                     options_.topics.requests + ".owner.)");
      }
      retry_at_ns_[p] = clock_.MonotonicNs() + 1'000'000'000;
      continue;
    }
    pending_.erase(p);
    retry_at_ns_.erase(p);
    // The consumer fetches p from here on: from where the last committed batch ended (the seek
    // drops whatever a fetch before a retake had left unpolled; the floor drops whatever
    // arrives below it anyway).
    floor_[p] = std::max<int64_t>(*resume, 0);
    Rewind(p, *resume);
  }
}

Result<AllocatorNode::Fenced> AllocatorNode::FenceAndRestore(
    int32_t p, const std::atomic<bool>& revoked,
    std::optional<allocator::HeldBefore> before) const {
  Fenced out;
  out.started_ns = clock_.MonotonicNs();
  auto producer = kafka::TxnProducer::Create(
      [&] {
        kafka::Properties props = options_.props;
        props["transaction.timeout.ms"] = std::to_string(options_.txn_timeout.count());
        props["message.timeout.ms"] = std::to_string(options_.txn_timeout.count() - 1000);
        return props;
      }(),
      options_.topics.TransactionalId(p));
  if (!producer) return std::unexpected(producer.error());
  // Fence the previous owner first; only then is the state topic's end final.
  for (int attempt = 0;; ++attempt) {
    auto init = (*producer)->Init(milliseconds(10000));
    if (init) break;
    const bool last =
        init.error().kind != Kind::kRetriable || attempt >= 3 || stop_.load() || revoked.load();
    spdlog::warn(
        "[allocator] taking over partition {}: init_transactions attempt {} failed after "
        "{} ms of the takeover: {}{}",
        p, attempt + 1, (clock_.MonotonicNs() - out.started_ns) / 1'000'000, init.error().message,
        last ? "; giving up this takeover" : "; trying again");
    if (last) return Fail(Code::kUnavailable, "init_transactions: " + init.error().message);
  }
  // R4's t_fenced: read after the attempt that succeeded, never before the call.
  auto fenced_at = allocator::TakeReading(LeaseClocks());
  if (!fenced_at) return std::unexpected(fenced_at.error());
  out.fenced_at = *fenced_at;
  const auto step_done = [&](const char* step) {
    const int64_t ms = (clock_.MonotonicNs() - out.started_ns) / 1'000'000;
    if (ms >= 2000)
      spdlog::info("[allocator] taking over partition {}: {} done {} ms into it", p, step, ms);
  };
  step_done("fencing");
  // Not fatal: without it the first round only waits for librdkafka's own lookup of each topic.
  for (const std::string* topic : {&options_.topics.state, &options_.topics.replies}) {
    if (auto ready = (*producer)->Prepare(*topic, milliseconds(5000)); !ready) {
      spdlog::warn("[allocator] {}", ready.error().message);
    }
  }
  if (stop_.load()) return Fail(Code::kUnavailable, "stopping");
  if (revoked.load()) return Fail(Code::kUnavailable, "revoked during its takeover");
  auto reader = kafka::PartitionReader::Create(options_.props, "allocator_restore");
  if (!reader) return std::unexpected(reader.error());
  auto tail_reader = kafka::PartitionReader::Create(TailReaderProperties(options_.props),
                                                    "allocator_restore_tail");
  if (!tail_reader) return std::unexpected(tail_reader.error());
  auto restored =
      RestorePartition(**reader, **tail_reader, store_, options_.topics, p, milliseconds(60000));
  if (!restored) {
    spdlog::warn("[allocator] taking over partition {}: restoring failed after {} ms: {}", p,
                 (clock_.MonotonicNs() - out.started_ns) / 1'000'000, restored.error().message);
    return std::unexpected(restored.error());
  }
  step_done("restoring");
  if (restored->open_transaction_at && !restored->floors.empty()) {
    // The tail behind a transaction without an outcome was applied as if committed. Its maxima are
    // written again in a transaction of this owner, before anything is served: committed, they
    // outlast that transaction's abort (an operator's kafka-transactions.sh abort makes its
    // records invisible to every later restore, which would then start below IDs it served).
    auto recommitted = [&]() -> Result<void> {
      if (auto b = (*producer)->Begin(); !b) return Fail(Code::kUnavailable, b.error().message);
      if (options_.before_rewrite_commit) {
        if (auto hook = options_.before_rewrite_commit(p); !hook) return hook;
      }
      for (const auto& [key, value] : restored->floors) {
        if (auto sent = (*producer)->Send(options_.topics.state, p, key, value, {}); !sent)
          return std::unexpected(sent.error());
      }
      if (auto c = (*producer)->Commit(milliseconds(10000)); !c)
        return Fail(Code::kUnavailable, c.error().message);
      return {};
    }();
    if (!recommitted) {
      // The store's applied offset is still below the tail (RestorePartition): the retry reads the
      // tail again and writes the same maxima again before it serves.
      (void)(*producer)->Abort(milliseconds(1000));
      return Fail(Code::kUnavailable,
                  "writing again the maxima read past an open transaction on state partition " +
                      std::to_string(p) + ": " + recommitted.error().message);
    }
  }
  if (restored->open_transaction_at) {
    // Only now, the maxima committed, may the store say the tail is applied: a later restore
    // starts past it (and reads again only what was written since, the rewrite included).
    // The tail's records too, committed again now (RestorePartition left them out of the store).
    state::Store::Batch applied = restored->tail;
    applied.values.emplace_back(AppliedOffsetKey(p), restored->end);
    // The newest lease record, as the rewrite committed it again when the tail held one (R3).
    if (restored->lease_copy_complete) {
      KeepLeaseCopy(applied, p, std::nullopt,
                    restored->tail_had_lease ? restored->lease : std::nullopt, restored->end);
    }
    if (auto w = store_.Write(applied, /*sync=*/true); !w) return std::unexpected(w.error());
  }
  auto marks = (*reader)->Watermarks(options_.topics.requests, p, milliseconds(5000));
  if (!marks) return std::unexpected(marks.error());
  out.wait = allocator::PlanTakeoverWait(restored->lease, holder_, before, options_.lease.lease_ms);
  out.producer = std::move(*producer);
  out.restored = *restored;
  out.requests_start = marks->first;
  out.requests_end = marks->second;
  return out;
}

Result<int64_t> AllocatorNode::Serve(int32_t p, Fenced fenced) {
  const RestoreResult& restored = fenced.restored;
  // Where to resume: the position the last committed batch recorded in the state topic, read by
  // the restore after the fence, so it covers exactly the batches whose replies are visible. The
  // group's committed offset is only ever set after a commit (OnCommitted), so it is never ahead
  // of that position, except in a cluster upgraded from a version that committed it in the
  // transaction instead: the higher of the two is where the last committed batch ended.
  auto committed = consumer_->Committed({{options_.topics.requests, p}}, milliseconds(5000));
  if (!committed && !restored.requests_offset) {
    return Fail(Code::kUnavailable, "no consumed position for requests partition " +
                                        std::to_string(p) + ": " + committed.error().message);
  }
  int64_t resume = restored.requests_offset.value_or(-1);
  if (committed) resume = std::max(resume, committed->front().offset);
  if (resume > fenced.requests_end) {
    // A position past the partition's end belongs to an earlier requests topic (deleted and
    // created again: offsets start over) or to records a broker lost: nothing at or past the end
    // was answered. Serving starts at the end; requests already waiting below it get no answer
    // and are sent again by their gateways. Dropping every request below the old position, as
    // answered, would leave the partition unserved until its offsets caught up.
    spdlog::warn(
        "[allocator] partition {}: the recorded position {} of {} is past its end {}: the "
        "topic was recreated or lost records; serving from its end",
        p, resume, options_.topics.requests, fenced.requests_end);
    resume = fenced.requests_end;
  }
  // Nothing ever committed on p: its first request still kept. An absolute offset, as every
  // position the consumer is given (GroupConsumer::Start::kSought).
  if (resume < 0) resume = fenced.requests_start;
  serving_[p] = std::move(fenced.producer);
  takeovers_.fetch_add(1);
  MetricsOf(p).takeovers.Inc();
  if (restored.open_transaction_at) {
    MetricsOf(p).open_transaction_restores.Inc();
    spdlog::warn(
        "[allocator] partition {}: a transaction on {} begun at offset {} has no outcome: readers "
        "of committed records stop there, and the records up to {} were read as if committed "
        "({} maxima written again, committed). Kafka answers a commit before it writes its "
        "markers and drops them for a partition without a leader at that moment (a restart of "
        "its only broker, all its replicas down). End it so that readers move on: "
        "kafka-transactions.sh --bootstrap-server B find-hanging --broker-id N, then "
        "kafka-transactions.sh --bootstrap-server B abort --topic {} --partition {} "
        "--start-offset {} (docs/operations.md, \"A transaction without an outcome\")",
        p, options_.topics.state, *restored.open_transaction_at, restored.end,
        restored.floors.size(), options_.topics.state, p, *restored.open_transaction_at);
  }
  {
    PartitionMetrics& m = MetricsOf(p);
    SequenceWait wait{fenced.fenced_at,
                      allocator::TakeoverWaitNs(
                          std::min(fenced.wait.lease_w_ms, kLongestWaitedLeaseMs), WaitTiming()),
                      restored.lease_goes_back};
    lease_copy_complete_[p] = restored.lease_copy_complete;
    metrics::Registry::Default()
        .GetCounter(
            "kleaf_sequence_takeover_waits_total",
            "Takeovers of the partition by the row of the takeover-wait table they waited "
            "by (none, released, own, other).",
            {{"partition", std::to_string(p)}, {"row", allocator::WaitRowName(fenced.wait.row)}})
        .Inc();
    m.takeover_wait_seconds.Set(static_cast<double>(wait.wait_ns) / 1e9);
    m.takeover_waiting.Set(1);
    if (restored.tail_leases_out_of_order > 0) {
      m.lease_records_out_of_order.Inc(static_cast<uint64_t>(restored.tail_leases_out_of_order));
    }
    const auto level = fenced.wait.lease_w_ms > 0 || !wait.refused_for_good.empty()
                           ? spdlog::level::info
                           : spdlog::level::debug;
    spdlog::log(level,
                "[allocator] partition {}: sequence calls wait {} ms after the fence (the newest "
                "lease record: {}, L_w {} ms{})",
                p, wait.wait_ns / 1'000'000, allocator::WaitRowName(fenced.wait.row),
                fenced.wait.lease_w_ms,
                wait.refused_for_good.empty() ? "" : "; refused: " + wait.refused_for_good);
    if (fenced.wait.lease_w_ms > kMaxLeaseMs) {
      spdlog::warn(
          "[allocator] partition {}: its newest lease record names a lease of {} ms, "
          "above the {} ms any kleaf allocator may hold: waited out (up to {} ms); check "
          "what writes to {}",
          p, fenced.wait.lease_w_ms, kMaxLeaseMs, kLongestWaitedLeaseMs, options_.topics.state);
    }
    MutexLock lock(seq_mu_);
    sequence_waits_[p] = std::move(wait);
    if (options_.lease.lease_ms > 0) {
      leases_[p] = HeldLease{std::make_unique<allocator::PartitionLease>(fenced.wait.generation),
                             fenced.wait};
    }
    hop_served_.insert(p);
  }
  held_before_.erase(p);  // consumed by this takeover's wait
  MetricsOf(p).serving.Set(1);
  {
    MutexLock lock(serving_mu_);
    serving_snapshot_.clear();
    for (const auto& [q, unused] : serving_) serving_snapshot_.push_back(q);
  }
  spdlog::info(
      "[allocator] partition {} restored ({} records, offsets {} to {}) in {} ms; serving "
      "requests from offset {}",
      p, restored.records, restored.from, restored.end,
      (clock_.MonotonicNs() - fenced.started_ns) / 1'000'000, resume);
  return resume;
}

void AllocatorNode::Release(int32_t p, const std::string& why) {
  auto it = serving_.find(p);
  if (it == serving_.end()) return;
  // A revocation is an ordinary rebalance (an allocator joined or left): info. Every other
  // reason (fenced, a failed rewind or transaction) is something an operator may need to see.
  spdlog::log(why == kRevoked ? spdlog::level::info : spdlog::level::warn,
              "[allocator] partition {} no longer served: {}", p, why);
  MetricsOf(p).releases.Inc();
  MetricsOf(p).serving.Set(0);
  std::vector<HopRequest> waiting;
  {
    // R7, under the sequence lock: p unserved for sequences (the owner hop computes nothing of p
    // once this returns); what this process held is remembered for its next takeover of p (R4's
    // third row needs all three).
    MutexLock lock(seq_mu_);
    hop_served_.erase(p);
    if (auto w = hop_raise_waits_.find(p); w != hop_raise_waits_.end()) {
      waiting = std::move(w->second);
      hop_raise_waits_.erase(w);
    }
    if (auto l = leases_.find(p); l != leases_.end()) {
      l->second.lease->Mark();
      held_before_[p] =
          allocator::HeldBefore{l->second.lease->generation(), l->second.lease->HeldCommitted(),
                                !sequence_waits_.contains(p)};
      leases_.erase(l);
      MetricsOf(p).lease_held.Set(0);
      MetricsOf(p).lease_age_seconds.Set(0);
    }
    counters_.erase(p);  // a later takeover starts every section at its persisted maximum (I5)
    if (sequence_waits_.erase(p) > 0) MetricsOf(p).takeover_waiting.Set(0);
  }
  for (auto& r : waiting) {
    r.done(HopRefusal({Code::kUnavailable,
                       "partition " + std::to_string(p) + " is no longer served here: " + why}));
  }
  (void)it->second->Abort(milliseconds(1000));  // best effort; a fenced producer cannot abort
  serving_.erase(it);
  floor_.erase(p);
  lease_copy_complete_.erase(p);
  MutexLock lock(serving_mu_);
  std::erase(serving_snapshot_, p);
}

AllocatorNode::PartitionMetrics& AllocatorNode::MetricsOf(int32_t p) {
  static constexpr char kRenewalsHelp[] =
      "Commits that began or renewed the partition's sequence lease: a transaction of a lease "
      "record only, or any other transaction.";
  if (auto it = partition_metrics_.find(p); it != partition_metrics_.end()) return it->second;
  auto& registry = metrics::Registry::Default();
  const metrics::Labels labels = {{"partition", std::to_string(p)}};
  PartitionMetrics m{
      registry.GetCounter("kleaf_allocator_partition_assignments_total",
                          "Times the allocators' group assigned this partition of the requests "
                          "topic to this allocator.",
                          labels),
      registry.GetCounter("kleaf_allocator_partition_takeovers_total",
                          "Times this allocator took the partition over: fenced its previous "
                          "owner and restored its state.",
                          labels),
      registry.GetCounter("kleaf_allocator_partition_releases_total",
                          "Times this allocator stopped serving the partition (revoked, fenced, "
                          "failed).",
                          labels),
      registry.GetGauge("kleaf_allocator_partition_serving",
                        "1 while this allocator serves the partition, 0 once it released it.",
                        labels),
      registry.GetCounter("kleaf_allocator_open_transaction_restores_total",
                          "Takeovers of the partition that found a transaction without an "
                          "outcome in its state partition and restored through it.",
                          labels),
      registry.GetGauge("kleaf_sequence_takeover_waiting",
                        "1 while this allocator waits out the previous owner's sequence lease "
                        "after taking the partition over (its sequence calls are refused).",
                        labels),
      registry.GetGauge("kleaf_sequence_takeover_wait_seconds",
                        "How long the last takeover of the partition waited (of the slower lease "
                        "clock) before answering sequence calls.",
                        labels),
      registry.GetCounter("kleaf_sequence_refusals_total",
                          "Sequence calls of the partition refused, by reason.",
                          {{"partition", std::to_string(p)}, {"reason", "waiting"}}),
      registry.GetCounter("kleaf_sequence_lease_records_out_of_order_total",
                          "Lease records of an older generation after a newer one, found past the "
                          "last stable offset by a takeover's restore (a fenced owner's appends).",
                          {{"partition", std::to_string(p)}, {"where", "tail"}}),
      registry.GetGauge("kleaf_sequence_lease_held",
                        "1 while this allocator holds the partition's sequence lease.", labels),
      registry.GetGauge("kleaf_sequence_lease_age_seconds",
                        "Time since the held lease's anchor (the reading before the last commit "
                        "that began or renewed it), by the faster lease clock; 0 without a lease.",
                        labels),
      registry.GetCounter("kleaf_sequence_lease_renewals_total", kRenewalsHelp,
                          {{"partition", std::to_string(p)}, {"via", "record"}}),
      registry.GetCounter("kleaf_sequence_lease_renewals_total", kRenewalsHelp,
                          {{"partition", std::to_string(p)}, {"via", "transaction"}}),
      registry.GetCounter("kleaf_sequence_lease_expiries_total",
                          "Times the partition's held sequence lease ran out before a renewal "
                          "committed (renewals are failing or too slow).",
                          labels)};
  return partition_metrics_.emplace(p, m).first->second;
}

void AllocatorNode::Rewind(int32_t p, int64_t offset) {
  // A request of p already taken from the consumer to start the next batch predates the seek: it
  // is read again from the new position (OnEvent drops it).
  rewound_.insert(p);
  auto r = consumer_->Seek({options_.topics.requests, p, offset}, milliseconds(5000));
  if (r) return;
  // Cannot read from the position: serve p only once a takeover seeks it again, a second later
  // (each takeover fences and restores: retrying at once made a loop of them every 55 ms).
  spdlog::error("[allocator] partition {}: cannot rewind to {}: {}", p, offset, r.error().message);
  Retake(p, "rewind failed");
}

// One partition's batch from its first record to the end of its transaction. Made and ended by
// the loop thread; between the two only its commit touches it, on a thread of its own.
struct AllocatorNode::OpenBatch {
  OpenBatch(state::Store& store, const ClusterTopics& topics, int32_t partition)
      : p(partition), reader(store, topics, partition) {}
  int32_t p;
  std::vector<kafka::Message> batch;
  kafka::TxnProducer* producer = nullptr;  // serving_[p] when the batch was opened
  BatchReader reader;
  // p's counters: the batch's sequence values are in them as soon as computed (R1), never above a
  // committed maximum; `raises` are the section raises this transaction carries, settled in the
  // counters when it ends (R6).
  allocator::SequenceCounters* counters = nullptr;
  std::vector<state::SectionRecord> raises;
  // The request the batch stopped before, which needs a raise first: the transaction carries the
  // raise and records this offset as consumed up to; the request is read again once it committed.
  std::optional<int64_t> cut;
  int64_t segments = 0;
  // The offset after the last request this transaction answered; none for a transaction of
  // lease records only.
  std::optional<int64_t> NextOffset() const {
    if (cut) return cut;
    if (batch.empty()) return std::nullopt;
    return batch.back().offset + 1;
  }
  // R2: p's lease count noted at Begin (when p has a lease state), and the reading taken just
  // before the first commit call; R3: the lease record this transaction carries.
  std::optional<uint64_t> lease_count;
  std::optional<allocator::LeaseReading> before_commit;
  std::optional<state::LeaseRecord> lease_record;
  bool release = false;    // R5: a release's transaction, bounded by kReleaseTimeout
  bool delivered = false;  // R2: the transaction delivered a record of its own (read after it)
  std::optional<kafka::TxnEnd> end;  // set once the transaction ended (before its commit: failed)
};

void AllocatorNode::ProcessBatches(std::map<int32_t, std::vector<kafka::Message>> by_partition) {
  std::vector<std::unique_ptr<OpenBatch>> open;
  for (auto& [p, messages] : by_partition) {
    if (auto batch = OpenTransaction(p, std::move(messages))) open.push_back(std::move(batch));
  }
  CommitAll(open);
  EndAll(open);
}

std::unique_ptr<AllocatorNode::OpenBatch> AllocatorNode::OpenTransaction(
    int32_t p, std::vector<kafka::Message> batch) {
  auto it = serving_.find(p);
  if (it == serving_.end()) return nullptr;  // re-read from the recorded position once taken over
  const int64_t floor = floor_[p];
  if (!batch.empty() && batch.front().offset < floor) {
    // Requests a committed batch already answered (the consumer started below the resume
    // point): running them again would apply them twice.
    const size_t before = batch.size();
    std::erase_if(batch, [floor](const kafka::Message& m) { return m.offset < floor; });
    spdlog::info("[allocator] partition {}: {} requests below offset {} skipped (answered)", p,
                 before - batch.size(), floor);
    if (batch.empty()) return nullptr;
  }
  auto open = std::make_unique<OpenBatch>(store_, options_.topics, p);
  open->batch = std::move(batch);
  open->producer = it->second.get();
  {
    MutexLock lock(seq_mu_);
    open->counters = &CountersOf(p);
  }
  if (auto failed = ProduceBatch(*open)) open->end = std::move(*failed);
  return open;
}

std::optional<kafka::TxnEnd> AllocatorNode::ProduceBatch(OpenBatch& open) {
  kafka::TxnProducer& producer = *open.producer;
  BatchReader& reader = open.reader;
  const int32_t p = open.p;
  // R2: the count is noted at Begin (just before it), so a mark while this transaction is open
  // makes it begin and renew nothing, whatever it carries.
  {
    MutexLock lock(seq_mu_);
    if (auto l = leases_.find(p); l != leases_.end()) {
      open.lease_count = l->second.lease->NoteBegin();
    }
  }
  if (auto b = producer.Begin(); !b) return kafka::BeginFailed(b.error());
  const auto failed = [&](const Error& e) {
    return kafka::EndFailedTransaction(producer,
                                       {Kind::kAbortable, false, "producing failed: " + e.message},
                                       clock_, kAbortTimeout);
  };
  // Sections load from the store as the last committed transaction left it, never through the
  // batch's staged records (R6).
  allocator::SequenceState seq{*open.counters, [this](const std::string& space, uint64_t section) {
                                 return store_.GetSection(space, section);
                               }};
  for (const auto& m : open.batch) {
    const Decision decision = Decide(p, m, reader, seq);
    if (seq.needs_raise) {
      // The batch ends before this request: its raise commits with this transaction, and the
      // request is read again afterwards (R1), from the committed maximum.
      open.cut = m.offset;
      raise_waits_.Inc();
      break;
    }
    if (decision.segment) ++open.segments;
    if (auto sent = Produce(p, m, decision, producer, reader); !sent) return failed(sent.error());
  }
  // The raises wanted (at need, ahead of need, imports): every value computed is at or below a
  // committed maximum already, so none of them waits for these (R6).
  state::Records raises;
  {
    MutexLock lock(seq_mu_);
    const uint64_t at_need = open.counters->RaisesAtNeed();
    const uint64_t ahead = open.counters->RaisesAhead();
    raises.sections = open.counters->TakeRaises();
    raises_at_need_.Inc(open.counters->RaisesAtNeed() - at_need);
    raises_ahead_.Inc(open.counters->RaisesAhead() - ahead);
  }
  open.raises = raises.sections;
  if (auto sent = ProduceRecords(p, raises, producer, reader); !sent) return failed(sent.error());
  // The consumed position, in the state partition beside the batch's records: it commits with
  // them and the replies or not at all (I1), and a takeover restores it after the fence. (It
  // replaced send_offsets_to_transaction, whose AddOffsetsToTxn and TxnOffsetCommit were two
  // more round trips in series on every batch.)
  if (const auto next = open.NextOffset()) {
    if (auto sent = producer.Send(options_.topics.state, p, RequestsOffsetKey(p),
                                  wire::EncodeRequestsOffset(*next), {});
        !sent) {
      return failed(sent.error());
    }
  }
  // The lease record last, so that its offset is the highest this transaction delivers to state
  // partition p (OnCommitted keeps it in the store's copy with that offset).
  {
    MutexLock lock(seq_mu_);
    open.lease_record = HeldRecordFor(p, /*renewal=*/open.batch.empty());
  }
  if (open.lease_record) {
    if (auto sent = producer.Send(options_.topics.state, p, state::LeaseKey(p),
                                  state::EncodeLease(*open.lease_record), {});
        !sent) {
      return failed(sent.error());
    }
  }
  return std::nullopt;
}

void AllocatorNode::CommitAll(const std::vector<std::unique_ptr<OpenBatch>>& open) {
  // Each partition has its own producer and transaction: their commits, a round trip to a
  // transaction coordinator each, overlap rather than queue (one after another they filled the
  // loop's time under load: docs/benchmarks.md). Nothing else runs meanwhile, and each commit
  // touches its own producer only.
  const auto commit = [this](OpenBatch& batch) {
    const int64_t start = clock_.MonotonicNs();
    // R2: the anchor a commit may set is read just before its first commit call, so a commit
    // that returns late renews from a reading that is already old. (No reading: it renews
    // nothing, the safe side.)
    if (batch.lease_count) {
      auto reading = allocator::TakeReading(LeaseClocks());
      if (reading) batch.before_commit = *reading;
    }
    // Half the transaction timeout, as the ids producer: a commit still unanswered by then is
    // settled by the next owner's init_transactions before the coordinator would expire it.
    // A release's is bounded by 1 s (R5): the rebalance or the stop waits for it.
    batch.end = batch.release ? kafka::CommitTransaction(*batch.producer, clock_, kReleaseTimeout,
                                                         kReleaseTimeout)
                              : kafka::CommitTransaction(*batch.producer, clock_,
                                                         options_.txn_timeout / 2, kAbortTimeout);
    if (batch.end->outcome == kafka::TxnOutcome::kCommitted) {
      commit_latency_.Observe(static_cast<double>(clock_.MonotonicNs() - start) / 1e9);
    }
  };
  std::vector<OpenBatch*> ready;
  for (const auto& batch : open) {
    if (!batch->end) ready.push_back(batch.get());
  }
  if (ready.empty()) return;
  std::vector<std::future<void>> others;
  for (size_t i = 1; i < ready.size(); ++i) {
    try {
      others.push_back(std::async(std::launch::async, commit, std::ref(*ready[i])));
    } catch (const std::system_error& e) {  // no thread to be had: commit it here
      spdlog::debug("[allocator] partition {}: committing on the loop thread: {}", ready[i]->p,
                    e.what());
      commit(*ready[i]);
    }
  }
  commit(*ready[0]);
  for (auto& other : others) other.get();  // each bounded: CommitTransaction's timeouts
}

void AllocatorNode::EndAll(const std::vector<std::unique_ptr<OpenBatch>>& open) {
  // Every batch's raises are settled before any handler runs: a handler may release a partition,
  // and its counters with it. Only a committed raise moves a committed maximum (R6); one whose
  // outcome is unknown is never used (the retake restores what committed).
  // R2's count of the transaction's own deliveries, read before the lock: reading it serves the
  // producer's callbacks, a Kafka call the sequence lock must not cover.
  for (const auto& batch : open) {
    if (batch->lease_count) batch->delivered = batch->producer->DeliveredInTransaction() > 0;
  }
  {
    MutexLock lock(seq_mu_);
    for (const auto& batch : open) {
      transactions_[static_cast<size_t>(batch->end->outcome)]->Inc();
      const bool committed = batch->end->outcome == kafka::TxnOutcome::kCommitted;
      if (batch->counters != nullptr) batch->counters->Settle(batch->raises, committed);
      // R2, under p's lock: whether this commit began or renewed p's lease. Only p's current
      // producer's commits count (a released partition has no lease state any more).
      auto l = leases_.find(batch->p);
      if (l == leases_.end() || !batch->lease_count || serving_.find(batch->p) == serving_.end() ||
          serving_[batch->p].get() != batch->producer) {
        continue;
      }
      HeldLease& h = l->second;
      const bool carried_held =
          batch->lease_record && batch->lease_record->state == state::LeaseState::kHeld;
      const auto effect = h.lease->OnCommitEnded(*batch->lease_count, batch->before_commit,
                                                 committed, batch->delivered, carried_held);
      if (committed && carried_held && batch->lease_record->waited) h.waited_written = true;
      if (effect == allocator::PartitionLease::Effect::kNone) {
        h.next_try_ns = clock_.MonotonicNs() + kLeaseRetryNs;
        continue;
      }
      if (effect == allocator::PartitionLease::Effect::kBegan) {
        spdlog::info("[allocator] partition {}: sequence lease of generation {} held", batch->p,
                     h.lease->generation());
      }
      h.expired = false;
      h.wall_back_counted = false;  // a new anchor
      (batch->batch.empty() ? MetricsOf(batch->p).renewals_by_record
                            : MetricsOf(batch->p).renewals_by_transaction)
          .Inc();
    }
  }
  for (const auto& batch : open) {
    const int32_t p = batch->p;
    if (auto it = serving_.find(p); it == serving_.end() || it->second.get() != batch->producer) {
      // Released by the handler of another partition of this round: what committed is in the
      // state topic, and the next takeover restores it from there.
      continue;
    }
    const kafka::TxnEnd& end = *batch->end;
    switch (end.outcome) {
      case kafka::TxnOutcome::kCommitted:
        OnCommitted(p, batch->NextOffset(), *batch->producer, batch->reader, batch->segments,
                    batch->lease_record);
        // The requests after the cut are read again, from the request that waited for the raise.
        if (batch->cut && serving_.contains(p)) Rewind(p, *batch->cut);
        break;
      case kafka::TxnOutcome::kAborted:
        if (batch->batch.empty()) {  // lease records only: tried again at a later turn
          spdlog::warn("[allocator] partition {}: lease record's transaction aborted: {}", p,
                       end.error.message);
          break;
        }
        OnAborted(p, batch->batch.front().offset, end.error);
        break;
      case kafka::TxnOutcome::kUnknown:
        OnUnknown(p, end.error);
        break;
      case kafka::TxnOutcome::kFatal:
        OnFatal(p, end.error);
        break;
    }
  }
}

AllocatorNode::Decision AllocatorNode::Decide(int32_t p, const kafka::Message& m,
                                              BatchReader& reader, allocator::SequenceState& seq) {
  auto envelope =
      m.value
          ? wire::DecodeRequest(*m.value)
          : Result<wire::Envelope>(std::unexpected(Error{Code::kInvalidArgument, "empty request"}));
  if (!envelope) return Decision{{}, wire::EncodeError(envelope.error())};
  if (auto route =
          CheckRoute(envelope->request, envelope->partitions, p, options_.topics.partitions);
      !route) {
    spdlog::error("[allocator] partition {} offset {}: {}", p, m.offset, route.error().message);
    return Decision{{}, wire::EncodeError(route.error())};
  }
  return std::visit(
      [&]<typename Op>(const Op& op) {
        if constexpr (allocator::kNeedsCounters<Op>) {
          // p's counters and lease are shared with the owner hop's callers.
          MutexLock lock(seq_mu_);
          // A sequence call: p wants a lease (R3), during its takeover wait too.
          if (auto l = leases_.find(p); l != leases_.end()) {
            l->second.last_call_ns = clock_.MonotonicNs();
          }
          if (auto refused = SequenceRefusal(p)) {
            return Decision{{}, wire::EncodeError(*refused)};
          }
          auto outcome = allocator::Execute(op, reader, options_.rules, clock_.NowMs(), seq);
          auto l = leases_.find(p);
          return Decision{std::move(outcome.effects), wire::EncodeReply(outcome.result), false,
                          l != leases_.end() ? l->second.lease->generation() : 0};
        } else {
          auto outcome = allocator::Execute(op, reader, options_.rules, clock_.NowMs());
          const bool segment =
              std::is_same_v<Op, allocator::op::Allocate> && outcome.result.has_value();
          return Decision{std::move(outcome.effects), wire::EncodeReply(outcome.result), segment};
        }
      },
      envelope->request);
}

Result<void> AllocatorNode::ProduceRecords(int32_t p, const state::Records& records,
                                           kafka::TxnProducer& producer, BatchReader& reader) {
  return state::ForEachRecord(records, [&](const auto& r) {
    reader.Stage(r);
    return producer.Send(options_.topics.state, p, state::KeyOf(r), state::Encode(r), {});
  });
}

Result<void> AllocatorNode::Produce(int32_t p, const kafka::Message& m, const Decision& decision,
                                    kafka::TxnProducer& producer, BatchReader& reader) {
  const auto& topics = options_.topics;
  if (auto sent = ProduceRecords(p, decision.effects, producer, reader); !sent) return sent;
  const std::string* correlation = m.header(kCorrelationHeader);
  const std::string* reply_to = m.header(kReplyPartitionHeader);
  const int reply_partition = reply_to ? std::atoi(reply_to->c_str()) : -1;
  if (correlation == nullptr || reply_partition < 0 || reply_partition >= topics.reply_partitions) {
    spdlog::warn("[allocator] partition {} offset {}: request without a valid reply address", p,
                 m.offset);
    return {};
  }
  if (decision.generation) {
    std::string address;
    {
      MutexLock lock(seq_mu_);
      address = hop_address_;
    }
    return producer.Send(topics.replies, reply_partition, m.key, decision.reply,
                         {{kCorrelationHeader, *correlation},
                          {kOwnerRouteHeader, EncodeOwnerRoute({*decision.generation, address})}});
  }
  return producer.Send(topics.replies, reply_partition, m.key, decision.reply,
                       {{kCorrelationHeader, *correlation}});
}

void AllocatorNode::OnCommitted(int32_t p, std::optional<int64_t> next_offset,
                                kafka::TxnProducer& producer, BatchReader& reader, int64_t segments,
                                const std::optional<state::LeaseRecord>& lease) {
  if (segments > 0) SegmentsAllocated(p).Inc(static_cast<uint64_t>(segments));
  if (next_offset) {
    floor_[p] = *next_offset;
    // The group's offset follows for the operators' lag view (consumer-groups --describe), never
    // ahead of a commit; nothing waits for it (the state topic holds the position that counts).
    if (auto c = consumer_->StartCommit({{options_.topics.requests, p, *next_offset}}); !c) {
      spdlog::debug("[allocator] partition {}: group offset commit: {}", p, c.error().message);
    }
  }
  // Only now may the local view follow.
  state::Store::Batch staged = reader.Staged();
  if (next_offset) staged.values.emplace_back(RequestsOffsetKey(p), *next_offset);
  auto delivered = producer.TakeDeliveredOffsets();
  if (auto d = delivered.find({options_.topics.state, p}); d != delivered.end()) {
    staged.values.emplace_back(AppliedOffsetKey(p), d->second + 1);
    // The copy takes this transaction's lease record, committed, at its offset (the last this
    // transaction delivered to p), and is complete up to the new applied offset (R3), if it was
    // complete up to the old one.
    if (lease_copy_complete_[p]) {
      std::optional<allocator::FoundLease> kept;
      if (lease) {
        if (auto text = store_.GetText(LeaseCopyKey(p)); text && *text) {
          if (auto copy = DecodeLeaseCopy(**text)) kept = *copy;
        }
      }
      KeepLeaseCopy(staged, p, kept,
                    lease ? std::optional<allocator::FoundLease>(
                                allocator::FoundLease{*lease, d->second, lease->lease_ms})
                          : std::nullopt,
                    d->second + 1);
    }
  }
  if (auto w = store_.Write(staged, /*sync=*/false); !w) {
    // The records are durable in Kafka; taking p over again restores them from the state topic.
    spdlog::error("[allocator] partition {}: local store write failed: {}", p, w.error().message);
    Retake(p, "local store failure");
  }
}

void AllocatorNode::OnAborted(int32_t p, int64_t first_offset, const kafka::TxnError& why) {
  // Nothing of the batch is visible: its requests are read and answered again.
  spdlog::warn("[allocator] partition {}: transaction aborted: {}", p, why.message);
  Rewind(p, first_offset);
}

void AllocatorNode::OnUnknown(int32_t p, const kafka::TxnError& why) {
  // The batch may still commit: only a new producer's init_transactions settles it, and the
  // restore after it reads what was committed; the group's committed offset says where to resume.
  Retake(p, "transaction outcome unknown: " + why.message);
}

void AllocatorNode::OnFatal(int32_t p, const kafka::TxnError& why) {
  if (why.fenced) fenced_.Inc();
  if (why.fenced && !StillAssigned(p)) {
    Release(p, "fenced (another allocator owns it now): " + why.message);
    return;
  }
  // Still ours by the group's word (a fencing by an owner acting on a stale assignment, or a
  // broken producer): take it over again with a new producer, whose init_transactions fences the
  // other one.
  Retake(p, std::string(why.fenced ? "fenced" : "fatal error") + ": " + why.message);
}

allocator::LeaseClockSource& AllocatorNode::LeaseClocks() const {
  return options_.lease_clocks != nullptr ? *options_.lease_clocks : allocator::KernelLeaseClocks();
}

std::optional<Error> AllocatorNode::SequenceRefusal(int32_t p, bool count) {
  auto it = sequence_waits_.find(p);
  if (it == sequence_waits_.end()) return std::nullopt;
  PartitionMetrics& m = MetricsOf(p);
  if (!it->second.refused_for_good.empty()) {
    if (count) m.waiting_refusals.Inc();
    return Error{Code::kUnavailable,
                 "partition " + std::to_string(p) +
                     " serves no sequence call: a committed lease "
                     "record of its state partition goes back (" +
                     it->second.refused_for_good +
                     "); only kleaf's allocators may write lease records (docs/operations.md, "
                     "\"Sequence takeover waits\")"};
  }
  auto now = allocator::TakeReading(LeaseClocks());
  int64_t elapsed = 0;
  if (now) elapsed = allocator::WaitElapsedNs(it->second.from, *now);
  if (now && elapsed >= it->second.wait_ns) {
    spdlog::debug("[allocator] partition {}: takeover wait over after {} ms", p,
                  elapsed / 1'000'000);
    m.takeover_waiting.Set(0);
    sequence_waits_.erase(it);
    return std::nullopt;
  }
  if (count) m.waiting_refusals.Inc();
  return Error{
      Code::kUnavailable,
      now ? "partition " + std::to_string(p) + " waits out its previous owner's sequence lease: " +
                std::to_string((it->second.wait_ns - elapsed + 999'999) / 1'000'000) + " ms left"
          : "partition " + std::to_string(p) + ": " + now.error().message};
}

allocator::SequenceCounters& AllocatorNode::CountersOf(int32_t p) {
  auto& counters = counters_[p];
  if (counters == nullptr) {
    counters = std::make_unique<allocator::SequenceCounters>(options_.rules.spaces.raise_ahead);
  }
  return *counters;
}

bool AllocatorNode::DropAtClockEvent(int32_t p, HeldLease& h, const allocator::LeaseReading& now) {
  const auto events = h.lease->EventsSinceAnchor(now);
  // Counted once per anchor: a step back ends nothing, and the anchor moves on with the next
  // renewal; a forward step or a suspend drops the lease, whose next anchor comes after it.
  if (events.wall_forward) ClockEventsCounter("wall_forward").Inc();
  if (events.wall_back && !h.wall_back_counted) {
    h.wall_back_counted = true;
    ClockEventsCounter("wall_back").Inc();
  }
  if (events.suspend) ClockEventsCounter("suspend").Inc();
  if (!events.EndsLease()) return false;
  h.lease->Mark();
  spdlog::warn(
      "[allocator] partition {}: sequence lease dropped: the clocks {} since it was renewed; a "
      "`held` record commits it again",
      p, events.suspend ? "saw a suspend" : "stepped forward");
  return true;
}

state::LeaseRecord AllocatorNode::LeaseRecordOf(int32_t p, state::LeaseState st) {
  const HeldLease& h = leases_.at(p);
  const bool wait_over = !sequence_waits_.contains(p);
  return state::LeaseRecord{h.lease->generation(),
                            holder_,
                            options_.node_name,
                            allocator::RecordLeaseMs(options_.lease.lease_ms, h.wait, wait_over),
                            wait_over,
                            st};
}

std::optional<state::LeaseRecord> AllocatorNode::HeldRecordFor(int32_t p, bool renewal) {
  auto l = leases_.find(p);
  if (l == leases_.end() || l->second.last_call_ns < 0) return std::nullopt;
  // The group check: no lease begins or is renewed while it does not find every member waiting.
  if (LeaseBlocked()) return std::nullopt;
  const HeldLease& h = l->second;
  const bool wait_over = !sequence_waits_.contains(p);
  if (!renewal && h.lease->Held() && (h.waited_written || !wait_over)) return std::nullopt;
  return LeaseRecordOf(p, state::LeaseState::kHeld);
}

void AllocatorNode::TendLeases() {
  if (options_.lease.lease_ms == 0) return;
  std::vector<int32_t> idle;
  std::map<int32_t, std::vector<kafka::Message>> renew;
  // The group check: while it blocks leases, those held are dropped and none is renewed (sequence
  // calls are answered with a commit per batch, as with L 0).
  const auto blocked = LeaseBlocked();  // SeqWaitCheck logs why
  {
    MutexLock lock(seq_mu_);
    auto now = allocator::TakeReading(LeaseClocks());
    const int64_t mono = clock_.MonotonicNs();
    for (auto& [p, h] : leases_) {
      PartitionMetrics& m = MetricsOf(p);
      if (!now) {
        // R1 could not compute a value without a reading either: the safe side is no lease.
        if (h.lease->Mark()) {
          spdlog::warn("[allocator] partition {}: sequence lease dropped: {}", p,
                       now.error().message);
        }
      } else {
        // R9 first: a dropped lease has nothing to expire.
        if (!DropAtClockEvent(p, h, *now) &&
            h.lease->Check(*now, options_.lease) == allocator::PartitionLease::Verdict::kExpired) {
          if (!h.expired) {
            h.expired = true;
            m.lease_expiries.Inc();
            spdlog::warn(
                "[allocator] partition {}: sequence lease ran out before a renewal "
                "committed",
                p);
          }
        }
      }
      if (blocked && h.lease->Mark()) {
        spdlog::warn("[allocator] partition {}: sequence lease dropped: {}", p, *blocked);
      }
      const auto age = now ? h.lease->AgeNs(*now) : std::nullopt;
      m.lease_held.Set(age ? 1 : 0);
      m.lease_age_seconds.Set(age ? static_cast<double>(*age) / 1e9 : 0);
      if (h.last_call_ns < 0 || !now || blocked) continue;
      if (options_.idle_release_ms > 0 &&
          mono - h.last_call_ns >= options_.idle_release_ms * 1'000'000) {
        idle.push_back(p);
        continue;
      }
      if (mono < h.next_try_ns) continue;
      // Owner-hop requests waiting for a raise: the raise goes into a transaction of p now.
      if (!age || *age >= options_.lease_renew_ms * 1'000'000 || hop_raise_waits_.contains(p)) {
        renew[p] = {};
      }
    }
  }
  if (!idle.empty()) ReleaseLeases(idle, "idle");
  // Lease-only transactions (and the raises wanted meanwhile), committed as a round of batches.
  if (!renew.empty()) ProcessBatches(std::move(renew));
}

void AllocatorNode::ReleaseLeases(const std::vector<int32_t>& partitions, const char* reason) {
  std::vector<std::unique_ptr<OpenBatch>> open;
  for (int32_t p : partitions) {
    auto producer = serving_.find(p);
    if (producer == serving_.end()) continue;
    std::optional<state::LeaseRecord> released;
    {
      MutexLock lock(seq_mu_);
      auto l = leases_.find(p);
      if (l == leases_.end()) continue;
      HeldLease& h = l->second;
      // Step 1: marked unserved under p's lock. No transaction is open or in flight here (the
      // loop thread runs every round to its end), so step 2 has nothing to wait for.
      h.lease->Mark();
      const bool wanted = h.last_call_ns >= 0;
      h.last_call_ns = -1;  // no `held` record until the next sequence call
      MetricsOf(p).lease_held.Set(0);
      MetricsOf(p).lease_age_seconds.Set(0);
      // Nothing committed since the last release, or no sequence call since the takeover.
      if (!wanted) continue;
      // Step 3: a `released` record only from an owner whose wait ended and that held a lease.
      if (!h.lease->HeldCommitted() || sequence_waits_.contains(p)) {
        ReleasesCounter(p, reason, "not_written").Inc();
        continue;
      }
      released = LeaseRecordOf(p, state::LeaseState::kReleased);
    }
    auto batch = std::make_unique<OpenBatch>(store_, options_.topics, p);
    batch->producer = producer->second.get();
    batch->release = true;
    batch->lease_record = std::move(released);
    if (auto b = batch->producer->Begin(); !b) {
      batch->end = kafka::BeginFailed(b.error());
    } else if (auto sent = batch->producer->Send(options_.topics.state, p, state::LeaseKey(p),
                                                 state::EncodeLease(*batch->lease_record), {});
               !sent) {
      batch->end = kafka::EndFailedTransaction(
          *batch->producer, {Kind::kAbortable, false, "producing failed: " + sent.error().message},
          clock_, kReleaseTimeout);
    }
    open.push_back(std::move(batch));
  }
  if (open.empty()) return;
  CommitAll(open);
  for (const auto& batch : open) {
    const int32_t p = batch->p;
    transactions_[static_cast<size_t>(batch->end->outcome)]->Inc();
    if (batch->end->outcome != kafka::TxnOutcome::kCommitted) {
      // The next owner waits in full; an unknown outcome is a record like any other (R5).
      spdlog::warn("[allocator] partition {}: releasing its sequence lease ({}) failed: {}", p,
                   reason, batch->end->error.message);
      ReleasesCounter(p, reason, "failed").Inc();
      // A revocation and a stop let p go next anyway. After an idle release p stays owned: an
      // unknown outcome or a broken producer ends that ownership as any transaction's does (R7).
      if (std::string_view(reason) == "idle" && serving_.contains(p)) {
        if (batch->end->outcome == kafka::TxnOutcome::kUnknown) OnUnknown(p, batch->end->error);
        if (batch->end->outcome == kafka::TxnOutcome::kFatal) OnFatal(p, batch->end->error);
      }
      continue;
    }
    ReleasesCounter(p, reason, "committed").Inc();
    spdlog::info("[allocator] partition {}: sequence lease of generation {} released ({})", p,
                 batch->lease_record->generation, reason);
    OnCommitted(p, std::nullopt, *batch->producer, batch->reader, 0, batch->lease_record);
  }
}

void AllocatorNode::SetHopAddress(std::string address) {
  MutexLock lock(seq_mu_);
  hop_address_ = std::move(address);
}

void AllocatorNode::SubmitHop(int32_t p, std::string request, HopDone done) {
  // Decoded and routed before p's lock: the lock covers the reading and the counters only.
  const auto refuse = [&](const Error& why, uint64_t generation) {
    done(HopRefusal(why, generation));
  };
  auto envelope = wire::DecodeRequest(request);
  if (!envelope) return refuse(envelope.error(), 0);
  if (p < 0 || p >= options_.topics.partitions) {
    return refuse(Error{Code::kUnavailable,
                        "partition " + std::to_string(p) + " is not a partition of this cluster"},
                  0);
  }
  if (auto route =
          CheckRoute(envelope->request, envelope->partitions, p, options_.topics.partitions);
      !route) {
    return refuse(route.error(), 0);
  }
  if (!std::holds_alternative<allocator::op::NextSeq>(envelope->request) &&
      !std::holds_alternative<allocator::op::CurrentSeq>(envelope->request)) {
    return refuse(Error{Code::kInvalidArgument,
                        "the owner hop answers next and current only; send the rest through the "
                        "requests topic"},
                  0);
  }
  HopRequest r{p, std::move(envelope->request), std::move(done), 0};
  std::optional<HopAnswer> answer;
  {
    MutexLock lock(seq_mu_);
    answer = AnswerHop(r);
    if (!answer) {
      // Its values need a raise first: the loop commits it at its next turn (TendLeases), and
      // answers the call after that commit (ServeHop). (Wake takes no lock of the node's.)
      r.since_ns = clock_.MonotonicNs();
      hop_raise_waits_[p].push_back(std::move(r));
      if (consumer_ != nullptr) consumer_->Wake();
      return;
    }
  }
  r.done(std::move(*answer));
}

void AllocatorNode::ServeHop() {
  std::vector<HopRequest> waiting;
  std::vector<std::pair<HopRequest, HopAnswer>> answered;
  {
    MutexLock lock(seq_mu_);
    if (hop_raise_waits_.empty()) return;
    for (auto& [p, list] : hop_raise_waits_) {
      for (auto& r : list) waiting.push_back(std::move(r));
    }
    hop_raise_waits_.clear();
    const int64_t now = clock_.MonotonicNs();
    for (auto& r : waiting) {
      if (now - r.since_ns > options_.txn_timeout.count() * 1'000'000) {
        const Error why{Code::kUnavailable,
                        "partition " + std::to_string(r.p) +
                            ": no raise of a section maximum committed in time"};
        answered.emplace_back(std::move(r), HopRefusal(why));
        continue;
      }
      if (auto a = AnswerHop(r)) {
        answered.emplace_back(std::move(r), std::move(*a));
      } else {
        hop_raise_waits_[r.p].push_back(std::move(r));
      }
    }
  }
  for (auto& [r, a] : answered) r.done(std::move(a));
}

std::optional<AllocatorNode::HopAnswer> AllocatorNode::AnswerHop(const HopRequest& r) {
  const int32_t p = r.p;
  // Named only in a refusal (an answer is the hot path).
  const auto part = [p] { return "partition " + std::to_string(p); };
  const auto refused = [](const Error& why, uint64_t generation) {
    return HopRefusal(why, generation);
  };
  if (!hop_served_.contains(p))
    return refused({Code::kUnavailable, part() + " is not served here"}, 0);
  auto l = leases_.find(p);
  if (l == leases_.end()) {
    return refused({Code::kUnavailable,
                    part() + ": this allocator holds no sequence lease (sequence.lease_ms 0)"},
                   0);
  }
  HeldLease& h = l->second;
  const uint64_t generation = h.lease->generation();
  h.last_call_ns = clock_.MonotonicNs();  // p wants a lease (R3)
  // R1 (i): the takeover wait is over.
  if (auto waiting = SequenceRefusal(p)) return refused(*waiting, generation);
  // R1 (i) to (iii), from a reading taken now, after the request was read, inside p's critical
  // section (the sequence lock), which the counters' update below is in too.
  auto reading = allocator::TakeReading(LeaseClocks());
  if (!reading)
    return refused({Code::kUnavailable, part() + ": " + reading.error().message}, generation);
  switch (h.lease->Check(*reading, options_.lease)) {
    case allocator::PartitionLease::Verdict::kHeld:
      // The group check or the drift check turned against leases since the watch last looked.
      if (!LeaseAllowed()) {
        h.lease->Mark();
        return refused(
            {Code::kUnavailable, part() + ": no sequence lease is held: " +
                                     LeaseBlocked().value_or("the lease checks changed") +
                                     "; use the requests topic"},
            generation);
      }
      break;
    case allocator::PartitionLease::Verdict::kNoLease:
      if (auto blocked = LeaseBlocked()) {
        return refused({Code::kUnavailable, part() + ": no sequence lease is held: " + *blocked +
                                                "; use the requests topic"},
                       generation);
      }
      return refused({Code::kUnavailable, part() + ": no sequence lease held yet (one is being "
                                                   "taken); try again or use the requests topic"},
                     generation);
    case allocator::PartitionLease::Verdict::kExpired:
      return refused({Code::kUnavailable,
                      part() + ": the sequence lease ran out (no renewal committed in time)"},
                     generation);
    case allocator::PartitionLease::Verdict::kClockEvent:
      DropAtClockEvent(p, h, *reading);  // R9, seen by this call's reading first
      return refused(
          {Code::kUnavailable, part() + ": the sequence lease ended at a clock step or a suspend"},
          generation);
  }
  // R1 (iv) and the counters' update: the same Execute and counters as the requests topic's.
  BatchReader reader(store_, options_.topics, p);
  allocator::SequenceState seq{CountersOf(p), [this](const std::string& space, uint64_t section) {
                                 return store_.GetSection(space, section);
                               }};
  std::optional<HopAnswer> answer;
  std::visit(
      [&]<typename Op>(const Op& op) {
        if constexpr (std::is_same_v<Op, allocator::op::NextSeq> ||
                      std::is_same_v<Op, allocator::op::CurrentSeq>) {
          auto outcome = allocator::Execute(op, reader, options_.rules, clock_.NowMs(), seq);
          if (seq.needs_raise) return;
          answer = HopAnswer{outcome.result ? 200 : HttpStatus(outcome.result.error().code),
                             wire::EncodeReply(outcome.result), generation};
        }
      },
      r.request);
  return answer;  // none: waits for a raise
}

void AllocatorNode::Retake(int32_t p, const std::string& why) {
  Release(p, why);
  pending_.insert(p);
  retry_at_ns_[p] = clock_.MonotonicNs() + 1'000'000'000;
}

}  // namespace kleaf::cluster
