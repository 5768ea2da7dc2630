#include "capi/handles.h"

#include <mutex>
#include <string>
#include <unordered_map>

namespace kiln::capi {

namespace {
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::unordered_map<const void*, HandleKind>& registry() {
  static auto* r = new std::unordered_map<const void*, HandleKind>();  // never destroyed: safe at exit
  return *r;
}
thread_local std::string t_error;

const char* kind_name(HandleKind k) {
  switch (k) {
    case HandleKind::kRuntime: return "kiln_runtime";
    case HandleKind::kModel: return "kiln_model";
    case HandleKind::kSession: return "kiln_session";
    case HandleKind::kJob: return "kiln_job";
  }
  return "handle";
}
}  // namespace

const char* last_error() { return t_error.c_str(); }

void register_handle(const void* p, HandleKind kind) {
  std::lock_guard<std::mutex> l(registry_mutex());
  registry()[p] = kind;
}

bool check_handle(const void* p, HandleKind kind, const char* what) {
  if (p == nullptr) {
    fail(KILN_E_INVALID_ARGUMENT, std::string(what) + ": the " + kind_name(kind) + " is NULL");
    return false;
  }
  std::lock_guard<std::mutex> l(registry_mutex());
  auto it = registry().find(p);
  if (it == registry().end() || it->second != kind) {
    t_error = std::string(what) + ": the " + kind_name(kind) + " is not a live handle (already freed, or never created)";
    return false;
  }
  return true;
}

bool unregister_handle(const void* p, HandleKind kind) {
  if (p == nullptr) return false;
  std::lock_guard<std::mutex> l(registry_mutex());
  auto it = registry().find(p);
  if (it == registry().end() || it->second != kind) return false;
  registry().erase(it);
  return true;
}

kiln_status to_c_status(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return KILN_OK;
    case StatusCode::kInvalidArgument: return KILN_E_INVALID_ARGUMENT;
    case StatusCode::kNotFound: return KILN_E_NOT_FOUND;
    case StatusCode::kCorrupt: return KILN_E_FORMAT;
    case StatusCode::kUnsupported: return KILN_E_UNSUPPORTED;
    case StatusCode::kIoError: return KILN_E_IO;
    case StatusCode::kInternal: return KILN_E_INTERNAL;
    case StatusCode::kOutOfMemory: return KILN_E_OUT_OF_MEMORY;
    case StatusCode::kCancelled: return KILN_E_CANCELLED;
    case StatusCode::kContextFull: return KILN_E_CONTEXT_FULL;
    case StatusCode::kBudget: return KILN_E_BUDGET;
    case StatusCode::kReentrant: return KILN_E_REENTRANT;
  }
  return KILN_E_INTERNAL;
}

kiln_status fail(kiln_status code, const std::string& message) {
  t_error = message;
  return code;
}

kiln_status fail(const Status& s) { return fail(to_c_status(s.code()), s.message()); }

}  // namespace kiln::capi
