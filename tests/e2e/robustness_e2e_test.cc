// Bad and hostile input over real sockets while another client keeps getting IDs: each is
// answered (or dropped) on its own connection, and the server keeps serving everyone else. Every
// test runs against the plain listener (…/Plain) and the TLS one (…/Tls, http.tls), where the same
// bytes travel as TLS application data.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/e2e/e2e_env.h"
#include "tests/e2e/http_client.h"
#include "tests/e2e/id_stream.h"
#include "tests/e2e/tls_env.h"

namespace kleaf::e2e {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr int kHeaderLimit = 2048;
constexpr int kBodyLimit = 1024;
constexpr int kIdleTimeoutMs = 1000;
constexpr int kMaxBatch = 1000;

std::string ErrorCode(std::string_view body) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_object() || !j.contains("error") || !j["error"].is_object()) return "<no error body>";
  if (!j["error"].contains("message") || !j["error"]["message"].is_string()) return "<no message>";
  return j["error"].value("code", "<no code>");
}

// One server per test, a single I/O thread (so one stuck connection would show), and a client that
// fetches IDs all along; TearDown checks it was never disturbed and the server still answers.
class RobustnessE2eTest : public ::testing::TestWithParam<Listener> {
 protected:
  void SetUp() override {
    TestConfig config(dir_.path() / "state");
    config.Set("http.threads", "1")
        .Set("http.header_limit_bytes", std::to_string(kHeaderLimit))
        .Set("http.body_limit_bytes", std::to_string(kBodyLimit))
        .Set("http.idle_timeout_ms", std::to_string(kIdleTimeoutMs))
        .Set("http.max_batch", std::to_string(kMaxBatch))
        .Set("segment.auto_create", "true");
    transport_ = ServeOver(GetParam(), dir_.path(), config);
    ASSERT_FALSE(HasFatalFailure());
    auto server = StartStandalone(dir_.WriteFile("kleaf.yaml", config.Yaml()));
    ASSERT_TRUE(server) << server.error();
    server_ = std::move(*server);
    steady_ =
        std::make_unique<IdStream>(server_.port, 1,
                                   std::vector<IdRoute>{{IdRoute::Kind::kSegment, "steady"},
                                                        {IdRoute::Kind::kSnowflake, "steady"}},
                                   20, transport_);
    ASSERT_TRUE(steady_->WaitForIds(100, seconds(10))) << "the steady client got no IDs";
    steady_at_start_ = steady_->total();
  }

  void TearDown() override {
    if (!steady_) return;
    // The steady client keeps being served after whatever the test did.
    EXPECT_TRUE(steady_->WaitForIds(steady_->total() + 200, seconds(10)))
        << "the steady client stalled";
    steady_->Stop();
    for (const auto& f : steady_->failures()) ADD_FAILURE() << "steady client: " << f;
    EXPECT_EQ(steady_->max_connections_per_client(), 1)
        << "the steady client's connection was dropped";
    EXPECT_GT(steady_->total(), steady_at_start_);

    HttpClient client = Client();
    auto health = client.Get("/healthz");
    ASSERT_TRUE(health) << health.error();
    EXPECT_EQ(health->status, 200);
    auto id = client.Get("/api/v1/segment/after-all?count=3");
    ASSERT_TRUE(id) << id.error();
    EXPECT_EQ(id->status, 200) << id->body;
    EXPECT_TRUE(server_.process->running());
    server_.process->Terminate();
    ExitStatus status = server_.process->WaitExit(kExitTimeout);
    EXPECT_TRUE(status.exited && status.code == 0) << status.ToString() << "\n"
                                                   << server_.process->Stderr();
  }

  // A raw connection to the server (fails the test if it cannot connect).
  RawConnection Raw() {
    auto raw = RawConnection::Connect(server_.port, "127.0.0.1", transport_);
    EXPECT_TRUE(raw) << raw.error();
    return std::move(*raw);
  }
  HttpClient Client(std::chrono::milliseconds timeout = seconds(10)) {
    return HttpClient(server_.port, timeout, transport_);
  }

