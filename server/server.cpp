// The routes of kiln serve. Each generation request takes a slot (a session) of its model's pool,
// runs as a GenerationJob and answers as JSON or as an SSE stream; everything else is small.
#include "server/server.h"

#include <httplib.h>
#include <signal.h>

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "kiln/kiln.h"
#include "server/chat_page.h"
#include "server/generation_job.h"
#include "server/metrics.h"
#include "server/openai_format.h"
#include "server/request_parser.h"
#include "server/slot_pool.h"
#include "server/tool_call_parser.h"

namespace kiln::server {

namespace {

using nlohmann::json;

struct ServedModel {
  std::string name;
  kiln_model* model = nullptr;
  kiln_model_info info{};
  int n_ctx = 0;
  int64_t created = 0;
  std::unique_ptr<SlotPool> pool;
  std::string tool_format;  // kiln_model_info.tool_call_format: "" when its template shows none
  kiln_model* draft = nullptr;  // kiln serve --draft, when its vocabulary is this model's
};

// Equal-length compare of every byte, so the time does not tell how much of a guess was right.
bool constant_time_equal(const std::string& a, const std::string& b) {
  const size_t n = std::max(a.size(), b.size());
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

ApiError api_error(int status, std::string message, std::string type, std::string param = {}, std::string code = {}) {
  ApiError e;
  e.status = status;
  e.message = std::move(message);
  e.type = std::move(type);
  e.param = std::move(param);
  e.code = std::move(code);
  return e;
}

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(dump(error_body(e)), "application/json");
}

void send_json(httplib::Response& res, const json& j) { res.set_content(dump(j), "application/json"); }

Usage usage_of(const kiln_generate_result& g) {
  return Usage{g.prompt_tokens,           g.generated_tokens,          g.reused_tokens, g.time_to_first_token_ms,
               g.decode_tokens_per_second, g.drafted_tokens, g.accepted_tokens};
}

// A reply's tool calls for the message, and the chunk deltas a stream sends them as.
struct ToolCallsOut {
  json calls = json::array();
  std::string content;
  // One event as the stream's chunk (null: nothing to send), recording it for the message too.
  json on_event(const ResponseId& id, const ToolCallEvent& e) {
    if (e.kind == ToolCallEvent::kContent) {
      content += e.text;
      return nullptr;  // the caller sends content as a content chunk
    }
    if (e.kind == ToolCallEvent::kCallStart) {
      const std::string call_id = new_tool_call_id();
      calls.push_back({{"id", call_id}, {"type", "function"}, {"function", {{"name", e.text}, {"arguments", ""}}}});
      return tool_call_chunk_body(
          id, {{"index", e.index}, {"id", call_id}, {"type", "function"}, {"function", {{"name", e.text}, {"arguments", ""}}}});
    }
    if (e.index < 0 || static_cast<size_t>(e.index) >= calls.size()) return nullptr;
    calls[e.index]["function"]["arguments"] = calls[e.index]["function"]["arguments"].get<std::string>() + e.text;
    return tool_call_chunk_body(id, {{"index", e.index}, {"function", {{"arguments", e.text}}}});
  }
};

std::string finish_reason(kiln_stop_reason r, int tool_calls = 0) {
  if (r == KILN_STOP_LENGTH || r == KILN_STOP_CONTEXT_FULL) return "length";
  return tool_calls > 0 ? "tool_calls" : "stop";
}

// A failure of the C API, as the HTTP status and error object it means for the client.
ApiError from_status(kiln_status st, const std::string& message, bool chat) {
  switch (st) {
    case KILN_E_CONTEXT_FULL:
      return api_error(400, message, "invalid_request_error", chat ? "messages" : "prompt", "context_length_exceeded");
    case KILN_E_INVALID_ARGUMENT: return api_error(400, message, "invalid_request_error");
    case KILN_E_NOT_FOUND: return api_error(400, message, "invalid_request_error");
    case KILN_E_BUDGET:
    case KILN_E_OUT_OF_MEMORY: return api_error(503, message, "server_error");
    default: return api_error(500, message, "server_error");
  }
}

// What the access log says of the request this connection's thread is answering; the handlers
// fill it in, httplib's logger prints it once the response is written.
struct AccessLog {
  bool begun = false;
  bool deferred = false;  // a stream: its own end prints the line
  std::chrono::steady_clock::time_point t0;
  std::string model;
  int prompt = -1, completion = -1;
};
thread_local AccessLog t_log;

// A name from the client, safe for one log line: printable ASCII but space, at most 64 bytes.
std::string loggable(const std::string& s) {
  std::string out;
  for (unsigned char c : s.substr(0, 64)) {
    if (c > 32 && c < 127) {
      out += static_cast<char>(c);
    } else {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    }
  }
  return s.size() > 64 ? out + "..." : out;
}

// One line per request on stderr: method, path, model, status, tokens, time.
void print_access(const std::string& method, const std::string& path, const AccessLog& a, int status,
                  const char* note) {
  // Appended piece by piece: GCC 12 warns (-Wrestrict, falsely) on "literal" + std::to_string.
  std::string line = "kiln serve: ";
  line.append(loggable(method)).append(" ").append(loggable(path));
  if (!a.model.empty()) line.append(" model=").append(loggable(a.model));
  char num[64];
  std::snprintf(num, sizeof num, " %d", status);
  line.append(num);
  if (a.prompt >= 0) {
    std::snprintf(num, sizeof num, " prompt=%d", a.prompt);
    line.append(num);
  }
  if (a.completion >= 0) {
    std::snprintf(num, sizeof num, " completion=%d", a.completion);
    line.append(num);
  }
  if (note != nullptr && *note != '\0') line.append(" ").append(note);
  const double secs = a.begun ? std::chrono::duration<double>(std::chrono::steady_clock::now() - a.t0).count() : 0.0;
  std::snprintf(num, sizeof num, " %.3f s\n", secs);
  line.append(num);
  std::fputs(line.c_str(), stderr);  // one call: lines of concurrent requests do not interleave
}

// The methods each route answers; another method on one of these paths is a 405.
const char* allowed_methods(const std::string& path) {
  if (path == "/v1/chat/completions" || path == "/v1/completions" || path == "/tokenize" || path == "/detokenize")
    return "POST";
  if (path == "/v1/models" || path == "/health" || path == "/metrics" || path == "/") return "GET, HEAD";
  return nullptr;
}

bool method_allowed(const std::string& allow, const std::string& method) {
  size_t at = 0;
  while (at < allow.size()) {
    const size_t end = std::min(allow.find(',', at), allow.size());
    if (allow.compare(at, end - at, method) == 0) return true;
    at = end + 2;  // ", "
  }
  return false;
}

class Server {
 public:
  explicit Server(const ServeOptions& o) : opt_(o) {}
  ~Server() {
    models_.clear();  // the pools free their sessions first
    for (kiln_model* m : loaded_) kiln_model_free(m);
    if (rt_ != nullptr) kiln_runtime_free(rt_);
  }

