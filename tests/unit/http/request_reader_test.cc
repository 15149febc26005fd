#include "http/request_reader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace kleaf::http {
namespace {

using Kind = ReadOutcome::Kind;

struct Fed {
  std::vector<ReadOutcome> outcomes;
  size_t consumed = 0;  // bytes of the input the reader took
};

// Feeds `input` the way a session does (at most ReadBuffer() and `piece` bytes per read) and
// collects the outcomes until the input is used up or the reader rejects.
Fed Feed(RequestReader& reader, std::string_view input, size_t piece = SIZE_MAX) {
  Fed fed;
  while (true) {
    ReadOutcome o = reader.Next();
    if (o.kind != Kind::kNeedMore) {
      const bool rejected = o.kind == Kind::kReject;
      fed.outcomes.push_back(std::move(o));
      if (rejected) return fed;
      continue;
    }
    if (input.empty()) return fed;
    auto space = reader.ReadBuffer();
    EXPECT_FALSE(space.empty());
    const size_t n = std::min({space.size(), input.size(), piece});
    std::memcpy(space.data(), input.data(), n);
    reader.CommitRead(n);
    input.remove_prefix(n);
    fed.consumed += n;
  }
}

constexpr RequestLimits kLimits{8192, 65536};

TEST(RequestReaderTest, ReadsPipelinedRequestsOneAtATime) {
  RequestReader reader(kLimits);
  Fed fed = Feed(reader,
                 "GET /api/segment/get/a HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t\r\n\r\n"
                 "PUT /api/v1/tags/a HTTP/1.1\r\nContent-Length: 12\r\n\r\n{\"step\":100}"
                 "GET /healthz HTTP/1.0\r\n\r\n");
  ASSERT_EQ(fed.outcomes.size(), 3u);
  for (const auto& o : fed.outcomes) EXPECT_EQ(o.kind, Kind::kRequest);
  EXPECT_EQ(fed.outcomes[0].request.method, "GET");
  EXPECT_EQ(fed.outcomes[0].request.target, "/api/segment/get/a");
  EXPECT_EQ(fed.outcomes[0].request.authorization, "Bearer t");
  EXPECT_TRUE(fed.outcomes[0].keep_alive);
  EXPECT_EQ(fed.outcomes[1].request.method, "PUT");
  EXPECT_EQ(fed.outcomes[1].request.body, "{\"step\":100}");
  EXPECT_EQ(fed.outcomes[2].version, 10u);
  EXPECT_FALSE(fed.outcomes[2].keep_alive);
}

TEST(RequestReaderTest, ReadsByteByByte) {
  RequestReader reader(kLimits);
  Fed fed = Feed(reader,
                 "PUT /api/v1/tags/a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                 "5;name=value\r\n{\"ste\r\n7\r\np\":100}\r\n0\r\nX-Trailer: 1\r\n\r\n",
                 1);
  ASSERT_EQ(fed.outcomes.size(), 1u);
  ASSERT_EQ(fed.outcomes[0].kind, Kind::kRequest);
  EXPECT_EQ(fed.outcomes[0].request.body, "{\"step\":100}");
}

TEST(RequestReaderTest, HeadIsReadAsGetWithoutBodyAndPipelinesOn) {
  RequestReader reader(kLimits);
  Fed fed = Feed(reader, "HEAD /healthz HTTP/1.1\r\n\r\nGET /healthz HTTP/1.1\r\n\r\n");
  ASSERT_EQ(fed.outcomes.size(), 2u);
  EXPECT_EQ(fed.outcomes[0].request.method, "GET");
  EXPECT_TRUE(fed.outcomes[0].head);
  EXPECT_EQ(fed.outcomes[1].request.method, "GET");
  EXPECT_FALSE(fed.outcomes[1].head);
}

// RFC 9112 §6: a body whose length is ambiguous is refused, and what follows is never parsed as
// a request (the smuggled GET must not come out).
TEST(RequestReaderTest, AmbiguousFramingIsRejectedAndNothingAfterItIsRead) {
  const std::string smuggled = "GET /api/v1/segment/smuggled HTTP/1.1\r\nHost: x\r\n\r\n";
  const std::vector<std::string> framings = {
      "Transfer-Encoding: gzip\r\n",
      "Transfer-Encoding: identity\r\n",
      "Transfer-Encoding: xchunked\r\n",
      "Transfer-Encoding: \r\n",
      "Transfer-Encoding: chunked, identity\r\n",
      "Transfer-Encoding: gzip, chunked\r\n",
      "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
      "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n",
      "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n",
      "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
      "Transfer-Encoding: gzip\r\nContent-Length: 5\r\n",
  };
  for (const auto& framing : framings) {
    RequestReader reader(kLimits);
    Fed fed = Feed(reader, "PUT /api/v1/tags/victim HTTP/1.1\r\nHost: x\r\n" + framing + "\r\n" +
                               "0\r\n\r\n" + smuggled);
    ASSERT_EQ(fed.outcomes.size(), 1u) << framing;
    EXPECT_EQ(fed.outcomes[0].kind, Kind::kReject) << framing;
    EXPECT_EQ(fed.outcomes[0].rejection.status, 400) << framing;
    EXPECT_NE(fed.outcomes[0].rejection.body.find("\"error\""), std::string::npos);
    EXPECT_EQ(reader.Next().kind, Kind::kReject) << framing;
  }
}

TEST(RequestReaderTest, TransferEncodingInHttp10IsRejected) {
  RequestReader reader(kLimits);
  Fed fed = Feed(reader,
                 "PUT /api/v1/tags/a HTTP/1.0\r\nTransfer-Encoding: chunked\r\n"
                 "Connection: keep-alive\r\n\r\n0\r\n\r\nGET /healthz HTTP/1.1\r\n\r\n");
  ASSERT_EQ(fed.outcomes.size(), 1u);
  EXPECT_EQ(fed.outcomes[0].kind, Kind::kReject);
  EXPECT_EQ(fed.outcomes[0].rejection.status, 400);
}

TEST(RequestReaderTest, ChunkedInAnyCaseIsAccepted) {
  RequestReader reader(kLimits);
  Fed fed =
      Feed(reader, "PUT /x HTTP/1.1\r\nTransfer-Encoding:  Chunked \r\n\r\n2\r\nab\r\n0\r\n\r\n");
  ASSERT_EQ(fed.outcomes.size(), 1u);
  ASSERT_EQ(fed.outcomes[0].kind, Kind::kRequest);
  EXPECT_EQ(fed.outcomes[0].request.body, "ab");
}

// A part of a chunked request that never ends is cut off once the read buffer is full: the
// reader takes at most header_limit_bytes beyond the header section.
TEST(RequestReaderTest, EndlessChunkLinesAndTrailersAreCutOffAtTheBound) {
  const std::string head = "PUT /api/v1/tags/a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::string flood(4 << 20, 'a');
  const std::string spaces(4 << 20, ' ');
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"extension", head + "1;" + flood},
      {"extension value", head + "1;a=" + flood},
      {"whitespace", head + "1" + spaces},
      {"trailer", head + "0\r\nX-Long: " + flood},
      {"many trailers",
       [&] {
         std::string s = head + "0\r\n";
         while (s.size() < (4u << 20)) s += "X-T: 1\r\n";
         return s;
       }()},
  };
  for (const auto& [name, input] : cases) {
    RequestReader reader(kLimits);
    Fed fed = Feed(reader, input);
    ASSERT_EQ(fed.outcomes.size(), 1u) << name;
    EXPECT_EQ(fed.outcomes[0].kind, Kind::kReject) << name;
    EXPECT_EQ(fed.outcomes[0].rejection.status, 413) << name;
    EXPECT_LE(fed.consumed, head.size() + kLimits.header_limit_bytes + 8) << name;
  }
}

