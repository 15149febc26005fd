// The http.tls files as the server takes them (http_server.h) and builds its context from
// (server_tls.h). A header of its own so that neither pulls in the other.
#pragma once

#include <string>

namespace kleaf::http {

// HTTPS (http.tls): PEM files, read at Start and again at each ReloadTls. Empty cert_file: plain
// HTTP. client_ca_file: mutual TLS, a client certificate signed by one of its CAs is required.
struct TlsFiles {
  std::string cert_file;
  std::string key_file;
  std::string client_ca_file;
};

}  // namespace kleaf::http
