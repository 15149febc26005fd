#include "http/tls_context.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509err.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <string>

namespace kleaf::http {
namespace {

namespace ssl = boost::asio::ssl;

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
  BIO* bio = BIO_new(BIO_s_mem());
  if (bio == nullptr) return "?";
  ASN1_TIME_print(bio, t);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  std::string text(data, static_cast<size_t>(n > 0 ? n : 0));
  BIO_free(bio);
  return text;
}

Error KeyFail(const char* key, const std::string& what) {
  return Error{Code::kInvalidArgument, std::string(key) + ": " + what};
}

// A read error with the reason (ENOENT, EACCES), before OpenSSL's less telling one.
Result<void> CheckReadable(const char* key, const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return std::unexpected(KeyFail(key, "cannot read '" + path + "': " + std::strerror(errno)));
  }
  return {};
}

}  // namespace

Result<std::shared_ptr<ssl::context>> MakeServerTlsContext(const TlsFiles& files) {
  ERR_clear_error();
  auto context = std::make_shared<ssl::context>(ssl::context::tls_server);
  SSL_CTX* ctx = context->native_handle();
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);

  if (auto r = CheckReadable("http.tls.cert_file", files.cert_file); !r) {
    return std::unexpected(r.error());
  }
  if (SSL_CTX_use_certificate_chain_file(ctx, files.cert_file.c_str()) != 1) {
    return std::unexpected(
        KeyFail("http.tls.cert_file",
                "no PEM certificate in '" + files.cert_file + "': " + OpenSslError()));
  }
  const X509* cert = SSL_CTX_get0_certificate(ctx);
  if (X509_cmp_current_time(X509_get0_notAfter(cert)) <= 0) {
    return std::unexpected(KeyFail("http.tls.cert_file", "certificate expired on " +
                                                             TimeText(X509_get0_notAfter(cert)) +
                                                             " ('" + files.cert_file + "')"));
  }
  if (X509_cmp_current_time(X509_get0_notBefore(cert)) >= 0) {
    return std::unexpected(KeyFail("http.tls.cert_file", "certificate not valid before " +
                                                             TimeText(X509_get0_notBefore(cert)) +
                                                             " ('" + files.cert_file + "')"));
  }

  if (auto r = CheckReadable("http.tls.key_file", files.key_file); !r) {
    return std::unexpected(r.error());
  }
  // OpenSSL 3 refuses a key of another certificate as it loads it (X509_R_KEY_VALUES_MISMATCH);
  // SSL_CTX_check_private_key below catches it in older versions.
  if (SSL_CTX_use_PrivateKey_file(ctx, files.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    const bool mismatch = ERR_GET_REASON(ERR_peek_error()) == X509_R_KEY_VALUES_MISMATCH;
    return std::unexpected(KeyFail("http.tls.key_file",
                                   (mismatch ? "the key in '" + files.key_file +
                                                   "' does not match the certificate of "
                                                   "http.tls.cert_file: "
                                             : "no PEM private key in '" + files.key_file + "': ") +
                                       OpenSslError()));
  }
  if (SSL_CTX_check_private_key(ctx) != 1) {
    return std::unexpected(KeyFail("http.tls.key_file", "the key in '" + files.key_file +
                                                            "' does not match the certificate "
                                                            "of http.tls.cert_file: " +
                                                            OpenSslError()));
  }

  if (!files.client_ca_file.empty()) {
    if (auto r = CheckReadable("http.tls.client_ca_file", files.client_ca_file); !r) {
      return std::unexpected(r.error());
    }
    STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(files.client_ca_file.c_str());
    if (names == nullptr ||
        SSL_CTX_load_verify_locations(ctx, files.client_ca_file.c_str(), nullptr) != 1) {
      if (names != nullptr) sk_X509_NAME_pop_free(names, X509_NAME_free);
      return std::unexpected(
          KeyFail("http.tls.client_ca_file",
                  "no PEM CA certificate in '" + files.client_ca_file + "': " + OpenSslError()));
    }
    SSL_CTX_set_client_CA_list(ctx, names);  // takes ownership
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
    // Sessions resumed under client verification need a context id (OpenSSL refuses them else).
    static constexpr unsigned char kSessionContext[] = "kleaf-http";
    SSL_CTX_set_session_id_context(ctx, kSessionContext, sizeof(kSessionContext) - 1);
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
