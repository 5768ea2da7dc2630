// One generation call's speculative decoding on a RuntimeSession: the draft model's session
// (made once per session, held for the call) or prompt lookup, and the Speculator the generation
// loop runs (runtime/speculative.h).
#pragma once

#include <optional>

#include "engine/runtime.h"
#include "runtime/speculative.h"

namespace kiln {

struct SpeculativeTurn {
  SpeculativeTurn() = default;
  SpeculativeTurn(const SpeculativeTurn&) = delete;
  SpeculativeTurn& operator=(const SpeculativeTurn&) = delete;
  ~SpeculativeTurn();

  // Sets up what `turn` asks for on `session` (resident, its call entered): nothing when it asks
  // for no speculation; a draft model of another vocabulary is refused, naming the first token
  // that differs.
  Status begin(RuntimeSession& session, const TurnOptions& turn);
  // The generation loop's speculator; null without speculation.
  Speculator* speculator() { return spec_ ? &*spec_ : nullptr; }

 private:
  RuntimeSession* draft_ = nullptr;  // entered by begin(), left by the destructor
  std::optional<Speculator> spec_;
};

}  // namespace kiln