// Each chunk line fits the buffer, but together they would make one request take megabytes: the
// bytes besides the body are capped at 2 x header_limit + body_limit, however they arrive.
TEST(RequestReaderTest, StuffedChunkFramingIsCutOff) {
  const std::string head = "PUT /api/v1/tags/a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::string extension = ";x=" + std::string(1000, 'e');
  const std::string zeros(1000, '0');
  const uint64_t cap = 2 * kLimits.header_limit_bytes + kLimits.body_limit_bytes;
  for (const std::string& chunk :
       {"1" + extension + "\r\nX\r\n", zeros + "1\r\nX\r\n", std::string("1\r\nX\r\n")}) {
    std::string input = head;
    for (int i = 0; i < 60000; ++i) input += chunk;
    for (size_t piece : {size_t{1}, size_t{777}, SIZE_MAX}) {
      RequestReader reader(kLimits);
      Fed fed = Feed(reader, input + "0\r\n\r\n", piece);
      ASSERT_EQ(fed.outcomes.size(), 1u);
      EXPECT_EQ(fed.outcomes[0].kind, Kind::kReject);
      EXPECT_EQ(fed.outcomes[0].rejection.status, 413);
      EXPECT_LE(fed.consumed, cap + kLimits.body_limit_bytes + kLimits.header_limit_bytes);
    }
  }
  // Chunks of 16 bytes are fine up to the body limit.
  std::string input = head;
  for (int i = 0; i < 4000; ++i) input += "10\r\n" + std::string(16, 'x') + "\r\n";
  RequestReader reader(kLimits);
  Fed fed = Feed(reader, input + "0\r\n\r\n", 1);
  ASSERT_EQ(fed.outcomes.size(), 1u);
  ASSERT_EQ(fed.outcomes[0].kind, Kind::kRequest);
  EXPECT_EQ(fed.outcomes[0].request.body.size(), 64000u);
}

