// Session snapshot reader (kiln_session_restore) on arbitrary bytes, against a session of the
// shipped model. Each input is tried as it is, "resealed" (its checksum recomputed, so that
// mutations reach the fields behind it), and laid over a valid snapshot of this model (so that
// they reach the KV copy with the model's identity in place). A restore either fails with a
// status or leaves a session that decodes.
#include <cstdint>
#include <cstring>
#include <vector>

#include "artifact/kiln_file.h"
#include "engine/open_model.h"
#include "runtime/session.h"
#include "runtime/session_snapshot.h"

namespace {

struct Fixture {
  kiln::OpenedModel model;
  std::unique_ptr<kiln::Session> session;
  std::vector<uint8_t> valid;
};

Fixture& fixture() {
  static Fixture* f = [] {
    auto* x = new Fixture();
    auto m = kiln::open_model(KILN_MODELS_DIR "/stories260K/stories260K.bin", kiln::OpenOptions{});
    if (!m) __builtin_trap();
    x->model = std::move(*m);
    x->session = std::move(*kiln::Session::create(x->model.model, 16));
    const std::vector<int> prompt = {1, 403, 407};
    (void)x->session->decode(prompt);
    x->valid = std::move(*kiln::encode_session_snapshot(*x->session, prompt));
    return x;
  }();
  return *f;
}

void reseal(std::vector<uint8_t>& b) {
  if (b.size() < 8) return;
  const uint64_t sum = kiln::kiln_checksum(std::span<const uint8_t>(b).first(b.size() - 8));
  std::memcpy(b.data() + b.size() - 8, &sum, 8);
}

void restore(const std::vector<uint8_t>& b) {
  Fixture& f = fixture();
  auto tokens = kiln::load_session_snapshot_bytes(*f.session, b, "fuzz.session");
  if (tokens && f.session->position() < f.session->n_ctx()) {
    const int next = 5;
    (void)f.session->decode(std::span<const int>(&next, 1));
  }
  f.session->reset();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> b(data, data + size);
  restore(b);
  reseal(b);
  restore(b);
  std::vector<uint8_t> over = fixture().valid;
  for (size_t i = 0; i < size && i + 8 < over.size(); ++i) over[8 + i] ^= data[i];
  reseal(over);
  restore(over);
  return 0;
}
