// The OpenSSL objects kleaf owns, each held by base/handle.h's Handle<T, Destroy> with OpenSSL's
// free function for T (the same holder as librdkafka's objects). Header-only: whoever includes it
// links OpenSSL already (kleaf_http_tls, the tests' TLS clients).
#pragma once

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "base/handle.h"

namespace kleaf::http {

// A list of certificate names and the names in it (sk_X509_NAME_pop_free is a macro: a function
// is needed for a Handle).
inline void FreeX509NameList(STACK_OF(X509_NAME) * names) {
  sk_X509_NAME_pop_free(names, X509_NAME_free);
}

// OPENSSL_free is a macro too (it passes the caller's file and line).
inline void FreeOpenSslString(char* s) { OPENSSL_free(s); }

using BioHandle = Handle<BIO, BIO_free>;
using X509Handle = Handle<X509, X509_free>;
using X509NameListHandle = Handle<STACK_OF(X509_NAME), FreeX509NameList>;
using SslCtxHandle = Handle<SSL_CTX, SSL_CTX_free>;
using SslHandle = Handle<SSL, SSL_free>;
using BignumHandle = Handle<BIGNUM, BN_free>;
using OpenSslStringHandle = Handle<char, FreeOpenSslString>;

}  // namespace kleaf::http
