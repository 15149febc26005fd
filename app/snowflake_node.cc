#include "app/snowflake_node.h"

#include <string>
#include <string_view>

namespace kleaf::app {
namespace {

constexpr std::string_view kSnowflakeMark = "snowflake.high_water_ms";
constexpr std::string_view kCachedWorker = "worker.id";
constexpr std::string_view kCachedLeaseUntil = "worker.lease_until_ms";

}  // namespace

Result<std::unique_ptr<SnowflakeNode>> SnowflakeNode::Start(const config::Config& c,
                                                            state::Store& store,
                                                            allocator::Allocator& allocator,
                                                            bool use_registry, Clock& clock) {
  const auto& sf = c.snowflake;
  auto layout = gateway::SnowflakeLayout::Make(sf.timestamp_bits, sf.worker_bits, sf.sequence_bits,
                                               sf.epoch_ms, sf.time_unit_ms, clock.NowMs());
  if (!layout) return std::unexpected(layout.error());

  std::unique_ptr<SnowflakeNode> node(new SnowflakeNode());
  int64_t worker_id = sf.worker_id;
  int64_t not_before_ms = 0;
  if (use_registry) {
    node->lease_.emplace(
        allocator, clock,
        gateway::WorkerLease::Options{c.node.id, c.workers.lease_ttl_ms,
                                      c.workers.renew_interval_ms, c.workers.safety_margin_ms,
                                      c.workers.claim_timeout_ms},
        [&store]() -> std::optional<gateway::WorkerLease::Cached> {
          auto id = store.GetValue(kCachedWorker);
          auto until = store.GetValue(kCachedLeaseUntil);
          if (!id || !*id || !until || !*until) return std::nullopt;
          return gateway::WorkerLease::Cached{**id, **until};
        },
        [&store](const gateway::WorkerLease::Cached& cached) {
          (void)store.Write({{},
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
    worker_id = grant->worker_id;
    not_before_ms = grant->not_before_ms;
  }
  node->generator_ = std::make_unique<gateway::SnowflakeGenerator>(
      *layout,
      gateway::SnowflakeGenerator::Options{worker_id, sf.random_sequence_start, sf.max_backward_ms},
      clock);
  node->guard_ = std::make_unique<gateway::TimestampGuard>(
      *node->generator_, clock, [&store] { return store.GetValue(kSnowflakeMark); },
      [&store](int64_t ms) { return store.PutValue(kSnowflakeMark, ms); },
      gateway::TimestampGuard::Options{sf.persist_interval_ms, sf.reserve_ms,
                                       sf.max_startup_wait_ms});
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

}  // namespace kleaf::app
