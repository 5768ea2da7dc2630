// The cold start's unit, behind the front door: open a model, encode a prompt, make a session just
// long enough, decode the prompt once and take the most likely next token — with the moment each
// stage ended, so that `kiln bench --cold-start` can time process start to first token.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "engine/open_model.h"

namespace kiln {

struct FirstTokenOptions {
  OpenOptions open;
  int n_threads = 1;
  DType kv_dtype = DType::kF32;
  std::function<double()> clock;       // the timestamps' clock (the bench's, shared with its parent)
  std::function<void()> after_open;    // called once the model is open, before the clock runs on
};

struct FirstToken {
  double t_open = 0, t_session = 0, t_first = 0;  // `clock` after each stage
  int token = -1;
  size_t prompt_tokens = 0;
};

Result<FirstToken> first_token(const std::string& path, std::string_view prompt, const FirstTokenOptions& o);

}  // namespace kiln
