#include "cluster/allocator_client.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <random>
#include <type_traits>
#include <variant>

#include "cluster/wire.h"

namespace kleaf::cluster {
namespace {

using std::chrono::milliseconds;
namespace op = allocator::op;
using allocator::Callback;

// No reply at all for this long while attempts time out: the reply reader is replaced. Beyond one
// request's 3 attempts of 2 s, and below the 30 s after which /readyz calls the allocators gone; a
// leader move of a dead broker's partitions takes 9-13 s, so one heal may come during it (harmless:
// the new reader starts at the end, and what it skips is asked again).
constexpr int64_t kReplyStallNs = 10'000'000'000;

std::string Nonce() {
  std::random_device rd;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < 8; ++i) s += kHex[rd() % 16];
  return s;
}

}  // namespace

KafkaAllocatorClient::KafkaAllocatorClient(KafkaClientOptions options, Clock& clock)
    : options_(std::move(options)),
      clock_(clock),
      id_prefix_(options_.node_id + "-" + Nonce() + "-") {
  auto& registry = metrics::Registry::Default();
  for (int op = 0; op < allocator::kOpCount; ++op) {
    latency_[op] = &registry.GetHistogram(
        "kleaf_kafka_request_seconds",
        "Round trip of a request to the allocators over Kafka, from sending to the reply.",
        {{"op", allocator::OpName(op)}});
  }
  attempts_timed_out_ =
      &registry.GetCounter("kleaf_kafka_request_timeouts_total",
                           "Request attempts that got no reply in time (retried).");
  given_up_ = &registry.GetCounter("kleaf_kafka_requests_failed_total",
                                   "Requests given up after every attempt timed out.");
  older_generation_ = &registry.GetCounter(
      "kleaf_sequence_older_generation_answers_total",
      "Sequence answers through the requests topic dropped because an answer of a newer lease "
      "generation of their partition was seen before (R8; their calls fail and are retried).");
  if (options_.hop) {
    routes_ = std::make_unique<OwnerRoutes>(options_.topics.partitions);
    OwnerHopOptions hop = *options_.hop;
    hop.partitions = options_.topics.partitions;
    hop_ = std::make_unique<OwnerHopCaller>(static_cast<PartitionCaller&>(*this), *routes_,
                                            std::move(hop));
    router_ = std::make_unique<SequenceRouter>(*hop_, clock_);
  } else {
    router_ = std::make_unique<SequenceRouter>(static_cast<PartitionCaller&>(*this), clock_);
  }
}

Result<std::unique_ptr<KafkaAllocatorClient>> KafkaAllocatorClient::Start(
    KafkaClientOptions options, Clock& clock) {
  std::unique_ptr<KafkaAllocatorClient> c(new KafkaAllocatorClient(std::move(options), clock));
  kafka::Properties producer_props = c->options_.props;
  // A request not delivered within one attempt is dropped, not delivered late.
  producer_props["message.timeout.ms"] = std::to_string(c->options_.request_timeout.count());
  // An idempotent producer that fails for good (e.g. an out-of-order sequence after a broker
  // restart with requests in flight) replaces itself: requests lost with it time out and are
  // sent again, so neither segment fetches nor lease renewals wedge.
  metrics::Counter* rebuilds = &metrics::Registry::Default().GetCounter(
      "kleaf_kafka_request_producer_rebuilds_total",
      "Times the request producer failed for good (a fatal idempotence error) and was replaced.");
  auto producer = kafka::Producer::Create(producer_props, [rebuilds](const std::string& error) {
    rebuilds->Inc();
    spdlog::error("[kafka-client] the request producer failed for good ({}); replaced by a new one",
                  error);
  });
  if (!producer) return std::unexpected(producer.error());
  // Not fatal: without it the first request only waits for librdkafka's own lookup.
  if (auto ready = (*producer)->Prepare(c->options_.topics.requests, milliseconds(5000)); !ready) {
    spdlog::warn("[kafka-client] {}", ready.error().message);
  }
  auto replies = kafka::PartitionReader::Create(c->options_.props, "gateway_replies");
  if (!replies) return std::unexpected(replies.error());
  c->producer_ = std::move(*producer);
  c->replies_ = std::move(*replies);
  const auto& t = c->options_.topics;
  // Read only replies produced from now on.
  auto marks = c->replies_->Watermarks(t.replies, c->options_.reply_partition, milliseconds(10000));
  if (!marks) return std::unexpected(marks.error());
  if (auto a = c->replies_->Assign({{t.replies, c->options_.reply_partition, marks->second}}); !a) {
    return std::unexpected(a.error());
  }
  c->stall_since_ns_ = clock.MonotonicNs();
  c->thread_ = std::thread([raw = c.get()] { raw->ReplyLoop(); });
  return c;
}

