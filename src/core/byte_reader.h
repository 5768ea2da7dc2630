// Bounds-checked little-endian reading from a byte span; every read names its offset on failure.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include "core/status.h"

namespace kiln {

class ByteReader {
 public:
  ByteReader(std::span<const uint8_t> bytes, std::string_view file) : bytes_(bytes), file_(file) {}

  size_t offset() const { return pos_; }
  size_t remaining() const { return bytes_.size() - pos_; }
  size_t size() const { return bytes_.size(); }

  // The error every failed read returns: "file: offset N: what".
  Status error(const std::string& what) const { return error_at(pos_, what); }
  Status error_at(size_t off, const std::string& what) const {
    return corrupt(std::string(file_) + ": offset " + std::to_string(off) + ": " + what);
  }

  template <typename T>
  Result<T> read(std::string_view what) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (remaining() < sizeof(T))
      return error("truncated reading " + std::string(what) + " (" + std::to_string(sizeof(T)) +
                   " bytes needed, " + std::to_string(remaining()) + " left)");
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));  // little-endian hosts only (x86-64, ARM64)
    pos_ += sizeof(T);
    return v;
  }

  Result<std::span<const uint8_t>> read_bytes(uint64_t n, std::string_view what) {
    if (n > remaining())
      return error("truncated reading " + std::string(what) + " (" + std::to_string(n) +
                   " bytes needed, " + std::to_string(remaining()) + " left)");
    auto s = bytes_.subspan(pos_, static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return s;
  }

  Status seek(uint64_t off) {
    if (off > bytes_.size()) return error("seek to " + std::to_string(off) + " past end of file");
    pos_ = static_cast<size_t>(off);
    return Status::ok();
  }

 private:
  std::span<const uint8_t> bytes_;
  std::string_view file_;
  size_t pos_ = 0;
};

}  // namespace kiln
