// Status and Result<T>: errors travel as values, never as exceptions.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace kiln {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // the caller asked for something impossible
  kNotFound,         // a file, tensor or key is missing
  kCorrupt,          // the bytes of a file are malformed
  kUnsupported,      // well-formed, but not something kiln handles (yet)
  kIoError,          // the operating system refused
  kInternal,
  kOutOfMemory,      // an allocation failed
  kCancelled,        // the caller asked to stop (a session's cancel, a load's progress callback)
  kContextFull,      // a session's KV cache has no room for the tokens asked
  kBudget,           // the runtime's memory budget cannot hold what was asked
  kReentrant,        // a session was called from inside its own callback
};

class Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return {}; }
  bool is_ok() const { return code_ == StatusCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // Prefixes the message with a location ("file: place: problem").
  Status with_context(const std::string& where) const {
    if (is_ok()) return *this;
    return {code_, where + ": " + message_};
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status corrupt(std::string m) { return {StatusCode::kCorrupt, std::move(m)}; }
inline Status unsupported(std::string m) { return {StatusCode::kUnsupported, std::move(m)}; }
inline Status not_found(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status invalid_argument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status io_error(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
inline Status out_of_memory(std::string m) { return {StatusCode::kOutOfMemory, std::move(m)}; }
inline Status cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
inline Status context_full(std::string m) { return {StatusCode::kContextFull, std::move(m)}; }
inline Status over_budget(std::string m) { return {StatusCode::kBudget, std::move(m)}; }
inline Status reentrant(std::string m) { return {StatusCode::kReentrant, std::move(m)}; }

template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) { assert(!std::get<Status>(v_).is_ok()); }  // NOLINT

  bool is_ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return is_ok(); }
  const Status& status() const {
    static const Status kOk;
    return is_ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace kiln

#define KILN_CONCAT_INNER(a, b) a##b
#define KILN_CONCAT(a, b) KILN_CONCAT_INNER(a, b)

// Returns the status from the enclosing function when it is an error.
#define KILN_RETURN_IF_ERROR(expr)          \
  do {                                      \
    ::kiln::Status kiln_st_ = (expr);       \
    if (!kiln_st_.is_ok()) return kiln_st_; \
  } while (0)

#define KILN_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.is_ok()) return tmp.status();           \
  lhs = std::move(tmp).value()

// KILN_ASSIGN_OR_RETURN(auto x, f()) declares x from a Result or returns its error.
#define KILN_ASSIGN_OR_RETURN(lhs, expr) \
  KILN_ASSIGN_OR_RETURN_IMPL(KILN_CONCAT(kiln_res_, __LINE__), lhs, expr)
