// The gateway's side of the owner hop (docs/architecture.md, "The owner hop"; issue 38 item 2):
// the routes owners publish with their answers, R8's net against an older generation's answer,
// and the PartitionCaller that sends NextSeq and CurrentSeq straight to the owner of their
// partition over kept-alive HTTP(S) connections, falling back to the requests topic.
#pragma once

#include <boost/asio/ssl/context.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/metrics.h"
#include "base/mutex.h"
#include "cluster/sequence_router.h"
#include "cluster/wire.h"
#include "http/client_connection.h"

namespace kleaf::cluster {

// Where the owner of a partition answers sequence calls: its lease generation there and the
// address of its owner hop ("host:port"; empty: it answers through the requests topic only). An
// allocator sends it with each sequence answer (the kOwnerRouteHeader of a reply on the replies
// topic; on the hop, its Kleaf-Generation with the address called).
struct OwnerRoute {
  uint64_t generation = 0;  // 0: the answer came from no lease
  std::string address;
  bool operator==(const OwnerRoute&) const = default;
};
// "<generation>" or "<generation> <host:port>".
std::string EncodeOwnerRoute(const OwnerRoute& route);
// Nothing for a value that is not one.
std::optional<OwnerRoute> DecodeOwnerRoute(std::string_view value);

// A gateway's table of the routes of the partitions, and the newest generation it saw answer for
// each (R8). Thread-safe.
class OwnerRoutes {
 public:
  explicit OwnerRoutes(int32_t partitions);

  // An answer for partition p from an owner at `route`. False when its generation is older than
  // one already seen answering for p: the answer must be dropped (R8: a net, not the fence).
  // Otherwise the generation is the newest seen, and the route is kept (an empty address forgets
  // the route: that owner answers through the requests topic only).
  [[nodiscard]] bool Note(int32_t p, const OwnerRoute& route);
  std::optional<OwnerRoute> RouteOf(int32_t p) const;
  // Forgets p's route if it is still `route` (a refusal or a failure on it).
  void Forget(int32_t p, const OwnerRoute& route);

 private:
  const size_t partitions_;
  mutable Mutex mu_;
  std::vector<uint64_t> seen_ KLEAF_GUARDED_BY(mu_);
  std::vector<OwnerRoute> routes_ KLEAF_GUARDED_BY(mu_);
};

// The header of an owner's hop answer that carries its CLOCK_MONOTONIC_RAW reading (ns), taken
// as it answers: gateways estimate each owner's clock rate from it (A1's check across nodes).
inline constexpr char kRawClockHeader[] = "Kleaf-Raw-Ns";
// This machine's CLOCK_MONOTONIC_RAW, in ns.
int64_t RawClockNs();

// A1's check across nodes: each owner's clock rate relative to this gateway's, from the RAW
// readings owners send with their hop answers, over windows of at least `window_ns` of this node's
// RAW clock. An owner's reading was taken between this node's readings before the request and
// after the answer, so each end of a window is known within half that round trip: the error of an
// estimate is the two halves over the window. Exported per owner address:
// kleaf_sequence_owner_clock_rate_ppm (the owner's rate over this node's, less 1, in ppm) and
// kleaf_sequence_owner_clock_rate_error_ppm. Neither side can tell which of two clocks is wrong;
// the alert compares the rate with 2ρ. Thread-safe.
class OwnerClockRates {
 public:
  explicit OwnerClockRates(int64_t window_ns) : window_ns_(window_ns) {}
  struct Estimate {
    double ppm = 0;
    double error_ppm = 0;
  };
  // An answer of `owner` carrying its reading `owner_raw_ns`, to a request sent at this node's
  // `sent_ns` and answered by `received_ns`.
  void Note(const std::string& owner, int64_t owner_raw_ns, int64_t sent_ns, int64_t received_ns);
  // The last window's estimate for `owner`; nothing before one window has passed.
  std::optional<Estimate> Of(const std::string& owner) const;