KafkaAllocatorClient::~KafkaAllocatorClient() { Stop(); }

void KafkaAllocatorClient::Stop() {
  // The hop's calls still queued go through the requests topic, answered or failed below.
  if (hop_) hop_->Stop();
  if (stop_.exchange(true) || !thread_.joinable()) return;
  thread_.join();
  std::unordered_map<std::string, Pending> left;
  {
    MutexLock lock(mu_);
    left.swap(pending_);
    deadlines_.clear();
  }
  for (auto& [id, p] : left) p.done(Fail(Code::kUnavailable, "shutting down"));
}

template <typename Op>
void KafkaAllocatorClient::CallPartition(int32_t partition, std::string key, Op op,
                                         Callback<typename Op::Result> done) {
  // The count this node routes with travels along, so an allocator with another count refuses.
  wire::Envelope envelope{std::move(op), options_.topics.partitions};
  Pending p{.op = allocator::kOpIndex<Op>,
            .sent_ns = 0,
            .partition = partition,
            .key = std::move(key),
            .payload = wire::EncodeRequest(envelope),
            .attempts_left = options_.attempts,
            .deadline_ns = 0,
            .done = [done = std::move(done)](Result<std::string_view> reply) {
              if (!reply) return done(std::unexpected(reply.error()));
              done(wire::DecodeReply<typename Op::Result>(*reply));
            }};
  MutexLock lock(mu_);
  SendLocked(std::move(p));
}

void KafkaAllocatorClient::SendLocked(Pending p) {
  const auto& t = options_.topics;
  std::string id = id_prefix_ + std::to_string(next_id_.fetch_add(1));
  --p.attempts_left;
  p.sent_ns = clock_.MonotonicNs();
  p.deadline_ns = p.sent_ns + std::chrono::nanoseconds(options_.request_timeout).count();
  auto sent = producer_->Send(t.requests, p.partition, p.key, p.payload,
                              {{kCorrelationHeader, id},
                               {kReplyPartitionHeader, std::to_string(options_.reply_partition)}});
  if (!sent) {
    spdlog::warn("[kafka-client] sending a request failed: {}", sent.error().message);
    // Left pending: the deadline retries it or fails it.
  }
  deadlines_.emplace_back(p.deadline_ns, id);
  pending_.emplace(std::move(id), std::move(p));
}

void KafkaAllocatorClient::ReplyLoop() {
  while (!stop_.load()) {
    if (auto m = replies_->Poll(milliseconds(20)); m && m->value) {
      OnReply(m->header(kCorrelationHeader), m->header(kOwnerRouteHeader), *m->value);
    }
    ExpireAttempts();
    HealIfStalled(clock_.MonotonicNs());
  }
}

void KafkaAllocatorClient::OnReply(const std::string* correlation_id,
                                   const std::string* owner_route, std::string_view reply) {
  if (!correlation_id) return;
  ReplyHandler done;
  int32_t partition = -1;
  {
    MutexLock lock(mu_);
    auto it = pending_.find(*correlation_id);
    if (it == pending_.end()) return;
    const int64_t now = clock_.MonotonicNs();
    latency_[it->second.op]->Observe(static_cast<double>(now - it->second.sent_ns) / 1e9);
    last_reply_ns_.store(now);
    stall_since_ns_ = now;
    done = std::move(it->second.done);
    partition = it->second.partition;
    pending_.erase(it);
  }
  if (owner_route != nullptr && routes_ != nullptr) {
    if (auto route = DecodeOwnerRoute(*owner_route); route && !routes_->Note(partition, *route)) {
      older_generation_->Inc();
      return done(Fail(Code::kUnavailable,
                       "an answer of partition " + std::to_string(partition) +
                           " from an older lease generation than one already seen; retry"));
    }
  }
  done(reply);
}