TEST(RequestReaderTest, HeadersOverTheLimitAre431) {
  RequestReader reader(kLimits);
  Fed fed = Feed(reader, "GET / HTTP/1.1\r\nX-Big: " + std::string(1 << 20, 'b'));
  ASSERT_EQ(fed.outcomes.size(), 1u);
  EXPECT_EQ(fed.outcomes[0].rejection.status, 431);
  // The code of the body, as a value too: the gateway's monitor records it without parsing.
  EXPECT_EQ(fed.outcomes[0].rejection.error_code, "request_header_fields_too_large");
  EXPECT_EQ(fed.outcomes[0].rejection.error_message, "request headers are too large");
  EXPECT_LE(fed.consumed, kLimits.header_limit_bytes);
}

// Beast consumes the fields it has parsed and counts its limit against the rest only: many small
// fields must add up all the same, however they arrive.
TEST(RequestReaderTest, ManySmallHeadersAddUpTo431) {
  std::string input = "GET /api/v1/segment/big HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  for (int i = 0; i < 1000; ++i) input += "X-H" + std::to_string(i) + ": 0123456789\r\n";
  input += "\r\n";
  for (size_t piece : {size_t{1}, size_t{100}, SIZE_MAX}) {
    RequestReader reader(kLimits);
    Fed fed = Feed(reader, input, piece);
    ASSERT_EQ(fed.outcomes.size(), 1u) << piece;
    EXPECT_EQ(fed.outcomes[0].rejection.status, 431) << piece;
  }
}

TEST(RequestReaderTest, BodiesOverTheLimitAre413) {
  for (const std::string& input :
       std::vector<std::string>{"PUT /x HTTP/1.1\r\nContent-Length: 65537\r\n\r\n",
                                "PUT /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n10001\r\n",
                                "PUT /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n8000\r\n" +
                                    std::string(0x8000, 'x') + "\r\n8001\r\n"}) {
    RequestReader reader(kLimits);
    Fed fed = Feed(reader, input);
    ASSERT_EQ(fed.outcomes.size(), 1u) << input.substr(0, 60);
    EXPECT_EQ(fed.outcomes[0].rejection.status, 413) << input.substr(0, 60);
    EXPECT_EQ(fed.outcomes[0].rejection.error_code, "payload_too_large") << input.substr(0, 60);
  }
}

TEST(RequestReaderTest, MalformedRequestsAre400) {
  for (const std::string& input : std::vector<std::string>{
           "GET / HTTP/1.1\r\nContent-Length: 1, 2\r\n\r\n", "GET / HTTP/2.0\r\n\r\n",
           "GET\r\n\r\n", "PUT / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"}) {
    RequestReader reader(kLimits);
    Fed fed = Feed(reader, input);
    ASSERT_EQ(fed.outcomes.size(), 1u) << input;
    EXPECT_EQ(fed.outcomes[0].rejection.status, 400) << input;
  }
}

TEST(RequestReaderTest, BoundCountsBufferRequestLineAndBody) {
  EXPECT_EQ(ParseBufferBound(kLimits), 2u * 8192 + 65536);
}

}  // namespace
}  // namespace kleaf::http