 private:
  struct Owner {
    int64_t owner_ns = 0;  // the window's first sample: the owner's reading,
    int64_t here_ns = 0;   // the middle of this node's two readings around it,
    int64_t half_ns = 0;   // and half their distance
    std::optional<Estimate> last;
    metrics::Gauge* rate = nullptr;
    metrics::Gauge* error = nullptr;
  };
  const int64_t window_ns_;
  mutable Mutex mu_;
  std::unordered_map<std::string, Owner> owners_ KLEAF_GUARDED_BY(mu_);
};

struct OwnerHopOptions {
  int32_t partitions = 0;  // the requests topic's, sent in each envelope
  // Over HTTPS: the context that verifies owners (and offers this node's certificate); null:
  // plain HTTP.
  std::shared_ptr<boost::asio::ssl::context> tls;
  bool check_name = true;                   // the owner's certificate must name the route's host
  std::chrono::milliseconds timeout{2000};  // connect, handshake, and one exchange each
  int workers = 4;                          // hop requests in flight at a time
  // Requests in flight to one owner at a time (0: half the workers, at least 1), so that an owner
  // that stopped answering (paused, cut off) holds at most these workers for `timeout`, and the
  // others go on serving every other owner.
  int per_owner = 0;
  // The window of the owners' clock-rate estimates (OwnerClockRates).
  std::chrono::milliseconds rate_window{60000};
};

// PartitionCaller of a gateway with `sequence.owner_hop`: NextSeq and CurrentSeq of a partition
// whose route is known go to its owner over the hop, everything else, and every call the hop does
// not answer, through `requests_topic`. Calls wait in one queue; a worker (of `workers`) takes the
// first call whose owner has fewer than `per_owner` requests in flight, and every other call queued
// for the same owner, and sends them in one request over a
// kept-alive connection of a pool per address (POST /internal/v1/seq/<p> for one call, POST
// /internal/v1/seq for several: a fan-out over the partitions of one owner costs one round trip).
// A call that the owner refuses as unavailable (not the owner, no lease, lease run out), that
// fails in transport, or whose answer carries an older generation than one seen (R8), forgets the
// route and is sent through the requests topic, which reaches whoever owns the partition now and
// whose answer names its route. Other errors are answers. Metrics:
// kleaf_owner_hop_calls_total{outcome}, kleaf_owner_hop_requests_total (requests sent: fewer
// than the calls when an owner's calls travel together), kleaf_owner_hop_seconds (a request's
// round trip).
class OwnerHopCaller final : public PartitionCaller {
 public:
  OwnerHopCaller(PartitionCaller& requests_topic, OwnerRoutes& routes, OwnerHopOptions options);
  ~OwnerHopCaller() override;
  // Ends the workers; calls still queued go through the requests topic. Idempotent.
  void Stop();

  int32_t PartitionOf(std::string_view route_key) const override {
    return requests_topic_.PartitionOf(route_key);
  }
  void Call(int32_t partition, std::string route_key, allocator::op::GetSpace get,
            allocator::Callback<state::SpaceRecord> done) override {
    requests_topic_.Call(partition, std::move(route_key), std::move(get), std::move(done));
  }
  void Call(int32_t partition, std::string route_key, allocator::op::NextSeq next,
            allocator::Callback<std::vector<uint64_t>> done) override;
  void Call(int32_t partition, std::string route_key, allocator::op::CurrentSeq current,
            allocator::Callback<uint64_t> done) override;

 private:
  // One hop call: its route, the request, and what is done with the answer (or the failure).
  struct Job {
    OwnerRoute route;
    wire::HopCall call;
    std::function<void(Result<wire::HopReply>)> done;
  };
  template <typename Op>
  void Hop(int32_t partition, std::string route_key, Op op,
           allocator::Callback<typename Op::Result> done);
  void Work();
  // The first queued job whose owner may take one more request now (queue_.end(): none).
  std::deque<Job>::iterator NextSendable() KLEAF_REQUIRES(mu_);
  // The answers to `jobs` (one owner's), in their order, from one request on a connection of
  // their address's pool (or a new one).
  Result<std::vector<wire::HopReply>> Exchange(const std::vector<Job>& jobs);
  Result<http::ClientResponse> Send(const std::string& address, const http::ClientRequest& request);
  // Notes the owner's RAW reading of `response`, if it carries one (kRawClockHeader).
  void NoteRawClock(const std::string& address, const http::ClientResponse& response,
                    int64_t sent_ns, int64_t received_ns);

  PartitionCaller& requests_topic_;
  OwnerRoutes& routes_;
  const OwnerHopOptions options_;
  Mutex mu_;
  CondVar wake_;
  std::deque<Job> queue_ KLEAF_GUARDED_BY(mu_);
  bool stop_ KLEAF_GUARDED_BY(mu_) = false;
  const int per_owner_;
  // Requests in flight by address (none: absent).
  std::unordered_map<std::string, int> in_flight_ KLEAF_GUARDED_BY(mu_);
  // Idle kept-alive connections by address.
  std::unordered_map<std::string, std::vector<std::unique_ptr<http::ClientConnection>>> idle_
      KLEAF_GUARDED_BY(mu_);
  std::vector<std::thread> workers_;
  metrics::Counter* answered_;
  metrics::Counter* refused_;
  metrics::Counter* failed_;
  metrics::Counter* older_;
  metrics::Counter* requests_;
  metrics::Histogram* latency_;
  OwnerClockRates rates_;
};

}  // namespace kleaf::cluster
