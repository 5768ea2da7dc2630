#include "engine/first_token.h"

#include <algorithm>

#include "runtime/session.h"

namespace kiln {

Result<FirstToken> first_token(const std::string& path, std::string_view prompt, const FirstTokenOptions& o) {
  FirstToken out;
  KILN_ASSIGN_OR_RETURN(OpenedModel opened, open_model(path, o.open));
  out.t_open = o.clock();
  if (o.after_open) o.after_open();
  KILN_ASSIGN_OR_RETURN(std::vector<int> ids, opened.tokenizer->encode(prompt, opened.tokenizer->bos_id() >= 0));
  const int n_ctx = std::min(opened.model->config().max_seq_len, static_cast<int>(ids.size()) + 64);
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::create(opened.model, n_ctx, o.n_threads, o.kv_dtype));
  out.t_session = o.clock();
  KILN_ASSIGN_OR_RETURN(std::span<const float> logits, session->decode(ids));
  out.token = static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  out.t_first = o.clock();
  out.prompt_tokens = ids.size();
  return out;
}

}  // namespace kiln
