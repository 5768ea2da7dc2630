// Every exported function runs its body through guarded(): no C++ exception crosses the C edge
// (an allocation failure is KILN_E_OUT_OF_MEMORY, anything else KILN_E_INTERNAL).
#pragma once

#include <cstring>
#include <new>
#include <string>

#include "capi/handles.h"

namespace kiln::capi {

template <typename F>
kiln_status guarded(const char* what, F&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return fail(KILN_E_OUT_OF_MEMORY, std::string(what) + ": out of memory");
  } catch (const std::exception& e) {
    return fail(KILN_E_INTERNAL, std::string(what) + ": internal error: " + e.what());
  } catch (...) {
    return fail(KILN_E_INTERNAL, std::string(what) + ": internal error");
  }
}

// A params struct's fields the caller knows: `size` says how many bytes it filled. Those beyond
// keep their defaults (a caller built against an older kiln.h); a size too small for the first
// field is refused.
template <typename T>
bool read_params(const T* in, T& out, const char* what) {
  if (in == nullptr) return true;
  // (in->size) in parentheses: `in->size <` reads to g++ as a template's opening bracket.
  if ((in->size) < sizeof(size_t) || in->size > (1u << 16)) {
    fail(KILN_E_INVALID_ARGUMENT, std::string(what) + ": params.size is " + std::to_string(in->size) +
                                      "; fill the struct with its *_default_params() first");
    return false;
  }
  const size_t n = (in->size) < sizeof(T) ? in->size : sizeof(T);
  std::memcpy(static_cast<void*>(&out), in, n);
  out.size = sizeof(T);
  return true;
}

// Writes `r` into `out` as far as the caller's struct reaches: out->size says how many bytes it
// allocated (an older kiln.h knows fewer fields); a size too small or unset takes the whole struct.
template <typename T>
void write_sized(T* out, const T& r) {
  const size_t n = out->size >= sizeof(size_t) && out->size < sizeof(T) ? out->size : sizeof(T);
  std::memcpy(static_cast<void*>(out), &r, n);
}

}  // namespace kiln::capi
