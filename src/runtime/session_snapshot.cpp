#include "runtime/session_snapshot.h"

#include <cstring>

#include "artifact/kiln_file.h"
#include "core/mapped_file.h"
#include "core/temp_file.h"

namespace kiln {

namespace {
constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'S', 'E', 'S', 'S'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 8 + 4 + 4 + 8 + 4 * 4;

template <typename T>
void put(std::vector<uint8_t>& out, T v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), p, p + sizeof v);
}
template <typename T>
T get(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
}  // namespace

Result<std::vector<uint8_t>> encode_session_snapshot(const Session& s, std::span<const int> tokens) {
  const int n = static_cast<int>(tokens.size());
  if (n > s.position())
    return invalid_argument("a snapshot of " + std::to_string(n) + " tokens from a session at position " +
                            std::to_string(s.position()));
  const ModelConfig& c = s.config();
  std::vector<uint8_t> out;
  try {
    out.reserve(kHeaderBytes + tokens.size() * 4 + s.kv_state_bytes(n) + 8);
  } catch (const std::bad_alloc&) {
    return out_of_memory("no memory for a session snapshot of " + std::to_string(s.kv_state_bytes(n)) + " bytes");
  }
  out.insert(out.end(), kMagic, kMagic + 8);
  put<uint32_t>(out, kVersion);
  put<uint32_t>(out, static_cast<uint32_t>(s.kv_dtype()));
  put<uint64_t>(out, s.model()->identity());
  put<uint32_t>(out, static_cast<uint32_t>(s.n_ctx()));
  put<uint32_t>(out, static_cast<uint32_t>(n));
  put<uint32_t>(out, static_cast<uint32_t>(c.n_layers));
  put<uint32_t>(out, static_cast<uint32_t>(c.kv_dim()));
  for (int t : tokens) put<int32_t>(out, t);
  const size_t at = out.size();
  out.resize(at + s.kv_state_bytes(n));
  s.copy_kv_out(n, out.data() + at);
  put<uint64_t>(out, kiln_checksum(out));
  return out;
}

Status save_session_snapshot(const Session& s, std::span<const int> tokens, const std::string& path) {
  auto bytes = encode_session_snapshot(s, tokens);
  if (!bytes) return bytes.status().with_context(path);
  return write_file_atomically(path, *bytes).with_context("session snapshot");
}

Result<std::vector<int>> load_session_snapshot(Session& s, const std::string& path) {
  KILN_ASSIGN_OR_RETURN(auto file, MappedFile::open(path));
  return load_session_snapshot_bytes(s, file->bytes(), path);
}

Result<std::vector<int>> load_session_snapshot_bytes(Session& s, std::span<const uint8_t> b,
                                                     const std::string& path) {
  auto bad = [&](const std::string& what) { return corrupt(path + ": not a session snapshot of this kind: " + what); };
  if (b.size() < kHeaderBytes + 8 || std::memcmp(b.data(), kMagic, 8) != 0)
    return bad("no KILNSESS header (not a file kiln_session_save wrote, or truncated)");
  const uint8_t* p = b.data() + 8;
  if (get<uint32_t>(p) != kVersion) return bad("version " + std::to_string(get<uint32_t>(p)) + ", this kiln reads 1");
  const uint32_t dtype = get<uint32_t>(p + 4);
  const uint64_t identity = get<uint64_t>(p + 8);
  const uint32_t n_ctx = get<uint32_t>(p + 16), n = get<uint32_t>(p + 20), n_layers = get<uint32_t>(p + 24),
                 kv_dim = get<uint32_t>(p + 28);
  const ModelConfig& c = s.config();
  if (n > n_ctx || n_ctx > (1u << 24) || n_layers != static_cast<uint32_t>(c.n_layers) ||
      kv_dim != static_cast<uint32_t>(c.kv_dim()))
    return bad("its shapes (" + std::to_string(n_layers) + " layers, kv width " + std::to_string(kv_dim) +
               ") are not this model's");
  if (dtype != static_cast<uint32_t>(DType::kF32) && dtype != static_cast<uint32_t>(DType::kF16))
    return bad("KV element type " + std::to_string(dtype));
  const uint64_t kv_bytes = 2ull * n_layers * n * kv_dim * (dtype == static_cast<uint32_t>(DType::kF32) ? 4 : 2);
  const uint64_t need = kHeaderBytes + uint64_t{n} * 4 + kv_bytes + 8;
  if (b.size() != need)
    return bad("it has " + std::to_string(b.size()) + " bytes, its header says " + std::to_string(need) +
               " (truncated or padded)");
  if (kiln_checksum(b.first(b.size() - 8)) != get<uint64_t>(b.data() + b.size() - 8))
    return corrupt(path + ": the session snapshot's checksum does not match (the file is damaged)");
  if (identity != s.model()->identity())
    return invalid_argument(path + ": the session snapshot was saved from another model");
  if (static_cast<int>(n_ctx) != s.n_ctx())
    return invalid_argument(path + ": the snapshot was saved with n_ctx " + std::to_string(n_ctx) +
                            ", this session has " + std::to_string(s.n_ctx()));
  if (dtype != static_cast<uint32_t>(s.kv_dtype()))
    return invalid_argument(path + ": the snapshot's KV cache is " +
                            std::string(dtype == static_cast<uint32_t>(DType::kF32) ? "f32" : "f16") +
                            ", this session's " + std::string(dtype_name(s.kv_dtype())));
  std::vector<int> tokens(n);
  const uint8_t* t = b.data() + kHeaderBytes;
  for (uint32_t i = 0; i < n; ++i) {
    tokens[i] = get<int32_t>(t + 4 * i);
    if (tokens[i] < 0 || tokens[i] >= c.vocab_size) return bad("token id " + std::to_string(tokens[i]) + " outside the vocabulary");
  }
  const size_t kv_at = kHeaderBytes + size_t{n} * 4;
  KILN_RETURN_IF_ERROR(s.copy_kv_in(static_cast<int>(n), b.subspan(kv_at, s.kv_state_bytes(static_cast<int>(n)))));
  return tokens;
}

}  // namespace kiln
