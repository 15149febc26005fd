#include "snowflake/worker_lease.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "base/await.h"

namespace kleaf::snowflake {
namespace {

constexpr char kNoAnswer[] = "no answer from the worker registry";

}  // namespace

using allocator::WorkerLeaseInfo;
using std::chrono::milliseconds;

WorkerLease::WorkerLease(allocator::WorkerRegistry& registry, Clock& clock, Options options,
                         LoadCache load, SaveCache save)
    : registry_(registry),
      clock_(clock),
      options_(std::move(options)),
      load_(std::move(load)),
      save_(std::move(save)),
      cache_write_failures_(metrics::Registry::Default().GetCounter(
          "kleaf_worker_cache_write_failures_total",
          "Writes of this node's worker lease to its local store that failed.")) {}

bool WorkerLease::SaveCached(const Cached& cached) {
  auto saved = save_(cached);
  if (saved) return true;
  cache_write_failures_.Inc();
  spdlog::warn("[lease] saving the lease of worker id {} (until {}) in the local store failed: {}",
               cached.worker_id, cached.lease_until_ms, saved.error().message);
  return false;
}

WorkerLease::~WorkerLease() { Stop(); }

void WorkerLease::ExtendTo(int64_t sent_mono_ns, int64_t lease_until_ms) {
  // The allocator set lease_until from its clock when it handled the request, no earlier than we
  // sent it: counting the TTL from the send time is on the safe side.
  const int64_t deadline =
      sent_mono_ns + (options_.lease_ttl_ms - options_.safety_margin_ms) * 1'000'000;
  deadline_ns_.store(deadline);
  lease_until_ms_.store(lease_until_ms);
  if (generator_ != nullptr) {
    generator_->SetLeaseEndMs(lease_until_ms);
    generator_->SetLeaseDeadlineNs(deadline);
  }
  // On a failure the store keeps an older lease, which ends earlier: a restart reuses less of it.
  SaveCached({worker_id_, lease_until_ms});
}

void WorkerLease::RecordOffset(int64_t sent_ms, const allocator::WorkerLeaseInfo& lease) {
  if (lease.allocator_now_ms <= 0) return;
  const int64_t received_ms = clock_.NowMs();
  MutexLock lock(mu_);
  offsets_.push_back({lease.allocator_now_ms - (sent_ms + received_ms) / 2,
                      std::max<int64_t>(0, received_ms - sent_ms)});
  if (offsets_.size() > kOffsetSamples) offsets_.pop_front();
}

Result<WorkerLease::Grant> WorkerLease::Acquire() {
  const int64_t give_up = clock_.MonotonicNs() + options_.claim_timeout_ms * 1'000'000;
  Error last{Code::kUnavailable, kNoAnswer};
  while (clock_.MonotonicNs() < give_up) {
    const int64_t sent = clock_.MonotonicNs();
    const int64_t sent_ms = clock_.NowMs();
    auto reply = Await<WorkerLeaseInfo>(milliseconds(5000), kNoAnswer, [&](auto done) {
      registry_.ClaimWorker({.claimant = claimant(), .node_now_ms = sent_ms}, std::move(done));
    });
    if (reply) {
      RecordOffset(sent_ms, *reply);
      worker_id_ = reply->worker_id;
      ExtendTo(sent, reply->lease_until_ms);
      if (!reply->notice.empty()) spdlog::warn("[lease] {}", reply->notice);
      if (reply->not_before_ms > 0) {
        // A recycled id: the last timestamp its previous holders reported, which IDs must pass.
        spdlog::info("[lease] claimed worker id {} (not before {})", worker_id_,
                     FormatUtcMs(reply->not_before_ms));
      } else {
        spdlog::info("[lease] claimed worker id {} (no earlier timestamp to pass)", worker_id_);
      }
      return Grant{worker_id_, reply->not_before_ms, false};
    }
    if (reply.error().code == Code::kFailedPrecondition) {
      // Clock check failed. A request that waited in a queue (e.g. while the allocators start)
      // makes a good clock look behind, so ask again with a fresh reading until the deadline.
      last = reply.error();
      spdlog::warn("[lease] {}", last.message);
      clock_.SleepFor(milliseconds(500));
      continue;
    }
    if (reply.error().code != Code::kUnavailable) return std::unexpected(reply.error());
    last = reply.error();
    // No allocator answers: a still valid cached lease lets this node go on (weak dependency).
    if (auto cached = load_()) {
      const int64_t left_ms = cached->lease_until_ms - clock_.NowMs() - options_.safety_margin_ms;
      if (left_ms > 0) {
        worker_id_ = cached->worker_id;
        const int64_t deadline = clock_.MonotonicNs() + left_ms * 1'000'000;
        deadline_ns_.store(deadline);
        lease_until_ms_.store(cached->lease_until_ms);
        spdlog::warn("[lease] registry unreachable ({}); reusing cached worker id {} for {} ms",
                     last.message, worker_id_, left_ms);
        return Grant{worker_id_, 0, true};
      }
    }
    clock_.SleepFor(milliseconds(500));
  }
  return Fail(last.code == Code::kFailedPrecondition ? last.code : Code::kUnavailable,
              "cannot claim a snowflake worker id: " + last.message);
}

void WorkerLease::Start(SnowflakeGenerator& generator) {
  generator_ = &generator;
  generator.SetLeaseEndMs(lease_until_ms_.load());
  generator.SetLeaseDeadlineNs(deadline_ns_.load());
  // One renewal: the lease extended, or issuing stopped for good when the id is someone else's.
  auto renew = [this] {
    const int64_t sent = clock_.MonotonicNs();
    const int64_t sent_ms = clock_.NowMs();
    // The start of the newest tick: a later holder's floor excludes that whole tick, and with time
    // units of a second or more the tick's end would read as a clock running ahead.
    auto reply =
        Await<WorkerLeaseInfo>(milliseconds(options_.renew_interval_ms), kNoAnswer, [&](auto done) {
          registry_.RenewWorker({.claimant = claimant(),
                                 .worker_id = worker_id_,
                                 .node_now_ms = sent_ms,
                                 .last_timestamp_ms = generator_->last_tick_ms()},
                                std::move(done));
        });
    std::string error;
    if (reply) {
      RecordOffset(sent_ms, *reply);
      ExtendTo(sent, reply->lease_until_ms);
    } else {
      error = reply.error().message;
      if (reply.error().code == Code::kFailedPrecondition) {
        // Someone else holds the id now: stop issuing for good.
        deadline_ns_.store(0);
        generator_->SetLeaseDeadlineNs(0);
        spdlog::error("[lease] lost worker id {}: {}", worker_id_, error);
      } else {
        spdlog::warn("[lease] renewing worker id {} failed: {}", worker_id_, error);
      }
    }
    MutexLock lock(mu_);
    last_error_ = error;
  };
  renewal_.Start(milliseconds(options_.renew_interval_ms), PeriodicTask::FirstRun::kAfterInterval,
                 std::move(renew));
}

void WorkerLease::Stop() {
  if (!renewal_.Stop()) return;  // never started, or stopped already
  if (worker_id_ < 0 || generator_ == nullptr) return;
  generator_->SetLeaseDeadlineNs(0);  // nothing more is issued with this id
  // Forget the lease locally first: once the release may have landed, a restart while Kafka is
  // unreachable must not go on with an id that could be someone else's. When the store cannot
  // forget it, the id is kept (not released) until the lease expires by itself, so the lease a
  // restart may reuse is still this node's.
  if (!SaveCached({worker_id_, 0})) {
    spdlog::error("[lease] not releasing worker id {}: it expires by itself", worker_id_);
    return;
  }
  auto reply = Await<WorkerLeaseInfo>(milliseconds(3000), kNoAnswer, [&](auto done) {
    registry_.ReleaseWorker({.claimant = claimant(),
                             .worker_id = worker_id_,
                             .node_now_ms = clock_.NowMs(),
                             .last_timestamp_ms = generator_->last_tick_ms()},
                            std::move(done));
  });
  if (reply) {
    spdlog::info("[lease] released worker id {}", worker_id_);
  } else {
    spdlog::warn("[lease] could not release worker id {}: {} (it expires by itself)", worker_id_,
                 reply.error().message);
  }
}

WorkerLease::Status WorkerLease::status() const {
  Status s;
  s.worker_id = worker_id_;
  s.valid_for_ms = std::max<int64_t>(0, (deadline_ns_.load() - clock_.MonotonicNs()) / 1'000'000);
  MutexLock lock(mu_);
  s.last_error = last_error_;
  if (!offsets_.empty()) {
    auto best = std::min_element(
        offsets_.begin(), offsets_.end(),
        [](const auto& a, const auto& b) { return a.round_trip_ms < b.round_trip_ms; });
    s.clock_offset_ms = best->offset_ms;
    s.clock_offset_error_ms = (best->round_trip_ms + 1) / 2;
  }
  return s;
}

}  // namespace kleaf::snowflake
