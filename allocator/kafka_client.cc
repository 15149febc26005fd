#include "allocator/kafka_client.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <random>

namespace kleaf::allocator {
namespace {

using std::chrono::milliseconds;

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

template <typename T>
std::function<void(Result<Reply>)> Picking(std::optional<T> Reply::*field, Callback<T> done) {
  return [field, done = std::move(done)](Result<Reply> r) {
    if (!r) return done(std::unexpected(r.error()));
    if (r->error) return done(std::unexpected(*r->error));
    if (!((*r).*field)) return done(Fail(Code::kInternal, "allocator reply without a result"));
    done(std::move(*((*r).*field)));
  };
}

}  // namespace

KafkaAllocatorClient::KafkaAllocatorClient(KafkaClientOptions options, Clock& clock)
    : options_(std::move(options)),
      clock_(clock),
      id_prefix_(options_.node_id + "-" + Nonce() + "-") {
  auto& registry = metrics::Registry::Default();
  for (int op = 0; op < kOpCount; ++op) {
    latency_[op] = &registry.GetHistogram(
        "kleaf_kafka_request_seconds",
        "Round trip of a request to the allocators over Kafka, from sending to the reply.",
        {{"op", OpName(static_cast<Request::Op>(op))}});
  }
  attempts_timed_out_ =
      &registry.GetCounter("kleaf_kafka_request_timeouts_total",
                           "Request attempts that got no reply in time (retried).");
  given_up_ = &registry.GetCounter("kleaf_kafka_requests_failed_total",
                                   "Requests given up after every attempt timed out.");
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
  c->thread_ = std::thread([raw = c.get()] { raw->Run(); });
  return c;
}

KafkaAllocatorClient::~KafkaAllocatorClient() { Stop(); }

void KafkaAllocatorClient::Stop() {
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

namespace {

// The count this node routes with travels along, so an allocator with another count refuses.
Request WithPartitions(Request request, int32_t partitions) {
  request.partitions = partitions;
  return request;
}

}  // namespace

void KafkaAllocatorClient::Call(int32_t partition, std::string key, const Request& request,
                                std::function<void(Result<Reply>)> done) {
  Pending p{.op = request.op,
            .sent_ns = 0,
            .partition = partition,
            .key = std::move(key),
            .payload = EncodeRequest(WithPartitions(request, options_.topics.partitions)),
            .attempts_left = options_.attempts,
            .deadline_ns = 0,
            .done = std::move(done)};
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

void KafkaAllocatorClient::Run() {
  while (!stop_.load()) {
    if (auto m = replies_->Poll(milliseconds(20)); m && m->value) {
      const std::string* id = m->header(kCorrelationHeader);
      std::function<void(Result<Reply>)> done;
      if (id) {
        MutexLock lock(mu_);
        if (auto it = pending_.find(*id); it != pending_.end()) {
          const int64_t now = clock_.MonotonicNs();
          latency_[static_cast<int>(it->second.op)]->Observe(
              static_cast<double>(now - it->second.sent_ns) / 1e9);
          last_reply_ns_.store(now);
          stall_since_ns_ = now;
          done = std::move(it->second.done);
          pending_.erase(it);
        }
      }
      if (done) done(DecodeReply(*m->value));
    }
    // Deadlines: retry or give up.
    std::vector<std::function<void(Result<Reply>)>> failed;
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
    if (!failed.empty()) {
      given_up_->Inc(failed.size());
      last_give_up_ns_.store(clock_.MonotonicNs());
    }
    for (auto& done : failed) {
      done(Fail(Code::kUnavailable,
                "no answer from the allocators (Kafka down or partition moving); retry"));
    }
    HealIfStalled(clock_.MonotonicNs());
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

void KafkaAllocatorClient::AllocateSegment(std::string tag, int64_t step, Callback<Segment> done) {
  int32_t p = options_.topics.PartitionOf(tag);
  // A segment leaves the client only as this datacenter hands it out (ApplyDatacenter).
  Callback<Segment> in_datacenter = [dc = options_.datacenter,
                                     done = std::move(done)](Result<Segment> r) {
    if (r) {
      if (auto ok = ApplyDatacenter(*r, dc); !ok) r = std::unexpected(ok.error());
    }
    done(std::move(r));
  };
  Call(p, tag, MakeRequest(Request::Op::kAllocate, tag, step),
       Picking(&Reply::segment, std::move(in_datacenter)));
}

void KafkaAllocatorClient::GetTag(std::string tag, Callback<state::TagRecord> done) {
  int32_t p = options_.topics.PartitionOf(tag);
  Call(p, tag, MakeRequest(Request::Op::kGetTag, tag), Picking(&Reply::tag, std::move(done)));
}

void KafkaAllocatorClient::PutTag(std::string tag, TagUpdate update,
                                  Callback<state::TagRecord> done) {
  int32_t p = options_.topics.PartitionOf(tag);
  Call(p, tag, MakeRequest(Request::Op::kPutTag, tag, 0, std::move(update)),
       Picking(&Reply::tag, std::move(done)));
}

void KafkaAllocatorClient::DeleteTag(std::string tag, Callback<state::TagRecord> done) {
  int32_t p = options_.topics.PartitionOf(tag);
  Call(p, tag, MakeRequest(Request::Op::kDeleteTag, tag), Picking(&Reply::tag, std::move(done)));
}

// Worker-registry requests all go to the partition of kWorkersKey.
void KafkaAllocatorClient::ClaimWorker(WorkerClaim claim, Callback<WorkerLeaseInfo> done) {
  Call(options_.topics.PartitionOf(kWorkersKey), kWorkersKey, ClaimRequest(claim),
       Picking(&Reply::lease, std::move(done)));
}

void KafkaAllocatorClient::RenewWorker(WorkerReport report, Callback<WorkerLeaseInfo> done) {
  Call(options_.topics.PartitionOf(kWorkersKey), kWorkersKey,
       ReportRequest(Request::Op::kRenewWorker, report), Picking(&Reply::lease, std::move(done)));
}

void KafkaAllocatorClient::ReleaseWorker(WorkerReport report, Callback<WorkerLeaseInfo> done) {
  Call(options_.topics.PartitionOf(kWorkersKey), kWorkersKey,
       ReportRequest(Request::Op::kReleaseWorker, report), Picking(&Reply::lease, std::move(done)));
}

void KafkaAllocatorClient::WorkerStatus(Callback<WorkerCounts> done) {
  Call(options_.topics.PartitionOf(kWorkersKey), kWorkersKey,
       MakeWorkerRequest(Request::Op::kWorkerStatus, Claimant{}),
       Picking(&Reply::workers, std::move(done)));
}

void KafkaAllocatorClient::ListTags(Callback<std::vector<state::TagRecord>> done) {
  // Every partition answers for its own tags; the answer is complete only with all of them.
  struct Gather {
    std::mutex mu;
    int left;
    std::vector<state::TagRecord> tags;
    std::optional<Error> error;
    Callback<std::vector<state::TagRecord>> done;
  };
  auto g = std::make_shared<Gather>();
  g->left = options_.topics.partitions;
  g->done = std::move(done);
  for (int32_t p = 0; p < options_.topics.partitions; ++p) {
    Call(p, "", MakeRequest(Request::Op::kListTags), [g](Result<Reply> r) {
      std::unique_lock lock(g->mu);
      if (!r) {
        g->error = r.error();
      } else if (r->error) {
        g->error = *r->error;
      } else {
        g->tags.insert(g->tags.end(), r->tags.begin(), r->tags.end());
      }
      if (--g->left > 0) return;
      lock.unlock();
      if (g->error) return g->done(std::unexpected(*g->error));
      std::sort(g->tags.begin(), g->tags.end(),
                [](const auto& a, const auto& b) { return a.tag < b.tag; });
      g->done(std::move(g->tags));
    });
  }
}

}  // namespace kleaf::allocator
