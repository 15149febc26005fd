// KLEAF_CLIENT_API marks what libkleaf_client.so exports: the API of these public headers. The
// library is compiled with hidden visibility, so its internals stay out of its exports.
#pragma once

#define KLEAF_CLIENT_API __attribute__((visibility("default")))
