// The server's TLS settings (OpenSSL through Boost.Asio's ssl::context), built from the http.tls
// files and checked the way a start-up config check is: every failure names the key at fault.
// Used by the server (http_server.cc) and its tests; other components see only TlsFiles.
#pragma once

#include <boost/asio/ssl/context.hpp>
#include <cstdint>
#include <memory>
#include <optional>

#include "base/error.h"
#include "http/tls_files.h"

namespace kleaf::http {

// A server context of TLS 1.2 or later with `files`' certificate chain and key; with
// client_ca_file, a client certificate signed by one of its CAs is required. Fails (naming
// http.tls.<key>) on an unreadable file, a key that does not match the certificate, or a
// certificate outside its validity period now.
[[nodiscard]] Result<std::shared_ptr<boost::asio::ssl::context>> MakeServerTlsContext(
    const TlsFiles& files);

// The end of the validity of the context's certificate (the leaf of the chain), in seconds since
// the Unix epoch; nullopt without a certificate or when OpenSSL cannot read the time.
std::optional<int64_t> CertificateNotAfter(boost::asio::ssl::context& context);

}  // namespace kleaf::http