  int start();

 private:
  bool load();
  void routes();
  bool authorized(const httplib::Request& req, httplib::Response& res);
  ServedModel* find(const std::string& name);
  ApiError model_not_found(const std::string& name) const;
  // /tokenize and /detokenize: the named model, the first one when unnamed, or nullptr after a 400.
  ServedModel* model_or_error(const std::string& name, httplib::Response& res);
  void generate(const httplib::Request& req, httplib::Response& res, bool chat);
  void tokenize_route(const httplib::Request& req, httplib::Response& res);
  void detokenize(const httplib::Request& req, httplib::Response& res);
  std::string metrics_text();

  ServeOptions opt_;
  kiln_runtime* rt_ = nullptr;
  std::vector<kiln_model*> loaded_;
  std::vector<std::unique_ptr<ServedModel>> models_;
  kiln_model* draft_ = nullptr;  // --draft: in loaded_ too
  Metrics metrics_;
  httplib::Server http_;
};

bool Server::load() {
  kiln_runtime_params rp = kiln_runtime_default_params();
  rp.n_threads = opt_.threads;
  rp.memory_budget_bytes = opt_.memory_budget;
  rp.perf_mode = static_cast<kiln_perf_mode>(opt_.perf_mode);
  if (kiln_runtime_create(&rp, &rt_) != KILN_OK) {
    std::fprintf(stderr, "kiln: error: %s\n", kiln_last_error());
    return false;
  }
  for (const ModelSpec& spec : opt_.models) {
    auto m = std::make_unique<ServedModel>();
    m->name = spec.name;
    kiln_model_params mp = kiln_model_default_params();
    mp.no_cache = opt_.no_cache;
    mp.cache_dir = opt_.cache_dir.empty() ? nullptr : opt_.cache_dir.c_str();
    if (kiln_model_load(rt_, spec.path.c_str(), &mp, &m->model) != KILN_OK) {
      std::fprintf(stderr, "kiln: error: --model %s=%s: %s\n", spec.name.c_str(), spec.path.c_str(), kiln_last_error());
      return false;
    }
    loaded_.push_back(m->model);
    m->info.size = sizeof m->info;
    kiln_model_info_get(m->model, &m->info);
    kiln_session_params sp = kiln_session_default_params();
    // --ctx is at most each model's own maximum, so that one flag serves models of any size.
    sp.n_ctx = opt_.n_ctx > 0 ? std::min(opt_.n_ctx, m->info.n_ctx_max) : 0;
    sp.kv_type = opt_.kv_f16 ? KILN_KV_F16 : KILN_KV_F32;
    std::vector<kiln_session*> sessions;
    for (int i = 0; i < opt_.parallel; ++i) {
      kiln_session* s = nullptr;
      if (kiln_session_create(m->model, &sp, &s) != KILN_OK) {
        std::fprintf(stderr, "kiln: error: --model %s: session %d of --parallel %d: %s\n", spec.name.c_str(), i + 1,
                     opt_.parallel, kiln_last_error());
        for (kiln_session* x : sessions) kiln_session_free(x);
        return false;
      }
      sessions.push_back(s);
    }
    kiln_session_stats ss{};
    ss.size = sizeof ss;
    kiln_session_stats_get(sessions[0], &ss);
    m->n_ctx = ss.n_ctx;
    m->created = new_response_id(false, "").created;
    m->pool = std::make_unique<SlotPool>(std::move(sessions), opt_.queue);
    m->tool_format = m->info.tool_call_format;
    std::fprintf(stderr, "kiln serve: model '%s' (%s, %s, %s) ctx %d, %d slots%s\n", m->name.c_str(), spec.path.c_str(),
                 m->info.arch, m->info.scheme, m->n_ctx, opt_.parallel,
                 m->info.has_chat_template ? ", chat template" : ", no chat template (completions only)");
    models_.push_back(std::move(m));
  }
  if (!opt_.draft.empty()) {
    if (kiln_model_load(rt_, opt_.draft.c_str(), nullptr, &draft_) != KILN_OK) {
      std::fprintf(stderr, "kiln: error: --draft %s: %s\n", opt_.draft.c_str(), kiln_last_error());
      return false;
    }
    loaded_.push_back(draft_);
    kiln_model_info di{};
    di.size = sizeof di;
    kiln_model_info_get(draft_, &di);
    // It drafts for the models of its vocabulary's size (the runtime checks every token at the
    // first request); a draft that fits none is an error.
    std::string names;
    for (auto& m : models_)
      if (m->info.vocab_size == di.vocab_size) {
        m->draft = draft_;
        names += (names.empty() ? "'" : ", '") + m->name + "'";
      }
    if (names.empty()) {
      std::fprintf(stderr, "kiln: error: --draft %s: its vocabulary has %d tokens, no served model's has as many\n",
                   opt_.draft.c_str(), di.vocab_size);
      return false;
    }
    std::fprintf(stderr, "kiln serve: draft model %s (%s, %s) for %s\n", opt_.draft.c_str(), di.arch, di.scheme,
                 names.c_str());
  }
  return true;
}

ServedModel* Server::model_or_error(const std::string& name, httplib::Response& res) {
  if (name.empty()) return models_.front().get();
  t_log.model = name;
  ServedModel* m = find(name);
  if (m == nullptr) send_error(res, model_not_found(name));
  return m;
}

ApiError Server::model_not_found(const std::string& name) const {
  // OpenAI's answer to a model it does not have: 404, model_not_found, naming the model.
  std::string names;
  for (auto& x : models_) names += (names.empty() ? "`" : ", `") + x->name + "`";
  return api_error(404, "The model `" + name + "` does not exist (this server serves " + names + ")",
                   "invalid_request_error", "model", "model_not_found");
}

ServedModel* Server::find(const std::string& name) {
  for (auto& m : models_)
    if (m->name == name) return m.get();
  return nullptr;
}

bool Server::authorized(const httplib::Request& req, httplib::Response& res) {
  if (opt_.api_key.empty()) return true;
  const std::string h = req.get_header_value("Authorization");
  const std::string prefix = "Bearer ";
  const bool ok = h.compare(0, prefix.size(), prefix) == 0 && constant_time_equal(h.substr(prefix.size()), opt_.api_key);
  if (ok) return true;
  send_error(res, api_error(401, h.empty() ? "no API key: send the header 'Authorization: Bearer KEY'"
                                           : "the API key is not valid",
                            "invalid_request_error", "", "invalid_api_key"));
  return false;
}

void Server::generate(const httplib::Request& req, httplib::Response& res, bool chat) {
  ParseLimits limits;
  limits.max_tokens = opt_.max_tokens;
  auto parsed = chat ? parse_chat_request(req.body, limits) : parse_completion_request(req.body, limits);
  if (auto* e = std::get_if<ApiError>(&parsed)) {
    metrics_.record_rejected("", e->status);
    return send_error(res, *e);
  }
  GenerationRequest r = std::get<GenerationRequest>(std::move(parsed));
  t_log.model = r.model;
  ServedModel* m = find(r.model);
  if (m == nullptr) {
    metrics_.record_rejected("", 404);
    return send_error(res, model_not_found(r.model));
  }
  if (chat && !m->info.has_chat_template) {
    metrics_.record_rejected(m->name, 400);
    return send_error(res, api_error(400, "the model '" + m->name + "' has no chat template; use /v1/completions",
                                     "invalid_request_error", "model"));
  }
  // Tool calling: a required call (or a named one) is held to a grammar of the model's call syntax;
  // the reply's calls are parsed out of its text (when the template shows a syntax kiln knows).
  const bool use_tools = chat && !r.tools_json.empty() && r.tool_choice != ToolChoice::kNone;
  JobExtras extras;
  extras.draft = m->draft;
  if (r.draft_max == 0) r.draft_max = opt_.draft_max;
  const bool forced = use_tools && (r.tool_choice == ToolChoice::kRequired || r.tool_choice == ToolChoice::kFunction);
  // tool_choice auto: the reply is free, but a call it starts (hermes' "<tool_call>") is held to the
  // grammar from there, so that its arguments are valid (llama-server's lazy grammar). Not with a
  // response_format, nor with speculation (the runtime takes no grammar with it yet).
  const bool lazy = use_tools && r.tool_choice == ToolChoice::kAuto && m->tool_format == "hermes" &&
                    r.format == ReplyFormat::kText && extras.draft == nullptr && r.lookup == 0;
  if (forced || lazy) {
    if (m->tool_format.empty()) {
      metrics_.record_rejected(m->name, 400);
      return send_error(res, api_error(400,
                                       "the chat template of '" + m->name +
                                           "' shows no tool-call syntax kiln knows (hermes <tool_call>, Llama 3 JSON, "
                                           "Mistral [TOOL_CALLS]), so a tool call cannot be required",
                                       "invalid_request_error", "tool_choice"));
    }
    if (lazy) extras.tool_trigger = "<tool_call>";
    const char* only = r.tool_choice == ToolChoice::kFunction ? r.tool_choice_name.c_str() : nullptr;
    // A named function is one call to it; "required" is one call or more unless parallel_tool_calls is false.
    const int32_t parallel = r.parallel_tool_calls && only == nullptr ? 1 : 0;
    size_t len = 0;
    kiln_status st = kiln_tool_call_grammar(m->model, r.tools_json.c_str(), only, parallel, nullptr, 0, &len);
    if (st == KILN_E_BUFFER_TOO_SMALL) {
      extras.tool_grammar.resize(len + 1);
      st = kiln_tool_call_grammar(m->model, r.tools_json.c_str(), only, parallel, extras.tool_grammar.data(),
                                  extras.tool_grammar.size(), &len);
      extras.tool_grammar.resize(len);
    }
    if (st != KILN_OK) {
      metrics_.record_rejected(m->name, 400);
      return send_error(res, api_error(400, kiln_last_error(), "invalid_request_error", "tools"));
    }
  }
  const std::string tool_format = use_tools ? m->tool_format : std::string();

  std::vector<std::pair<std::string, std::string>> turns;
  for (const ChatMessage& cm : r.messages) turns.emplace_back(cm.role, cm.content + cm.tool_calls);
  const std::string key = chat ? prefix_key_for_chat(turns) : prefix_key_for_prompt(r.prompt);

  const std::optional<int> slot = m->pool->acquire(key);
  if (!slot) {
    metrics_.record_rejected(m->name, 429);
    res.set_header("Retry-After", "1");
    return send_error(res, api_error(429,
                                     "every slot of '" + m->name + "' is busy and its queue of " +
                                         std::to_string(opt_.queue) + " is full; retry later",
                                     "rate_limit_exceeded", "", "rate_limit_exceeded"));
  }
  // One rule for both endpoints: a max_tokens the client gives must fit the context after its
  // prompt (checked once the runtime has counted the prompt, before any text goes out) and
  // --max-tokens (checked by the parser); none given is the rest of the context, at most --max-tokens.
  const int max_tokens = r.max_tokens > 0 ? r.max_tokens : std::min(opt_.max_tokens, m->n_ctx);
  auto job =
      std::make_shared<GenerationJob>(m->pool->session(*slot), r, max_tokens, r.max_tokens > 0 ? m->n_ctx : 0, extras);
  const ResponseId id = new_response_id(chat, m->name);

  // Ends the request: the slot goes back with what its cache now holds, the metrics count it.
  auto finish = [this, m, slot, key, chat, job](const std::string& text, bool client_gone) {
    const kiln_generate_result& g = job->result();
    const bool ok = job->status() == KILN_OK && job->overflow_prompt() < 0;
    std::string held;
    if (ok) held = chat ? key + "\x1f" "assistant\x1e" + text : key + text;
    m->pool->release(*slot, held);
    RequestRecord rec;
    rec.model = m->name;
    rec.ok = ok || client_gone;
    rec.cancelled = client_gone;
    rec.prompt_tokens = g.prompt_tokens;
    rec.reused_tokens = g.reused_tokens;
    rec.generated_tokens = g.generated_tokens;
    rec.ttft_ms = g.time_to_first_token_ms;
    rec.decode_tokens_per_second = g.decode_tokens_per_second;
    if (job->overflow_prompt() >= 0)
      metrics_.record_rejected(m->name, 400);
    else
      metrics_.record(rec);
  };

  job->wait_started();
  if (const int prompt = job->overflow_prompt(); prompt >= 0) {
    std::string t;
    while (job->next(t)) {
    }
    finish("", false);
    t_log.prompt = prompt;
    // OpenAI's wording for a request beyond the context, naming the field that asked.
    const std::string field = r.max_tokens_field;
    return send_error(
        res, api_error(400,
                       "This model's maximum context length is " + std::to_string(m->n_ctx) +
                           " tokens. However, you requested " + std::to_string(prompt + r.max_tokens) + " tokens (" +
                           std::to_string(prompt) + (chat ? " in the messages, " : " in the prompt, ") +
                           std::to_string(r.max_tokens) + " in the completion, '" + field +
                           "'). Please reduce the length of the " + (chat ? "messages" : "prompt") + " or '" +
                           field + "' (at most " + std::to_string(std::max(m->n_ctx - prompt, 0)) + " here).",
                       "invalid_request_error", field, "context_length_exceeded"));
  }
  if (job->finished() && job->status() != KILN_OK) {
    std::string t;
    while (job->next(t)) {
    }
    ApiError e = from_status(job->status(), job->error(), chat);
    // A schema or grammar the runtime refused: the field that gave it.
    if (job->status() == KILN_E_INVALID_ARGUMENT && e.param.empty()) {
      if (!extras.tool_grammar.empty()) e.param = "tools";
      else if (r.format == ReplyFormat::kGrammar) e.param = "grammar";
      else if (r.format != ReplyFormat::kText && job->error().find("json schema") != std::string::npos)
        e.param = "response_format";
    }
    finish("", false);
    return send_error(res, e);
  }

  if (!r.stream) {
    std::string text = r.echo ? r.prompt : std::string(), piece;
    while (job->next(piece)) text += piece;
    if (job->status() != KILN_OK) {
      finish("", false);
      return send_error(res, from_status(job->status(), job->error(), chat));
    }
    const kiln_generate_result& g = job->result();
    finish(r.echo ? text.substr(r.prompt.size()) : text, false);
    t_log.prompt = g.prompt_tokens;
    t_log.completion = g.generated_tokens;
    if (!tool_format.empty()) {
      ToolCallParser parser(tool_format);
      ToolCallsOut out;
      for (const ToolCallEvent& e : parser.feed(text)) out.on_event(id, e);
      for (const ToolCallEvent& e : parser.finish()) out.on_event(id, e);
      return send_json(res, completion_body(id, chat, out.content, finish_reason(g.stop_reason, parser.calls()),
                                            usage_of(g), &out.calls));
    }
    return send_json(res, completion_body(id, chat, text, finish_reason(g.stop_reason),
                                          usage_of(g)));
  }

  // The stream: the provider runs on this connection's thread until the job ends or a write fails.
  struct StreamState {
    std::string text;  // what was sent, for the slot's key
    bool client_gone = false;
    bool done = false;
  };
  auto state = std::make_shared<StreamState>();
  auto parser = tool_format.empty() ? nullptr : std::make_shared<ToolCallParser>(tool_format);
  auto calls = std::make_shared<ToolCallsOut>();
  // The stream's line is printed at its end (the releaser below), after httplib's logger ran.
  t_log.deferred = true;
  const AccessLog log_start = t_log;
  const std::string method = req.method, path = req.path;
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [job, state, id, chat, r, parser, calls](size_t, httplib::DataSink& sink) {
        auto send = [&](const std::string& event) {
          if (state->client_gone) return false;
          if (!sink.is_writable() || !sink.write(event.data(), event.size())) {
            state->client_gone = true;
            job->cancel();
            return false;
          }
          return true;
        };
        const std::string role = "assistant";
        if (chat) {
          if (!send(sse_event(chunk_body(id, chat, &role, "", "")))) return false;
        } else if (r.echo && !send(sse_event(chunk_body(id, chat, nullptr, r.prompt, "")))) {
          return false;
        }
        // With tools, the text goes through the call parser: content as content, calls as deltas.
        auto send_events = [&](const std::vector<ToolCallEvent>& events) {
          for (const ToolCallEvent& e : events) {
            const json c = e.kind == ToolCallEvent::kContent ? chunk_body(id, chat, nullptr, e.text, "")
                                                             : calls->on_event(id, e);
            if (!c.is_null() && !send(sse_event(c))) return false;
          }
          return true;
        };
        std::string piece;
        while (job->next(piece)) {
          state->text += piece;
          if (parser) {
            if (!send_events(parser->feed(piece))) return false;
          } else if (!send(sse_event(chunk_body(id, chat, nullptr, piece, "")))) {
            return false;
          }
        }
        if (parser && !send_events(parser->finish())) return false;
        const kiln_generate_result& g = job->result();
        if (job->status() != KILN_OK) {
          // Headers are gone already: the error travels as an event, as OpenAI's stream does.
          send(sse_event(error_body(from_status(job->status(), job->error(), chat))));
        } else {
          const int n_calls = parser ? parser->calls() : 0;
          if (!send(sse_event(chunk_body(id, chat, nullptr, "", finish_reason(g.stop_reason, n_calls))))) return false;
          if (r.include_usage &&
              !send(sse_event(usage_chunk_body(id, chat, usage_of(g)))))
            return false;
        }
        if (!send("data: [DONE]\n\n")) return false;
        state->done = true;
        sink.done();
        return true;
      },
      [job, state, finish, log_start, method, path](bool) {
        if (!state->done) {
          state->client_gone = true;
          job->cancel();
        }
        std::string rest;
        while (job->next(rest)) {
        }
        finish(state->client_gone ? std::string() : state->text, state->client_gone);
        AccessLog a = log_start;
        a.prompt = job->result().prompt_tokens;
        a.completion = job->result().generated_tokens;
        print_access(method, path, a, 200,
                     state->client_gone ? "client-gone" : job->status() != KILN_OK ? "error-in-stream" : "stream");
      });
}

void Server::tokenize_route(const httplib::Request& req, httplib::Response& res) {
  auto parsed = parse_tokenize_request(req.body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return send_error(res, *e);
  const TokenizeRequest& r = std::get<TokenizeRequest>(parsed);
  ServedModel* m = model_or_error(r.model, res);
  if (m == nullptr) return;
  const int flags = (r.add_special ? KILN_TOKENIZE_ADD_BOS : 0) | (r.parse_special ? KILN_TOKENIZE_PARSE_SPECIAL : 0);
  std::vector<int32_t> ids(r.content.size() + 8);
  size_t n = 0;
  if (kiln_tokenize(m->model, r.content.data(), r.content.size(), flags, ids.data(), ids.size(), &n) != KILN_OK)
    return send_error(res, api_error(400, kiln_last_error(), "invalid_request_error", "content"));
  ids.resize(n);  // (the capacity holds every id: a token is at least one byte, plus BOS/EOS)
  json tokens = json::array();
  for (int32_t id : ids) {
    if (!r.with_pieces) {
      tokens.push_back(id);
      continue;
    }
    char buf[256];
    size_t len = 0;
    kiln_detokenize(m->model, &id, 1, buf, sizeof buf, &len);
    tokens.push_back({{"id", id}, {"piece", std::string(buf, std::min(len, sizeof buf))}});
  }
  send_json(res, {{"tokens", tokens}});
}

void Server::detokenize(const httplib::Request& req, httplib::Response& res) {
  auto parsed = parse_detokenize_request(req.body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return send_error(res, *e);
  const DetokenizeRequest& r = std::get<DetokenizeRequest>(parsed);
  ServedModel* m = model_or_error(r.model, res);
  if (m == nullptr) return;
  for (size_t i = 0; i < r.tokens.size(); ++i)
    if (r.tokens[i] >= m->info.vocab_size)
      return send_error(res, api_error(400,
                                       "tokens[" + std::to_string(i) + "] = " + std::to_string(r.tokens[i]) +
                                           " is outside the vocabulary of " + std::to_string(m->info.vocab_size),
                                       "invalid_request_error", "tokens"));
  size_t len = 0;
  kiln_detokenize(m->model, r.tokens.data(), r.tokens.size(), nullptr, 0, &len);
  std::string text(len, '\0');
  if (kiln_detokenize(m->model, r.tokens.data(), r.tokens.size(), text.data(), text.size(), &len) != KILN_OK)
    return send_error(res, api_error(400, kiln_last_error(), "invalid_request_error", "tokens"));
  text.resize(len);
  send_json(res, {{"content", text}});
}

std::string Server::metrics_text() {
  std::vector<ModelGauges> g;
  for (auto& m : models_) g.push_back(ModelGauges{m->name, m->pool->size(), m->pool->busy(), m->pool->queued()});
  kiln_runtime_stats rs{};
  rs.size = sizeof rs;
  kiln_runtime_stats_get(rt_, &rs);
  return metrics_.prometheus(g, rs);
}

void Server::routes() {
  http_.set_payload_max_length(opt_.max_body_bytes);
  // A thread per connection that can be busy at once: every slot, every queued request, and a
  // few for /health, /metrics and the page while all of those wait.
  size_t threads = 8;
  for (auto& m : models_) threads += static_cast<size_t>(m->pool->size() + opt_.queue);
  http_.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http_.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 413)
      send_error(res, api_error(413, "the request body is larger than this server accepts", "invalid_request_error"));
    else if (res.status == 404)
      send_error(res, api_error(404, "Invalid URL (" + req.method + " " + req.path + ")", "invalid_request_error", "",
                                "not_found"));
  });
  http_.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    t_log = AccessLog{};
    t_log.begun = true;
    t_log.t0 = std::chrono::steady_clock::now();
    const bool guarded = req.path.rfind("/v1/", 0) == 0 || req.path == "/tokenize" || req.path == "/detokenize";
    if (guarded && !authorized(req, res)) return httplib::Server::HandlerResponse::Handled;
    // A known path asked with another method: 405 and the methods it takes (httplib alone says 404).
    if (const char* allow = allowed_methods(req.path); allow != nullptr && !method_allowed(allow, req.method)) {
      res.set_header("Allow", allow);
      send_error(res, api_error(405, "Invalid method for URL (" + req.method + " " + req.path + "): use " + allow,
                                "invalid_request_error", "", "method_not_allowed"));
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  http_.set_logger([](const httplib::Request& req, const httplib::Response& res) {
    if (!t_log.deferred) print_access(req.method, req.path, t_log, res.status, nullptr);
    t_log = AccessLog{};
  });
  http_.Post("/v1/chat/completions", [this](const httplib::Request& q, httplib::Response& s) { generate(q, s, true); });
  http_.Post("/v1/completions", [this](const httplib::Request& q, httplib::Response& s) { generate(q, s, false); });
  http_.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    json data = json::array();
    for (auto& m : models_)
      data.push_back({{"id", m->name},
                      {"object", "model"},
                      {"created", m->created},
                      {"owned_by", "kiln"},
                      {"meta",
                       {{"arch", m->info.arch},
                        {"scheme", m->info.scheme},
                        {"n_params", m->info.n_params},
                        {"n_ctx", m->n_ctx},
                        {"vocab_size", m->info.vocab_size},
                        {"chat_template", m->info.has_chat_template != 0}}}});
    send_json(res, {{"object", "list"}, {"data", data}});
  });
  http_.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    json slots = json::object();
    for (auto& m : models_)
      slots[m->name] = {{"slots", m->pool->size()}, {"busy", m->pool->busy()}, {"queued", m->pool->queued()}};
    send_json(res, {{"status", "ok"}, {"models", slots}});
  });
  http_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_text(), "text/plain; version=0.0.4");
  });
  http_.Post("/tokenize", [this](const httplib::Request& q, httplib::Response& s) { tokenize_route(q, s); });
  http_.Post("/detokenize", [this](const httplib::Request& q, httplib::Response& s) { detokenize(q, s); });
  http_.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(chat_page_html(), "text/html; charset=utf-8");
  });
}

