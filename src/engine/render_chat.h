// `kiln template` behind the front door: a conversation rendered through a model's chat template
// as Hugging Face's apply_chat_template renders it, without running the model.
#pragma once

#include <string>

#include "core/status.h"
#include "template/chat_template.h"

namespace kiln {

// The template is `template_file` when given (the special tokens from `model`, when one is
// given, which may then have no template of its own), else a .kiln's stored template or a source
// model's. `request`'s special tokens are filled in from it.
Result<std::string> render_chat(const std::string& model, const std::string& template_file, ChatRequest request);

}  // namespace kiln