void KafkaAllocatorClient::ExpireAttempts() {
  std::vector<ReplyHandler> failed;
  {
    MutexLock lock(mu_);
    const int64_t now = clock_.MonotonicNs();
    std::vector<std::string> expired;
    while (!deadlines_.empty() && deadlines_.front().first <= now) {
      if (pending_.contains(deadlines_.front().second)) {
        expired.push_back(std::move(deadlines_.front().second));
      }
      deadlines_.pop_front();
    }
    if (!expired.empty()) last_timeout_ns_ = now;
    for (const auto& id : expired) {
      auto node = pending_.extract(id);
      attempts_timed_out_->Inc();
      if (node.mapped().attempts_left > 0) {
        SendLocked(std::move(node.mapped()));
      } else {
        failed.push_back(std::move(node.mapped().done));
      }
    }
  }
  if (failed.empty()) return;
  given_up_->Inc(failed.size());
  last_give_up_ns_.store(clock_.MonotonicNs());
  for (auto& done : failed) {
    done(Fail(Code::kUnavailable,
              "no answer from the allocators (Kafka down or partition moving); retry"));
  }
}

void KafkaAllocatorClient::HealIfStalled(int64_t now_ns) {
  if (last_timeout_ns_ < stall_since_ns_ || now_ns - stall_since_ns_ < kReplyStallNs) return;
  stall_since_ns_ = now_ns;  // one try per stall period, whatever comes of it
  const auto& t = options_.topics;
  if (auto ready = producer_->Prepare(t.requests, milliseconds(2000)); !ready) {
    spdlog::warn("[kafka-client] no reply for {} s: {}", kReplyStallNs / 1'000'000'000,
                 ready.error().message);
  }
  auto fresh = kafka::PartitionReader::Create(options_.props, "gateway_replies");
  if (!fresh) return;
  auto marks = (*fresh)->Watermarks(t.replies, options_.reply_partition, milliseconds(2000));
  if (!marks) {
    // Kafka does not answer a new handle either: an outage, not a stale handle. Try again later.
    spdlog::warn("[kafka-client] no reply for {} s and Kafka does not answer: {}",
                 kReplyStallNs / 1'000'000'000, marks.error().message);
    return;
  }
  if (auto a = (*fresh)->Assign({{t.replies, options_.reply_partition, marks->second}}); !a) return;
  replies_ = std::move(*fresh);
  kafka::CountRecovery("gateway_replies", "rebuilt");
  spdlog::warn(
      "[kafka-client] no reply for {} s while Kafka answers: the reply reader was "
      "replaced by a new handle, reading from offset {}",
      kReplyStallNs / 1'000'000'000, marks->second);
}

void KafkaAllocatorClient::Submit(allocator::AnyCall call) {
  std::visit([this](auto& c) { Route(std::move(c.op), std::move(c.done)); }, call);
}

template <typename Op>
void KafkaAllocatorClient::Route(Op op, Callback<typename Op::Result> done) {
  if constexpr (std::is_same_v<Op, op::ListTags>) {
    CallEveryPartition(
        op, +[](const state::TagRecord& r) { return r.tag; }, std::move(done));
  } else if constexpr (std::is_same_v<Op, op::ListSpaces>) {
    CallEveryPartition(
        op, +[](const state::SpaceRecord& r) { return r.space; }, std::move(done));
  } else if constexpr (std::is_same_v<Op, op::NextSeq> || std::is_same_v<Op, op::CurrentSeq>) {
    router_->Route(std::move(op), std::move(done));
  } else {
    // The partition of the operation's own route key: its tag, its space's name, its section's
    // route key, or kWorkersKey (the worker registry's requests all go to that partition).
    std::string key = *allocator::RouteKey(allocator::Request(op));
    const int32_t p = options_.topics.PartitionOf(key);
    if constexpr (std::is_same_v<Op, op::Allocate>) {
      // The allocator maps the segment into its datacenter (allocator::Execute); one configured
      // as another datacenter, or too old to map, would hand out another datacenter's IDs.
      done = [dc = options_.datacenter, done = std::move(done)](Result<allocator::Segment> r) {
        if (r && !dc.single()) {
          const allocator::Datacenter got =
              r->format ? r->format->datacenter() : allocator::Datacenter{};
          if (got != dc) {
            r = Fail(Code::kFailedPrecondition,
                     "the allocators handed out a segment of tag '" + r->tag + "' for " +
                         got.Describe() + ", but this node is " + dc.Describe() +
                         ": check datacenter.index and datacenter.count on the allocators (and "
                         "upgrade allocators before gateways)");
          }
        }
        done(std::move(r));
      };
    } else if constexpr (std::is_same_v<Op, op::GetSpace>) {
      done = [this, space = op.space, done = std::move(done)](Result<state::SpaceRecord> r) {
        if (r) router_->KeepSpace(space, *r);
        if (!r && r.error().code == Code::kNotFound) router_->KeepSpace(space, std::nullopt);
        done(std::move(r));
      };
    } else if constexpr (std::is_same_v<Op, op::PutSpace>) {
      done = [this, space = op.space, done = std::move(done)](Result<state::SpaceRecord> r) {
        if (r) router_->KeepSpace(space, *r);
        done(std::move(r));
      };
    } else if constexpr (std::is_same_v<Op, op::DeleteSpace>) {
      done = [this, space = op.space, done = std::move(done)](Result<state::SpaceRecord> r) {
        if (r || r.error().code == Code::kNotFound) router_->KeepSpace(space, std::nullopt);
        done(std::move(r));
      };
    }
    CallPartition(p, std::move(key), std::move(op), std::move(done));
  }
}

void KafkaAllocatorClient::Call(int32_t partition, std::string route_key, op::GetSpace get,
                                Callback<state::SpaceRecord> done) {
  CallPartition(partition, std::move(route_key), std::move(get), std::move(done));
}

void KafkaAllocatorClient::Call(int32_t partition, std::string route_key, op::NextSeq next,
                                Callback<std::vector<uint64_t>> done) {
  CallPartition(partition, std::move(route_key), std::move(next), std::move(done));
}

void KafkaAllocatorClient::Call(int32_t partition, std::string route_key, op::CurrentSeq current,
                                Callback<uint64_t> done) {
  CallPartition(partition, std::move(route_key), std::move(current), std::move(done));
}

template <typename Op, typename Record>
void KafkaAllocatorClient::CallEveryPartition(Op op, std::string (*name_of)(const Record&),
                                              Callback<std::vector<Record>> done) {
  // Every partition answers for its own records; the answer is complete only with all of them.
  struct Gather {
    Gather(int partitions, Callback<std::vector<Record>> d)
        : left(partitions), done(std::move(d)) {}
    Mutex mu;
    int left KLEAF_GUARDED_BY(mu);
    std::vector<Record> records KLEAF_GUARDED_BY(mu);
    std::optional<Error> error KLEAF_GUARDED_BY(mu);
    const Callback<std::vector<Record>> done;
  };
  auto g = std::make_shared<Gather>(options_.topics.partitions, std::move(done));
  for (int32_t p = 0; p < options_.topics.partitions; ++p) {
    CallPartition(
        p, "", op, Callback<std::vector<Record>>([g, name_of](Result<std::vector<Record>> r) {
          std::optional<Error> error;
          std::vector<Record> records;
          {
            MutexLock lock(g->mu);
            if (!r) {
              g->error = r.error();
            } else {
              g->records.insert(g->records.end(), r->begin(), r->end());
            }
            if (--g->left > 0) return;
            error = std::move(g->error);
            records = std::move(g->records);
          }
          if (error) return g->done(std::unexpected(std::move(*error)));
          std::sort(records.begin(), records.end(),
                    [name_of](const auto& a, const auto& b) { return name_of(a) < name_of(b); });
          g->done(std::move(records));
        }));
  }
}

}  // namespace kleaf::cluster