namespace {

// Why binding host:port failed, from the OS (httplib keeps errno to itself): binds a socket of
// the same kind, with the same SO_REUSEADDR, and names the error.
std::string why_cannot_bind(const std::string& host, int port) {
  const std::string where = host + ":" + std::to_string(port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  if (const int e = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res); e != 0)
    return "cannot listen on " + where + ": " + gai_strerror(e);
  int err = 0;
  for (addrinfo* a = res; a != nullptr && err == 0; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    int yes = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0) err = errno;
    close(fd);
  }
  freeaddrinfo(res);
  if (err == EADDRINUSE) return "address " + where + " is in use";
  if (err == EADDRNOTAVAIL) return "cannot listen on " + where + ": not an address of this machine";
  if (err != 0) return "cannot listen on " + where + ": " + std::strerror(err);
  return "cannot listen on " + where;
}

}  // namespace

int Server::start() {
  if (!load()) return 2;
  routes();
  // SO_REUSEADDR alone: httplib's default also sets SO_REUSEPORT, with which a second server on
  // the same port binds too and the kernel splits the requests between two different servers.
  http_.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  int port = opt_.port;
  if (port == 0) {
    port = http_.bind_to_any_port(opt_.host);
    if (port < 0) {
      std::fprintf(stderr, "kiln: error: cannot listen on %s\n", opt_.host.c_str());
      return 2;
    }
  } else if (!http_.bind_to_port(opt_.host, port)) {
    std::fprintf(stderr, "kiln: error: %s\n", why_cannot_bind(opt_.host, port).c_str());
    return 2;
  }
  // SIGINT/SIGTERM stop the server from a thread of their own (httplib's stop() is not
  // async-signal-safe); the signals are blocked in every other thread.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  std::thread waiter([this, set] {
    int sig = 0;
    sigwait(&set, &sig);
    http_.stop();
  });
  waiter.detach();
  std::fprintf(stderr, "kiln serve: listening on http://%s:%d\n", opt_.host.c_str(), port);
  std::fflush(stderr);
  http_.listen_after_bind();
  return 0;
}

}  // namespace

int serve(const ServeOptions& options) {
  // Blocked before any thread starts, so that every thread inherits the mask.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);
  Server s(options);
  return s.start();
}

}  // namespace kiln::server
