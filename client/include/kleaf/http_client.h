// HttpClient: IDs from kleaf gateways over HTTP/1.1 keep-alive, with failover across a list of
// gateways and optional local buffering of segment IDs. Installed with the library; Beast stays
// in the .cc.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kleaf/client_error.h"
#include "kleaf/export.h"

namespace kleaf {

struct GatewayAddress {
  std::string host;
  uint16_t port = 0;
  // The datacenter (datacenter.index of its cluster) the gateway runs in; -1: not given.
  int datacenter = -1;
  bool operator==(const GatewayAddress&) const = default;
};

// "host:port[,host:port...]" (also "[v6addr]:port"); spaces around entries are ignored. An entry
// may end in "@N", the gateway's datacenter ("10.0.0.1:8080@0,10.1.0.1:8080@1").
KLEAF_CLIENT_API ClientResult<std::vector<GatewayAddress>> ParseGateways(std::string_view list);

// The order in which a call tries the gateways (indexes into `gateways`). Without a local
// datacenter (-1): every gateway, from `preferred` (the one that answered last) on in list order.
// With one: the gateways of `local_datacenter` first, then the others, each group from
// `preferred` on in list order; and a gateway in `demoted` (it failed within the client's
// failback_after) after every one that is not, so a dead local gateway does not delay each call.
KLEAF_CLIENT_API std::vector<size_t> GatewayOrder(const std::vector<GatewayAddress>& gateways,
                                                  int local_datacenter, size_t preferred,
                                                  const std::vector<bool>& demoted);

// Thread-safe; each call borrows one keep-alive connection per gateway (a small pool). A call
// tries the gateway that answered last, then the next ones in list order (with local_datacenter:
// its own datacenter's gateways first, GatewayOrder), going round again
// until `total_timeout`: on a connect error, a timeout, a broken connection or a 5xx (503 when a
// gateway has no segment ready). A 4xx (bad tag, unknown tag, bad count) comes back at once as
// kRejected with the server's status, code and message. Requests are GETs: a retried request can
// only lose IDs (a gap), never duplicate them.
// With buffer_size N > 1, segment IDs are fetched N at a time and handed out locally (the
// buffered rest is a gap if the process ends). Snowflake IDs, UUIDv7s and ULIDs are never buffered
// (time-ordered).
class HttpClient {
 public:
  struct Options {
    std::vector<GatewayAddress> gateways;
    std::chrono::milliseconds request_timeout{2000};  // one attempt: connect, write, read
    std::chrono::milliseconds total_timeout{10000};   // all attempts of one call
    int buffer_size = 0;                  // segment IDs fetched per request to buffer locally
    int64_t max_count_per_request = 10000;  // the gateways' max_batch
    int max_idle_connections = 8;         // per gateway
    // Prefer the gateways whose GatewayAddress::datacenter is this one, and fail over to the
    // others only when none of them answers; -1: no preference (list order from the last that
    // answered).
    int local_datacenter = -1;
    // With local_datacenter: a gateway that failed is tried after the others for this long, then
    // first again (the client fails back to its own datacenter).
    std::chrono::milliseconds failback_after{5000};
    // HTTPS (gateways with http.tls): each gateway's certificate is verified against the CA
    // certificates in this PEM file, and its name against GatewayAddress::host (an IP address or
    // a DNS name, as listed). Empty: plain HTTP. TLS 1.2 or later.
    std::string ca_file;
    // Mutual TLS (gateways with http.tls.client_ca_file): this client's certificate and key, PEM.
    std::string cert_file;
    std::string key_file;
  };

  KLEAF_CLIENT_API static ClientResult<std::unique_ptr<HttpClient>> Create(Options options);
  KLEAF_CLIENT_API ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  KLEAF_CLIENT_API ClientResult<int64_t> NextSegment(const std::string& tag);
  KLEAF_CLIENT_API ClientResult<std::vector<int64_t>> Segments(const std::string& tag,
                                                               int64_t count);
  KLEAF_CLIENT_API ClientResult<int64_t> NextSnowflake(const std::string& tag);
  KLEAF_CLIENT_API ClientResult<std::vector<int64_t>> Snowflakes(const std::string& tag,
                                                                 int64_t count);
  // UUIDv7s (RFC 9562, canonical lowercase 8-4-4-4-12) and ULIDs (26 characters of Crockford
  // base32), as the gateway wrote them; never buffered (time-ordered, like snowflake IDs).
  KLEAF_CLIENT_API ClientResult<std::string> NextUuid7(const std::string& tag);
  KLEAF_CLIENT_API ClientResult<std::vector<std::string>> Uuid7s(const std::string& tag,
                                                                 int64_t count);
  KLEAF_CLIENT_API ClientResult<std::string> NextUlid(const std::string& tag);
  KLEAF_CLIENT_API ClientResult<std::vector<std::string>> Ulids(const std::string& tag,
                                                                int64_t count);

  // Sequences of a space (PUT /api/v1/spaces/{space} creates one): the next value of `key`,
  // strictly greater than every value answered for `key` before, through any gateway. A retried
  // request can only skip values.
  KLEAF_CLIENT_API ClientResult<uint64_t> NextSeq(const std::string& space, uint64_t key);
  // One next value per key, in the order given (a key given twice gets two increasing values):
  // one request per kMaxSeqKeysPerRequest keys.
  KLEAF_CLIENT_API ClientResult<std::vector<uint64_t>> NextSeqs(const std::string& space,
                                                                const std::vector<uint64_t>& keys);
  static constexpr size_t kMaxSeqKeysPerRequest = 1000;
  // The highest value answered for `key` (0 if none), never lower than one answered before.
  KLEAF_CLIENT_API ClientResult<uint64_t> CurrentSeq(const std::string& space, uint64_t key);
  // The space's own sequence (key 0): strictly increasing across the whole cluster.
  KLEAF_CLIENT_API ClientResult<uint64_t> NextSpaceSeq(const std::string& space);

  struct Stats {
    int64_t requests = 0;           // HTTP requests sent
    int64_t failovers = 0;          // attempts that moved on to another gateway
    int64_t connections_opened = 0;
  };
  KLEAF_CLIENT_API Stats stats() const;

  struct Impl;

 private:
  explicit HttpClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kleaf
