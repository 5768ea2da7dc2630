#include "engine/render_chat.h"

#include "core/mapped_file.h"
#include "engine/open_model.h"

namespace kiln {

namespace {

Result<ModelChatTemplate> template_of(const std::string& model, const std::string& template_file, bool with_tools) {
  ModelChatTemplate t;
  if (!model.empty() && is_kiln_file(model)) {
    KILN_ASSIGN_OR_RETURN(OpenedModel m, open_model(model, OpenOptions()));
    KILN_ASSIGN_OR_RETURN(t, chat_template_for(m, template_file));
    return t;
  }
  if (!model.empty()) {
    auto from_model = load_model_chat_template(model, with_tools);
    // With a template file the model only lends its special tokens, and may have no template.
    if (!from_model && template_file.empty()) return from_model.status();
    if (from_model) t = std::move(*from_model);
  }
  if (!template_file.empty()) {
    KILN_ASSIGN_OR_RETURN(t.source, read_text_file(template_file));
  }
  return t;
}

}  // namespace

Result<std::string> render_chat(const std::string& model, const std::string& template_file, ChatRequest request) {
  KILN_ASSIGN_OR_RETURN(ModelChatTemplate t, template_of(model, template_file, !request.tools.is_null()));
  request.special_tokens = t.special_tokens;
  KILN_ASSIGN_OR_RETURN(ChatTemplate tpl, ChatTemplate::parse(t.source));
  return tpl.render(request);
}

}  // namespace kiln
