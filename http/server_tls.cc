#include "http/server_tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509err.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <string>

#include "http/openssl_handle.h"

namespace kleaf::http {
namespace {

namespace ssl = boost::asio::ssl;

constexpr const char* kCertKey = "http.tls.cert_file";
constexpr const char* kKeyKey = "http.tls.key_file";
constexpr const char* kClientCaKey = "http.tls.client_ca_file";

// The oldest error OpenSSL queued (the cause), and the queue emptied.
std::string OpenSslError() {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "unknown error";
  char buf[256];
  ERR_error_string_n(code, buf, sizeof(buf));
  return buf;
}

std::string TimeText(const ASN1_TIME* t) {
  BioHandle bio(BIO_new(BIO_s_mem()));
  if (bio == nullptr) return "?";
  ASN1_TIME_print(bio.get(), t);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n > 0 ? n : 0));
}

std::unexpected<Error> KeyFail(const char* key, const std::string& what) {
  return Fail(Code::kInvalidArgument, std::string(key) + ": " + what);
}

// A read error with the reason (ENOENT, EACCES), before OpenSSL's less telling one.
Result<void> CheckReadable(const char* key, const std::string& path) {
  std::ifstream in(path);
  if (!in) return KeyFail(key, "cannot read '" + path + "': " + std::strerror(errno));
  return {};
}

// TLS 1.2 or later, no renegotiation, the server's cipher order before the client's.
void SetServerProtocol(SSL_CTX* ctx) {
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
}

// The leaf of the chain is valid now: not expired, not yet to come.
Result<void> CheckValidNow(const X509* cert, const std::string& cert_file) {
  if (X509_cmp_current_time(X509_get0_notAfter(cert)) <= 0) {
    return KeyFail(kCertKey, "certificate expired on " + TimeText(X509_get0_notAfter(cert)) +
                                 " ('" + cert_file + "')");
  }
  if (X509_cmp_current_time(X509_get0_notBefore(cert)) >= 0) {
    return KeyFail(kCertKey, "certificate not valid before " + TimeText(X509_get0_notBefore(cert)) +
                                 " ('" + cert_file + "')");
  }
  return {};
}

// cert_file's chain (leaf first) as the context's certificate, its leaf valid now.
Result<void> LoadCertificateChain(SSL_CTX* ctx, const std::string& cert_file) {
  if (auto r = CheckReadable(kCertKey, cert_file); !r) return r;
  if (SSL_CTX_use_certificate_chain_file(ctx, cert_file.c_str()) != 1) {
    return KeyFail(kCertKey, "no PEM certificate in '" + cert_file + "': " + OpenSslError());
  }
  return CheckValidNow(SSL_CTX_get0_certificate(ctx), cert_file);
}

// key_file as the context's private key, which must match the certificate loaded before it.
Result<void> LoadMatchingKey(SSL_CTX* ctx, const std::string& key_file) {
  if (auto r = CheckReadable(kKeyKey, key_file); !r) return r;
  const std::string mismatch =
      "the key in '" + key_file + "' does not match the certificate of " + kCertKey + ": ";
  // OpenSSL 3 refuses a key of another certificate as it loads it (X509_R_KEY_VALUES_MISMATCH);
  // SSL_CTX_check_private_key below catches it in older versions.
  if (SSL_CTX_use_PrivateKey_file(ctx, key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    const bool mismatched = ERR_GET_REASON(ERR_peek_error()) == X509_R_KEY_VALUES_MISMATCH;
    return KeyFail(kKeyKey, (mismatched ? mismatch : "no PEM private key in '" + key_file + "': ") +
                                OpenSslError());
  }
  if (SSL_CTX_check_private_key(ctx) != 1) return KeyFail(kKeyKey, mismatch + OpenSslError());
  return {};
}

// Mutual TLS: a client certificate signed by one of client_ca_file's CAs is required, and their
// names are the ones the server's certificate request lists.
Result<void> RequireClientCertificates(SSL_CTX* ctx, const std::string& client_ca_file) {
  if (auto r = CheckReadable(kClientCaKey, client_ca_file); !r) return r;
  X509NameListHandle names(SSL_load_client_CA_file(client_ca_file.c_str()));
  if (names == nullptr ||
      SSL_CTX_load_verify_locations(ctx, client_ca_file.c_str(), nullptr) != 1) {
    return KeyFail(kClientCaKey,
                   "no PEM CA certificate in '" + client_ca_file + "': " + OpenSslError());
  }
  SSL_CTX_set_client_CA_list(ctx, names.release());  // takes ownership
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  // Sessions resumed under client verification need a context id (OpenSSL refuses them else).
  static constexpr unsigned char kSessionContext[] = "kleaf-http";
  SSL_CTX_set_session_id_context(ctx, kSessionContext, sizeof(kSessionContext) - 1);
  return {};
}

}  // namespace

Result<std::shared_ptr<ssl::context>> MakeServerTlsContext(const TlsFiles& files) {
  ERR_clear_error();
  auto context = std::make_shared<ssl::context>(ssl::context::tls_server);
  SSL_CTX* ctx = context->native_handle();
  SetServerProtocol(ctx);
  if (auto r = LoadCertificateChain(ctx, files.cert_file); !r) return std::unexpected(r.error());
  if (auto r = LoadMatchingKey(ctx, files.key_file); !r) return std::unexpected(r.error());
  if (!files.client_ca_file.empty()) {
    if (auto r = RequireClientCertificates(ctx, files.client_ca_file); !r) {
      return std::unexpected(r.error());
    }
  }
  return context;
}

std::optional<int64_t> CertificateNotAfter(ssl::context& context) {
  const X509* cert = SSL_CTX_get0_certificate(context.native_handle());
  if (cert == nullptr) return std::nullopt;
  struct tm t = {};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(cert), &t) != 1) return std::nullopt;
  return static_cast<int64_t>(timegm(&t));
}

}  // namespace kleaf::http
