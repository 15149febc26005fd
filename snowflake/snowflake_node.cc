#include "snowflake/snowflake_node.h"

#include <cstdio>
#include <random>
#include <string>
#include <string_view>

namespace kleaf::snowflake {
namespace {

constexpr std::string_view kSnowflakeMark = "snowflake.high_water_ms";
constexpr std::string_view kCachedWorker = "worker.id";
constexpr std::string_view kCachedLeaseUntil = "worker.lease_until_ms";
// The token of the last process that leased a worker id with this state directory.
constexpr std::string_view kLeaseHolder = "worker.holder";

std::string HolderName(int64_t token) {
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(token));
  return text;
}

// This process's holder token, and the previous process's from the store. The store's lock proves
// that process is gone; the new token is durable before any claim is sent with it, so the next
// process can vouch for this one however it ends.
[[nodiscard]] Result<std::pair<std::string, std::string>> TakeHolderTokens(state::Store& store) {
  auto previous = store.GetValue(kLeaseHolder);
  if (!previous) return std::unexpected(previous.error());
  std::random_device random;
  int64_t token = 0;
  while (token == 0) {
    token = static_cast<int64_t>((uint64_t{random()} << 32 | random()) >> 1);
  }
  if (auto w = store.PutValue(kLeaseHolder, token); !w) return std::unexpected(w.error());
  return std::pair{HolderName(token), *previous ? HolderName(**previous) : std::string()};
}

}  // namespace

Result<std::unique_ptr<SnowflakeNode>> SnowflakeNode::Start(const config::Config& c,
                                                            state::Store& store,
                                                            allocator::Allocator& allocator,
                                                            bool use_registry, Clock& clock) {
  const auto& sf = c.snowflake;
  auto layout = SnowflakeLayout::Make(sf.timestamp_bits, sf.worker_bits, sf.sequence_bits,
                                      sf.epoch_ms, sf.time_unit_ms, clock.NowMs());
  if (!layout) return std::unexpected(layout.error());

  std::unique_ptr<SnowflakeNode> node(new SnowflakeNode());
  int64_t worker_id = sf.worker_id;
  int64_t not_before_ms = 0;
  if (use_registry) {
    auto tokens = TakeHolderTokens(store);
    if (!tokens) return std::unexpected(tokens.error());
    node->lease_.emplace(
        allocator, clock,
        WorkerLease::Options{c.node.id, tokens->first, tokens->second, c.workers.lease_ttl_ms,
                             c.workers.renew_interval_ms, c.workers.safety_margin_ms,
                             c.workers.claim_timeout_ms},
        [&store]() -> std::optional<WorkerLease::Cached> {
          auto id = store.GetValue(kCachedWorker);
          auto until = store.GetValue(kCachedLeaseUntil);
          if (!id || !*id || !until || !*until) return std::nullopt;
          return WorkerLease::Cached{**id, **until};
        },
        [&store](const WorkerLease::Cached& cached) {
          return store.Write({{},
                              {},
                              {{std::string(kCachedWorker), cached.worker_id},
                               {std::string(kCachedLeaseUntil), cached.lease_until_ms}}},
                             /*sync=*/true);
        });
    auto grant = node->lease_->Acquire();
    if (!grant) return std::unexpected(grant.error());
    if (grant->worker_id > layout->max_worker_id()) {
      return Fail(Code::kFailedPrecondition,
                  "the registry granted worker id " + std::to_string(grant->worker_id) +
                      ", beyond snowflake.worker_bits; the allocators and this node disagree on "
                      "snowflake.worker_bits");
    }
    // The registry of this datacenter's cluster hands out only its slice; a grant outside it
    // (allocators configured as another datacenter, a cached lease of another life) is refused.
    const allocator::Datacenter dc{c.datacenter.index, c.datacenter.count};
    if (const auto range = allocator::WorkerRangeOf(dc, sf.worker_bits);
        !range.Contains(grant->worker_id)) {
      return Fail(Code::kFailedPrecondition,
                  "worker id " + std::to_string(grant->worker_id) +
                      (grant->from_cache ? " (this node's cached lease)" : " (granted)") +
                      " is outside the ids of " + dc.Describe() + " (" +
                      std::to_string(range.first) + " to " + std::to_string(range.last) +
                      "): another datacenter's IDs could repeat; check datacenter.index and "
                      "datacenter.count on the allocators and this node");
    }
    worker_id = grant->worker_id;
    not_before_ms = grant->not_before_ms;
  }
  node->generator_ = std::make_unique<SnowflakeGenerator>(
      *layout, SnowflakeGenerator::Options{worker_id, sf.random_sequence_start, sf.max_backward_ms},
      clock);
  node->guard_ = std::make_unique<TimestampGuard>(
      *node->generator_, clock, [&store] { return store.GetValue(kSnowflakeMark); },
      [&store](int64_t ms) { return store.PutValue(kSnowflakeMark, ms); },
      TimestampGuard::Options{sf.persist_interval_ms, sf.reserve_ms, sf.max_startup_wait_ms});
  node->guard_->SetExternalFloorMs(not_before_ms);
  if (auto r = node->guard_->Start(); !r) return std::unexpected(r.error());
  if (node->lease_) node->lease_->Start(*node->generator_);
  return node;
}

SnowflakeNode::~SnowflakeNode() { Stop(); }

void SnowflakeNode::Stop() {
  if (stopped_) return;
  stopped_ = true;
  if (lease_) lease_->Stop();
  if (guard_) guard_->Stop();
}

Result<void> CheckLayoutAt(const config::Snowflake& s, int64_t now_ms) {
  auto layout = SnowflakeLayout::Make(s.timestamp_bits, s.worker_bits, s.sequence_bits, s.epoch_ms,
                                      s.time_unit_ms, now_ms);
  if (!layout) return Fail(Code::kInvalidArgument, "snowflake: " + layout.error().message);
  if (now_ms > layout->last_ms()) {
    return Fail(Code::kInvalidArgument,
                "snowflake.timestamp_bits: the layout's timestamp bits ran out at " +
                    FormatUtcMs(layout->last_ms()) +
                    "; configure a later snowflake.epoch_ms or more timestamp_bits");
  }
  return {};
}

}  // namespace kleaf::snowflake
