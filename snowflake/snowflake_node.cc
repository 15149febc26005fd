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

// The lease options with this process's holder token and the previous process's (TakeHolderTokens).
[[nodiscard]] Result<WorkerLease::Options> LeaseOptions(WorkerLease::Options lease,
                                                        state::Store& store) {
  auto tokens = TakeHolderTokens(store);
  if (!tokens) return std::unexpected(tokens.error());
  lease.holder = tokens->first;
  lease.previous_holder = tokens->second;
  return lease;
}

// The lease cache in the local store: the last granted worker id and its lease's end.
auto CacheLoader(state::Store& store) {
  return [&store]() -> std::optional<WorkerLease::Cached> {
    auto id = store.GetValue(kCachedWorker);
    auto until = store.GetValue(kCachedLeaseUntil);
    if (!id || !*id || !until || !*until) return std::nullopt;
    return WorkerLease::Cached{**id, **until};
  };
}
auto CacheSaver(state::Store& store) {
  return [&store](const WorkerLease::Cached& cached) {
    state::Store::Batch batch;
    batch.values = {{std::string(kCachedWorker), cached.worker_id},
                    {std::string(kCachedLeaseUntil), cached.lease_until_ms}};
    return store.Write(batch, /*sync=*/true);
  };
}

// A granted worker id must fit snowflake.worker_bits and fall in this datacenter's slice: the
// registry of this datacenter's cluster hands out only its slice, so a grant outside it
// (allocators configured as another datacenter, a cached lease of another life) is refused.
[[nodiscard]] Result<void> CheckGrant(const WorkerLease::Grant& grant,
                                      const SnowflakeLayout& layout,
                                      const SnowflakeNode::Options& options) {
  if (grant.worker_id > layout.max_worker_id()) {
    return Fail(Code::kFailedPrecondition,
                "the registry granted worker id " + std::to_string(grant.worker_id) +
                    ", beyond snowflake.worker_bits; the allocators and this node disagree on "
                    "snowflake.worker_bits");
  }
  const allocator::Datacenter& dc = options.datacenter;
  if (const auto range = allocator::WorkerRangeOf(dc, options.layout.worker_bits);
      !range.Contains(grant.worker_id)) {
    return Fail(Code::kFailedPrecondition,
                "worker id " + std::to_string(grant.worker_id) +
                    (grant.from_cache ? " (this node's cached lease)" : " (granted)") +
                    " is outside the ids of " + dc.Describe() + " (" + std::to_string(range.first) +
                    " to " + std::to_string(range.last) +
                    "): another datacenter's IDs could repeat; check datacenter.index and "
                    "datacenter.count on the allocators and this node");
  }
  return {};
}

}  // namespace

Result<std::unique_ptr<SnowflakeNode>> SnowflakeNode::Start(const Options& options,
                                                            state::Store& store,
                                                            allocator::WorkerRegistry& registry,
                                                            Clock& clock) {
  const LayoutOptions& sf = options.layout;
  auto layout = SnowflakeLayout::Make(sf.timestamp_bits, sf.worker_bits, sf.sequence_bits,
                                      sf.epoch_ms, sf.time_unit_ms, clock.NowMs());
  if (!layout) return std::unexpected(layout.error());

  std::unique_ptr<SnowflakeNode> node(new SnowflakeNode());
  int64_t worker_id = options.generator.worker_id;
  int64_t not_before_ms = 0;
  if (options.lease) {
    auto lease = LeaseOptions(*options.lease, store);
    if (!lease) return std::unexpected(lease.error());
    node->lease_.emplace(registry, clock, *lease, CacheLoader(store), CacheSaver(store));
    auto grant = node->lease_->Acquire();
    if (!grant) return std::unexpected(grant.error());
    if (auto fits = CheckGrant(*grant, *layout, options); !fits) {
      return std::unexpected(fits.error());
    }
    worker_id = grant->worker_id;
    not_before_ms = grant->not_before_ms;
  }
  SnowflakeGenerator::Options generator = options.generator;
  generator.worker_id = worker_id;
  node->generator_ = std::make_unique<SnowflakeGenerator>(*layout, generator, clock);
  node->guard_ = std::make_unique<TimestampGuard>(
      *node->generator_, clock, [&store] { return store.GetValue(kSnowflakeMark); },
      [&store](int64_t ms) { return store.PutValue(kSnowflakeMark, ms); }, options.guard);
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

Result<void> CheckLayoutAt(const LayoutOptions& s, int64_t now_ms) {
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
