// kiln serve: an OpenAI-compatible local server (server/), on the C API.
#include <CLI/CLI.hpp>

#include "kiln/kiln.h"
#include "server/server.h"
#include "tools/cli_common.h"

namespace kiln::cli {

namespace {

struct ServeCmd {
  std::vector<std::string> models;
  std::string perf, kv_type = "f32";
  server::ServeOptions o;
  CacheFlags cache;  // --cache-dir, --no-cache
};

int serve(ServeCmd& c) {
  c.o.no_cache = c.cache.off ? 1 : 0;
  c.o.cache_dir = c.cache.dir;
  if (c.models.empty()) c.models.push_back("stories260K=" + default_model_path());
  for (const std::string& m : c.models) {
    const size_t eq = m.find('=');
    server::ModelSpec spec;
    if (eq == std::string::npos) {
      // A bare path: the name is the file or folder name without its extension.
      spec.path = m;
      std::string base = m.substr(m.find_last_of('/') == std::string::npos ? 0 : m.find_last_of('/') + 1);
      if (base.empty()) return usage_error("--model " + m + ": give NAME=PATH");
      spec.name = base.substr(0, base.find('.'));
    } else {
      spec.name = m.substr(0, eq);
      spec.path = m.substr(eq + 1);
    }
    if (spec.name.empty() || spec.path.empty()) return usage_error("--model '" + m + "' must be NAME=PATH");
    for (const auto& other : c.o.models)
      if (other.name == spec.name) return usage_error("--model: the name '" + spec.name + "' is given twice");
    c.o.models.push_back(spec);
  }
  if (!c.perf.empty()) {
    static const char* const kModes[] = {"balanced", "burst", "sustained", "power_saver"};
    int mode = -1;
    for (int i = 0; i < 4; ++i)
      if (c.perf == kModes[i]) mode = i;
    if (mode < 0) return usage_error("--perf must be burst, balanced, sustained or power_saver, not '" + c.perf + "'");
    c.o.perf_mode = mode;  // the kiln_perf_mode values, in that order
  }
  c.o.kv_f16 = c.kv_type == "f16";
  return server::serve(c.o);
}

}  // namespace

void add_serve_command(CLI::App& app, int& exit_code) {
  auto c = std::make_shared<ServeCmd>();
  CLI::App* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server: /v1/chat/completions, /v1/completions, a chat page");
  cmd->add_option("-m,--model", c->models,
                  "NAME=PATH of a .kiln or source model (repeat for several; default: the shipped stories260K)");
  add_cache_flags(cmd, c->cache);
  cmd->add_option("--host", c->o.host, "address to listen on (default: loopback only)");
  cmd->add_option("--port", c->o.port, "port (0: a free one, printed on stderr)")->check(between(0, 65535));
  cmd->add_option("--parallel", c->o.parallel, "sessions (concurrent requests) per model")->check(between(1, 256));
  cmd->add_option("--queue", c->o.queue, "requests that may wait for a slot, per model; beyond: 429")->check(between(0, 4096));
  cmd->add_option("--memory-budget", c->o.memory_budget, "bytes the runtime may hold (0: no budget)")
      ->check(at_least<int64_t>(0));
  cmd->add_option("--api-key", c->o.api_key, "require 'Authorization: Bearer KEY' on /v1, /tokenize, /detokenize");
  cmd->add_option("-c,--ctx", c->o.n_ctx, "context per session (0: the model's, at most 4096)")->check(at_least(0));
  cmd->add_option("-t,--threads", c->o.threads, "worker threads (0: by --perf)")->check(at_least(0));
  cmd->add_option("--perf", c->perf, "burst, balanced, sustained or power_saver");
  cmd->add_option("--max-tokens", c->o.max_tokens, "the largest max_tokens a request may ask for (more: a 400); also the cap of a reply without one")->check(at_least(1));
  cmd->add_option("--max-body", c->o.max_body_bytes, "the largest request body in bytes")->check(at_least(1));
  add_kv_type_flag(cmd, c->kv_type);
  cmd->add_option("--draft", c->o.draft,
                  "a draft model (same vocabulary) for speculative decoding of every request; "
                  "without one a request may ask for prompt lookup ('lookup': N)");
  cmd->add_option("--draft-max", c->o.draft_max, "tokens drafted per step at most (0: 8; a request's 'speculative.n_max' wins)")
      ->check(between(0, 64));
  cmd->callback([c, &exit_code] { exit_code = serve(*c); });
}

}  // namespace kiln::cli
