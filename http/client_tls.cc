#include "http/client_tls.h"

#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

#include <boost/asio/ip/address.hpp>

namespace kleaf::http {
namespace {

namespace ssl = boost::asio::ssl;

std::unexpected<Error> SettingFail(const TlsSetting& setting, const boost::system::error_code& ec) {
  return Fail(Code::kInvalidArgument, setting.name + " '" + setting.path + "': " + ec.message());
}

}  // namespace

Result<std::shared_ptr<ssl::context>> MakeClientTlsContext(const ClientTlsOptions& options) {
  auto context = std::make_shared<ssl::context>(ssl::context::tls_client);
  SSL_CTX_set_min_proto_version(context->native_handle(), TLS1_2_VERSION);
  boost::system::error_code ec;
  context->load_verify_file(options.ca.path, ec);
  if (ec) return SettingFail(options.ca, ec);
  if (options.partial_chain) {
    X509_VERIFY_PARAM_set_flags(SSL_CTX_get0_param(context->native_handle()),
                                X509_V_FLAG_PARTIAL_CHAIN);
  }
  context->set_verify_mode(ssl::verify_peer, ec);
  if (!options.cert.path.empty()) {
    context->use_certificate_chain_file(options.cert.path, ec);
    if (ec) return SettingFail(options.cert, ec);
    context->use_private_key_file(options.key.path, ssl::context::pem, ec);
    if (ec) return SettingFail(options.key, ec);
  }
  return context;
}

void ExpectPeerName(SSL* ssl, const std::string& host) {
  boost::system::error_code ec;
  boost::asio::ip::make_address(host, ec);
  if (!ec) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host.c_str());
  } else {
    SSL_set_tlsext_host_name(ssl, host.c_str());
    SSL_set1_host(ssl, host.c_str());
  }
}

}  // namespace kleaf::http
