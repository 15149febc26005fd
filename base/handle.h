// One RAII holder for every C library object kleaf owns (librdkafka's, kafka/handle.h; OpenSSL's,
// http/openssl_handle.h): Handle<T, Destroy> is a unique_ptr whose deleter calls the library's
// free function for T, chosen at compile time (no function pointer stored: the holder is the size
// of a pointer). Header-only and free of any library: each user names its own free functions.
#pragma once

#include <memory>

namespace kleaf {

// Calls `Destroy` on a non-null pointer (unique_ptr skips null ones).
template <auto Destroy>
struct Destroyer {
  template <typename T>
  void operator()(T* p) const noexcept {
    Destroy(p);
  }
};

template <typename T, auto Destroy>
using Handle = std::unique_ptr<T, Destroyer<Destroy>>;

}  // namespace kleaf