  TempDir dir_;
  Transport transport_;
  Server server_;
  std::unique_ptr<IdStream> steady_;
  int64_t steady_at_start_ = 0;
};

TEST_P(RobustnessE2eTest, GarbageIsAnswered400AndTheConnectionClosed) {
  const std::vector<std::string> garbage = {
      // The start of a TLS ClientHello (over TLS, inside the session: HTTP garbage all the same).
      std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11) + "\r\n\r\n",
      "hello there\r\n\r\n",
      "GET /api/v1/segment/x HTTP/1.1\r\nHost 127.0.0.1\r\n\r\n",       // header without colon
      "GET /api/v1/segment/x HTTP/1.1\r\nContent-Length: abc\r\n\r\n",  // bad length
      // A chunk size that is not hexadecimal.
      "GET /api/v1/segment/x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n\r\n",
      std::string("GET /api/v1/\0segment HTTP/1.1\r\n\r\n", 33),
  };
  for (const auto& bytes : garbage) {
    SCOPED_TRACE(testing::PrintToString(bytes));
    RawConnection raw = Raw();
    ASSERT_TRUE(raw.Send(bytes));
    auto got = raw.ReadUntilClosed(seconds(5));
    EXPECT_TRUE(got.closed) << "the connection stayed open after garbage";
    EXPECT_EQ(StatusOf(got.data), 400) << got.data;
    EXPECT_EQ(ErrorCode(BodyOf(got.data)), "invalid_argument") << got.data;
  }
}

TEST_P(RobustnessE2eTest, OversizedHeaderIs431AndOversizedBodyIs413) {
  {
    RawConnection raw = Raw();
    std::string request = "GET /api/v1/segment/big HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " +
                          std::string(2 * kHeaderLimit, 'a') + "\r\n\r\n";
    ASSERT_TRUE(raw.Send(request));
    auto got = raw.ReadUntilClosed(seconds(5));
    EXPECT_TRUE(got.closed);
    EXPECT_EQ(StatusOf(got.data), 431) << got.data;
  }
  {
    // Many headers that are small one by one add up too.
    RawConnection raw = Raw();
    std::string request = "GET /api/v1/segment/big HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    for (int i = 0; i < 200; ++i) request += "X-H" + std::to_string(i) + ": 0123456789\r\n";
    ASSERT_TRUE(raw.Send(request + "\r\n"));
    auto got = raw.ReadUntilClosed(seconds(5));
    EXPECT_TRUE(got.closed);
    EXPECT_EQ(StatusOf(got.data), 431) << got.data;
  }
  {
    // Declared too large: answered as soon as the headers are read.
    RawConnection raw = Raw();
    std::string body = R"({"description":")" + std::string(4 * kBodyLimit, 'd') + R"("})";
    std::string request = "PUT /api/v1/tags/big HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                          "Authorization: Bearer " + std::string(kAdminToken) +
                          "\r\nContent-Type: application/json\r\nContent-Length: " +
                          std::to_string(body.size()) + "\r\n\r\n" + body;
    ASSERT_TRUE(raw.Send(request));
    auto got = raw.ReadUntilClosed(seconds(5));
    EXPECT_TRUE(got.closed);
    EXPECT_EQ(StatusOf(got.data), 413) << got.data;
    EXPECT_EQ(ErrorCode(BodyOf(got.data)), "payload_too_large") << got.data;
  }
  {
    // Chunked, so the size shows only while reading the body.
    RawConnection raw = Raw();
    std::string request = "PUT /api/v1/tags/big HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                          "Authorization: Bearer " + std::string(kAdminToken) +
                          "\r\nTransfer-Encoding: chunked\r\n\r\n";
    for (int i = 0; i < 4; ++i) request += "200\r\n" + std::string(0x200, ' ') + "\r\n";
    request += "0\r\n\r\n";
    ASSERT_TRUE(raw.Send(request));
    auto got = raw.ReadUntilClosed(seconds(5));
    EXPECT_TRUE(got.closed);
    EXPECT_EQ(StatusOf(got.data), 413) << got.data;
  }
  // The same through the HTTP client: a body just under the limit is accepted.
  HttpClient client = Client();
  std::string fits = R"({"description":")" + std::string(kBodyLimit - 64, 'd') + R"("})";
  auto put = client.Put("/api/v1/tags/big", fits, Bearer(kAdminToken));
  ASSERT_TRUE(put) << put.error();
  EXPECT_EQ(put->status, 200) << put->body;
}

