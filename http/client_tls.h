// The client side of kleaf's HTTPS: one builder of client TLS contexts, shared by the tools that
// talk to a node (`kleaf state backup`, app/backup.cc) and the client library (client/), and the
// peer name a connection checks. Every error names the setting at fault as the caller calls it
// (http.tls.cert_file for the tool, ca_file for the client library's Options).
#pragma once

#include <openssl/types.h>

#include <boost/asio/ssl/context.hpp>
#include <memory>
#include <string>

#include "base/error.h"

namespace kleaf::http {

// A PEM file of the client's TLS settings and the name of the setting it came from.
struct TlsSetting {
  std::string name;  // what an error names: "ca_file", "http.tls.cert_file", ...
  std::string path;
};

struct ClientTlsOptions {
  TlsSetting ca;  // the certificates a server's chain must end in
  // Also trust a certificate of `ca` that is not a root (X509_V_FLAG_PARTIAL_CHAIN): a CA-issued
  // server certificate listed in `ca` is trusted as itself.
  bool partial_chain = false;
  // The client certificate chain and its key (mutual TLS); an empty cert.path: none offered.
  TlsSetting cert;
  TlsSetting key;
};

// A client context of TLS 1.2 or later that verifies the server against `options.ca`. Fails
// (kInvalidArgument, "<name> '<path>': <reason>") on a file OpenSSL cannot load.
[[nodiscard]] Result<std::shared_ptr<boost::asio::ssl::context>> MakeClientTlsContext(
    const ClientTlsOptions& options);

// Before the handshake of `ssl`: the name its server's certificate must carry is `host`, an IP
// address checked as one; a host name is also sent as SNI.
void ExpectPeerName(SSL* ssl, const std::string& host);

}  // namespace kleaf::http