TEST_P(RobustnessE2eTest, SilentAndHalfSentClientsDoNotHoldUpOthersAndAreTimedOut) {
  std::vector<RawConnection> silent;
  for (int i = 0; i < 5; ++i) silent.push_back(Raw());
  RawConnection half = Raw();
  ASSERT_TRUE(half.Send("GET /api/v1/segment/slow?count=2 HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow:"));
  // A keep-alive connection answered, then silent (issue 29: held open for good after an answer
  // given at once, as /healthz's is; one that waited for a segment was closed in time).
  RawConnection answered = Raw();
  for (const char* target : {"/api/v1/segment/once?count=2", "/healthz"}) {
    ASSERT_TRUE(
        answered.Send(std::string("GET ") + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
    auto answer = answered.ReadResponse(seconds(5));
    ASSERT_EQ(StatusOf(answer.data), 200) << target << ": " << answer.data;
    ASSERT_FALSE(answer.closed) << target;
  }

  // Meanwhile another client is served at once, on the server's only I/O thread.
  HttpClient client = Client(seconds(3));
  for (int i = 0; i < 50; ++i) {
    auto reply = client.Get("/api/v1/segment/other?count=2");
    ASSERT_TRUE(reply) << "request " << i << ": " << reply.error();
    ASSERT_EQ(reply->status, 200) << reply->body;
  }
  // The silent ones are closed by the idle timeout, without an answer.
  for (auto& s : silent) {
    auto got = s.ReadUntilClosed(milliseconds(kIdleTimeoutMs) + seconds(5));
    EXPECT_TRUE(got.closed) << "a silent connection outlived http.idle_timeout_ms";
    EXPECT_EQ(got.data, "");
  }
  auto got = half.ReadUntilClosed(milliseconds(kIdleTimeoutMs) + seconds(5));
  EXPECT_TRUE(got.closed) << "a half-sent request held its connection past http.idle_timeout_ms";
  got = answered.ReadUntilClosed(milliseconds(kIdleTimeoutMs) + seconds(5));
  EXPECT_TRUE(got.closed) << "a keep-alive connection silent after its answer outlived "
                             "http.idle_timeout_ms";
  EXPECT_EQ(got.data, "");
  // A busy keep-alive client is not cut off by the idle timeout.
  EXPECT_EQ(client.connections_opened(), 1);
}

TEST_P(RobustnessE2eTest, ClientsVanishingMidRequestDoNotHurtTheServer) {
  for (int i = 0; i < 20; ++i) {
    {
      RawConnection raw = Raw();
      ASSERT_TRUE(raw.Send("GET /api/v1/segment/vanish?count=5 HTTP/1.1\r\nHo"));
      raw.Reset();
    }
    {
      // A whole request, then gone before the (large) answer is written.
      RawConnection raw = Raw();
      ASSERT_TRUE(raw.Send("GET /api/v1/snowflake/vanish?count=" + std::to_string(kMaxBatch) +
                           " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
      raw.Reset();
    }
    {
      RawConnection raw = Raw();
      ASSERT_TRUE(raw.Send("PUT /api/v1/tags/vanish HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                           "Content-Length: 500\r\n\r\n{\"step\":"));
      raw.Close();
    }
    {
      // Pipelined requests, then a half-close (over TLS: close_notify, the TCP connection left open
      // both ways): every answer still arrives, then the close.
      RawConnection raw = Raw();
      const std::string one = "GET /api/v1/segment/pipelined HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
      ASSERT_TRUE(raw.Send(one + one + one));
      raw.ShutdownWrite();
      int answered = 0;
      for (int k = 0; k < 3; ++k) {
        auto got = raw.ReadResponse(seconds(5));
        if (StatusOf(got.data) == 200) ++answered;
      }
      EXPECT_EQ(answered, 3);
      auto rest = raw.ReadUntilClosed(seconds(5));
      EXPECT_TRUE(rest.closed) << "the server kept a half-closed connection open";
      EXPECT_EQ(rest.data, "");
    }
  }
}

TEST_P(RobustnessE2eTest, BadCountBadTagUnknownPathAndWrongMethod) {
  HttpClient client = Client();
  auto expect = [&](const std::string& method, const std::string& target, int status,
                    const std::string& code) -> HttpReply {
    SCOPED_TRACE(method + " " + target);
    auto reply = client.Request(method, target, "", {});
    if (!reply) {
      ADD_FAILURE() << reply.error();
      return HttpReply{};
    }
    EXPECT_EQ(reply->status, status) << reply->body;
    EXPECT_EQ(ErrorCode(reply->body), code) << reply->body;
    EXPECT_NE(reply->Header("Content-Type").find("application/json"), std::string::npos);
    return *reply;
  };
  const std::vector<std::string> bad_counts = {"0",  "-1", "abc", "",     "1.5",
                                               "1e3", "0x10", "+5", "5x", "%205",
                                               std::to_string(kMaxBatch + 1),
                                               "99999999999999999999999"};
  for (const std::string& count : bad_counts) {
    expect("GET", "/api/v1/segment/t?count=" + count, 400, "invalid_argument");
    expect("GET", "/api/v1/snowflake/t?count=" + count, 400, "invalid_argument");
  }
  const std::string long_tag(129, 't');
  // (Only characters that are legal in a request target: the rest never reaches the router.)
  for (const std::string& tag : std::vector<std::string>{"bad$tag", "a%20b", "%2e%2e", "a,b", "a+b",
                                                         "a~b", "a@b", long_tag}) {
    expect("GET", "/api/v1/segment/" + tag, 400, "invalid_argument");
    expect("GET", "/api/segment/get/" + tag, 400, "invalid_argument");
    expect("GET", "/api/v1/snowflake/" + tag, 400, "invalid_argument");
  }
  // The longest valid tag and every allowed character are fine.
  auto ok = client.Get("/api/v1/segment/" + std::string(128, 'x'));
  ASSERT_TRUE(ok) << ok.error();
  EXPECT_EQ(ok->status, 200) << ok->body;
  auto chars = client.Get("/api/v1/segment/aZ09_.:-?count=" + std::to_string(kMaxBatch));
  ASSERT_TRUE(chars) << chars.error();
  EXPECT_EQ(chars->status, 200) << chars->body;

  for (const std::string path : {"/nope", "/api", "/api/v1", "/api/v1/segment", "/api/v2/segment/t",
                                 "/api/v1/segment/t/extra", "/api/segment/get", "/api/segment/x/t",
                                 "/api/v1/tagz/t", "/healthz/x"}) {
    expect("GET", path, 404, "not_found");
  }
  // (Leaf's get routes answer every method Leaf's do: leaf_compat_e2e_test.cc.)
  for (const std::string target :
       {"/api/v1/segment/t", "/api/v1/snowflake/t", "/api/v1/snowflake/decode/1"}) {
    for (const std::string method : {"POST", "PUT", "DELETE"}) {
      HttpReply reply = expect(method, target, 405, "method_not_allowed");
      EXPECT_EQ(reply.Header("Allow"), "GET, HEAD") << method << " " << target;
    }
  }
  // All of these were answered on one keep-alive connection.
  EXPECT_EQ(client.connections_opened(), 1);
}

INSTANTIATE_TEST_SUITE_P(, RobustnessE2eTest, ::testing::Values(Listener::kPlain, Listener::kTls),
                         ListenerName);

}  // namespace
}  // namespace kleaf::e2e
