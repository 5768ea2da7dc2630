// kiln.h: sessions: create, generate and chat (and their _async forms), the token-level calls,
// cancel, reset, save and restore, stats.
#include <cstddef>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>

#include "capi/guard.h"
#include "core/byte_reader.h"
#include "core/utf8.h"
#include "engine/constrained_output.h"
#include "engine/defaults.h"

using namespace kiln;
using namespace kiln::capi;

namespace {

TurnOptions turn_options(const kiln_generate_params& p) {
  TurnOptions t;
  t.max_tokens = p.max_tokens;
  for (size_t i = 0; i < p.n_stop; ++i)
    if (p.stop[i] != nullptr && p.stop[i][0] != '\0') t.stop.emplace_back(p.stop[i]);
  t.add_bos = p.add_bos < 0 ? -1 : p.add_bos > 0 ? 1 : 0;
  t.parse_special = p.parse_special != 0;
  if (p.on_prefill != nullptr)
    t.on_prefill = [fn = p.on_prefill, user = p.prefill_user_data](int done, int total) {
      return fn(user, done, total) == 0;
    };
  if (p.draft_model != nullptr) t.draft = p.draft_model->model;
  t.speculative.lookup = p.lookup_ngram;
  if (p.draft_max > 0) t.speculative.draft_max = p.draft_max;
  return t;
}

kiln_stop_reason stop_reason(StopReason r) {
  switch (r) {
    case StopReason::kLength: return KILN_STOP_LENGTH;
    case StopReason::kStopToken: return KILN_STOP_EOS;
    case StopReason::kContextFull: return KILN_STOP_CONTEXT_FULL;
    case StopReason::kStopString: return KILN_STOP_STRING;
    case StopReason::kCancelled: return KILN_STOP_CANCELLED;
    case StopReason::kCallback: return KILN_STOP_CALLBACK;
  }
  return KILN_STOP_LENGTH;
}

void fill_result(const GenerationStats& s, kiln_generate_result* out) {
  if (out == nullptr) return;
  kiln_generate_result r;
  std::memset(&r, 0, sizeof r);
  r.size = sizeof r;
  r.stop_reason = stop_reason(s.stop);
  r.prompt_tokens = s.prompt_tokens + s.reused_tokens;
  r.reused_tokens = s.reused_tokens;
  r.generated_tokens = s.generated_tokens;
  r.time_to_first_token_ms = s.first_token_seconds * 1e3;
  r.prefill_tokens_per_second = s.prompt_seconds > 0 ? s.prompt_tokens / s.prompt_seconds : 0.0;
  r.decode_tokens_per_second =
      s.generate_seconds > 0 && s.generated_tokens > 1 ? (s.generated_tokens - 1) / s.generate_seconds : 0.0;
  r.drafted_tokens = s.drafted_tokens;
  r.accepted_tokens = s.accepted_tokens;
  r.target_steps = s.target_steps;
  write_sized(out, r);
}

// Checks the common arguments of generate and chat and reads the params into `turn`.
bool turn_args(kiln_session* session, const kiln_generate_params* params, kiln_generate_params& p, TurnOptions& turn,
               const char* what) {
  if (!check_handle(session, HandleKind::kSession, what)) return false;
  p = kiln_generate_default_params();
  if (!read_params(params, p, what)) return false;
  if (p.max_tokens < 0) {
    fail(KILN_E_INVALID_ARGUMENT, std::string(what) + ": max_tokens " + std::to_string(p.max_tokens) + " is negative");
    return false;
  }
  if (p.n_stop > 0 && p.stop == nullptr) {
    fail(KILN_E_INVALID_ARGUMENT, std::string(what) + ": n_stop is " + std::to_string(p.n_stop) + " but stop is NULL");
    return false;
  }
  if (p.draft_model != nullptr && !check_handle(p.draft_model, HandleKind::kModel, what)) return false;
  if (p.lookup_ngram < 0 || p.draft_max < 0) {
    fail(KILN_E_INVALID_ARGUMENT, std::string(what) + ": lookup_ngram and draft_max must be 0 or more");
    return false;
  }
  turn = turn_options(p);
  if (p.grammar != nullptr && p.json_schema != nullptr) {
    fail(KILN_E_INVALID_ARGUMENT, std::string(what) + ": give grammar or json_schema, not both");
    return false;
  }
  if (p.grammar != nullptr || p.json_schema != nullptr) {
    auto g = p.grammar != nullptr ? grammar_from_gbnf(p.grammar) : grammar_from_json_schema(p.json_schema);
    if (!g) {
      fail(g.status().with_context(what));
      return false;
    }
    turn.grammar = std::move(*g);
  }
  if (p.grammar_trigger != nullptr) {
    if (turn.grammar == nullptr || p.grammar_trigger[0] == '\0') {
      fail(KILN_E_INVALID_ARGUMENT, std::string(what) + (turn.grammar == nullptr ? ": grammar_trigger needs a grammar (or json_schema) it triggers"
                                                                                  : ": grammar_trigger is empty"));
      return false;
    }
    turn.grammar_trigger = p.grammar_trigger;
  }
  return true;
}

PieceSink sink_for(kiln_token_fn fn, void* user) {
  if (fn == nullptr) return [](std::string_view, std::span<const int>) { return true; };
  return [fn, user](std::string_view text, std::span<const int> ids) {
    static_assert(sizeof(int) == sizeof(int32_t));
    return fn(user, text.data(), text.size(), reinterpret_cast<const int32_t*>(ids.data()), ids.size()) == 0;
  };
}

kiln_status finish(const Result<GenerationStats>& r, kiln_generate_result* out, const char* what) {
  if (!r) return fail(r.status().with_context(what));
  fill_result(*r, out);
  if (r->stop == StopReason::kCancelled) return fail(KILN_E_CANCELLED, std::string(what) + ": cancelled");
  return KILN_OK;
}

// The prefill callback came after the 40 bytes an older kiln_generate_params had (64-bit), so its
// `size` leaves it at its default (none).
static_assert(sizeof(void*) != 8 || offsetof(kiln_generate_params, on_prefill) == 40);

// What is wrong with a params struct's sampling fields, or nullptr.
const char* sampler_error(const kiln_sampling_params& p) {
  if (!(p.temperature >= 0)) return "temperature must be 0 (greedy) or more";
  if (!(p.top_p >= 0 && p.top_p <= 1)) return "top_p must be in 0..1";
  if (!(p.min_p >= 0 && p.min_p <= 1)) return "min_p must be in 0..1";
  if (!(p.repeat_penalty > 0)) return "repeat_penalty must be more than 0 (1 is off)";
  // OpenAI's range; NaN fails both comparisons.
  if (!(p.frequency_penalty >= -2 && p.frequency_penalty <= 2)) return "frequency_penalty must be in -2..2 (0 is off)";
  if (!(p.presence_penalty >= -2 && p.presence_penalty <= 2)) return "presence_penalty must be in -2..2 (0 is off)";
  return nullptr;
}

SamplerParams sampler_of(const kiln_sampling_params& p) {
  SamplerParams o;
  o.temperature = p.temperature;
  o.top_k = p.top_k;
  o.top_p = p.top_p;
  o.min_p = p.min_p;
  o.repeat_penalty = p.repeat_penalty;
  o.repeat_last_n = p.repeat_last_n;
  o.frequency_penalty = p.frequency_penalty;
  o.presence_penalty = p.presence_penalty;
  o.seed = resolve_seed(p.seed == KILN_SEED_RANDOM ? std::nullopt : std::optional<uint64_t>(p.seed));
  return o;
}

// The caller's sampling params (NULL: the defaults) with their own size honoured; false (the
// error set) when they are malformed or out of range.
bool read_sampling(const kiln_sampling_params* in, kiln_sampling_params& out, const char* what) {
  out = kiln_sampling_default_params();
  if (!read_params(in, out, what)) return false;
  if (const char* why = sampler_error(out)) {
    fail(KILN_E_INVALID_ARGUMENT, std::string(what) + ": " + why);
    return false;
  }
  return true;
}

// One turn, text or conversation, on the engine's session.
Result<GenerationStats> run_turn(RuntimeSession& s, const std::string* prompt, const nlohmann::ordered_json* messages,
                                 const TurnOptions& turn, const PieceSink& sink,
                                 const nlohmann::ordered_json& tools = nlohmann::ordered_json()) {
  return prompt != nullptr ? s.generate(*prompt, turn, sink) : s.chat(*messages, turn, sink, tools);
}

// A kiln_session_chat_json request: its messages as the templates take them (content a string,
// a tool call's arguments an object) and its tools; false (the error set) when it is malformed.
// (The JSON parser refuses text that is not UTF-8.)
bool read_chat_json(const char* request_json, nlohmann::ordered_json& conv, nlohmann::ordered_json& tools,
                    const char* what) {
  using OJson = nlohmann::ordered_json;
  auto bad = [&](const std::string& m) {
    fail(KILN_E_INVALID_ARGUMENT, std::string(what) + ": " + m);
    return false;
  };
  if (request_json == nullptr) return bad("request_json is NULL");
  const OJson req = OJson::parse(request_json, nullptr, false);
  if (req.is_discarded() || !req.is_object()) return bad("request_json is not a JSON object");
  if (!req.contains("messages") || !req["messages"].is_array() || req["messages"].empty())
    return bad("'messages' must be a non-empty array");
  tools = OJson();
  if (req.contains("tools") && !req["tools"].is_null()) {
    if (!req["tools"].is_array()) return bad("'tools' must be an array");
    if (!req["tools"].empty()) tools = req["tools"];
  }
  conv = OJson::array();
  const OJson& ms = req["messages"];
  for (size_t i = 0; i < ms.size(); ++i) {
    const std::string at = "messages[" + std::to_string(i) + "]";
    const OJson& m = ms[i];
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) return bad(at + ": no role");
    OJson out = OJson::object();
    out["role"] = m["role"];
    if (!m.contains("content") || m["content"].is_null()) out["content"] = "";
    else if (m["content"].is_string()) out["content"] = m["content"];
    else return bad(at + ".content must be a string or null");
    for (const char* key : {"tool_call_id", "name"}) {
      if (!m.contains(key) || m[key].is_null()) continue;
      if (!m[key].is_string()) return bad(at + "." + key + " must be a string");
      out[key] = m[key];
    }
    if (m.contains("tool_calls") && !m["tool_calls"].is_null()) {
      if (!m["tool_calls"].is_array()) return bad(at + ".tool_calls must be an array");
      OJson calls = OJson::array();
      for (size_t k = 0; k < m["tool_calls"].size(); ++k) {
        const std::string cat = at + ".tool_calls[" + std::to_string(k) + "]";
        const OJson& c = m["tool_calls"][k];
        if (!c.is_object() || !c.contains("function") || !c["function"].is_object()) return bad(cat + ": no function");
        const OJson& f = c["function"];
        if (!f.contains("name") || !f["name"].is_string()) return bad(cat + ".function.name must be a string");
        OJson args = OJson::object();
        if (f.contains("arguments") && f["arguments"].is_string()) {
          const std::string& text = f["arguments"].get_ref<const std::string&>();
          args = OJson::parse(text, nullptr, false);
          if (args.is_discarded()) return bad(cat + ".function.arguments is not JSON");
        } else if (f.contains("arguments") && !f["arguments"].is_null()) {
          args = f["arguments"];
        }
        OJson call = {{"type", "function"}, {"function", {{"name", f["name"]}, {"arguments", args}}}};
        if (c.contains("id") && c["id"].is_string()) call["id"] = c["id"];
        calls.push_back(std::move(call));
      }
      out["tool_calls"] = std::move(calls);
    }
    conv.push_back(std::move(out));
  }
  return true;
}

// A kiln_session_chat's messages as the engine takes them; false (the error set) when one is bad.
bool read_messages(const kiln_message* messages, size_t n_messages, nlohmann::ordered_json& conv, const char* what) {
  if (messages == nullptr || n_messages == 0) {
    fail(KILN_E_INVALID_ARGUMENT, std::string(what) + ": no messages");
    return false;
  }
  conv = nlohmann::ordered_json::array();
  for (size_t i = 0; i < n_messages; ++i) {
    const kiln_message& m = messages[i];
    const std::string at = std::string(what) + ": message " + std::to_string(i);
    if (m.role == nullptr || m.content == nullptr) {
      fail(KILN_E_INVALID_ARGUMENT, at + ": role or content is NULL");
      return false;
    }
    if (!is_valid_utf8(m.role) || !is_valid_utf8(m.content)) {
      fail(KILN_E_INVALID_ARGUMENT, at + ": not valid UTF-8");
      return false;
    }
    conv.push_back({{"role", m.role}, {"content", m.content}});
  }
  return true;
}

// A generation on the runtime's job threads: the arguments are copied now, the turn runs later.
kiln_status start_turn(kiln_session* session, std::optional<std::string> prompt, nlohmann::ordered_json messages,
                       const kiln_generate_params& p, TurnOptions turn, kiln_token_fn on_token, void* user_data,
                       kiln_job** out, const char* what, nlohmann::ordered_json tools = nlohmann::ordered_json()) {
  auto* job = new kiln_job();
  job->session = session->session;
  // The job's cancel reaches the turn at its next prefill chunk or token even when it comes before
  // the turn has started (the session's own flag is cleared when a call starts).
  if (turn.on_prefill) turn.on_prefill = [job, f = turn.on_prefill](int d, int t) { return !job->cancel.load() && f(d, t); };
  else turn.on_prefill = [job](int, int) { return !job->cancel.load(); };
  const PieceSink user_sink = sink_for(on_token, user_data);
  PieceSink sink = [job, user_sink](std::string_view text, std::span<const int> ids) {
    return user_sink(text, ids) && !job->cancel.load();
  };
  std::shared_ptr<RuntimeSession> s = session->session;
  kiln_job_done* on_done = p.on_done;
  start_job(*s->model()->runtime(), job,
            [job, s, prompt = std::move(prompt), messages = std::move(messages), turn = std::move(turn),
             sink = std::move(sink), on_done, what, tools = std::move(tools)] {
              const kiln_status st = guarded(what, [&] {
                if (job->cancel.load()) return fail(KILN_E_CANCELLED, std::string(what) + ": cancelled");
                auto r = run_turn(*s, prompt ? &*prompt : nullptr, &messages, turn, sink, tools);
                if (r && job->cancel.load() && r->stop == StopReason::kCallback) r->stop = StopReason::kCancelled;
                job->result.size = sizeof job->result;
                job->has_result = static_cast<bool>(r);
                return finish(r, job->has_result ? &job->result : nullptr, what);
              });
              if (on_done != nullptr && on_done->fn != nullptr) {
                const std::string error = st == KILN_OK ? "" : kiln_last_error();
                on_done->fn(on_done->user_data, st, job->has_result ? &job->result : nullptr, error.c_str());
                if (st != KILN_OK) fail(st, error);  // the job's message, whatever the callback called
              }
              return st;
            },
            out);
  return ok();
}

}  // namespace

extern "C" {

KILN_API kiln_sampling_params kiln_sampling_default_params(void) {
  kiln_sampling_params p;
  std::memset(&p, 0, sizeof p);
  p.size = sizeof p;
  const SamplerParams d;
  p.seed = KILN_SEED_RANDOM;
  p.temperature = d.temperature;
  p.top_k = d.top_k;
  p.top_p = d.top_p;
  p.min_p = d.min_p;
  p.repeat_penalty = d.repeat_penalty;
  p.repeat_last_n = d.repeat_last_n;
  p.frequency_penalty = d.frequency_penalty;
  p.presence_penalty = d.presence_penalty;
  return p;
}

KILN_API kiln_session_params kiln_session_default_params(void) {
  kiln_session_params p;
  std::memset(&p, 0, sizeof p);
  p.size = sizeof p;
  p.n_ctx = 0;
  p.kv_type = KILN_KV_F32;
  p.sampling = kiln_sampling_default_params();
  return p;
}

KILN_API kiln_generate_params kiln_generate_default_params(void) {
  kiln_generate_params p;
  std::memset(&p, 0, sizeof p);
  p.size = sizeof p;
  p.max_tokens = 256;
  p.add_bos = -1;
  p.parse_special = 1;
  return p;
}

KILN_API kiln_status kiln_session_create(kiln_model* model, const kiln_session_params* params, kiln_session** out) {
  return guarded("kiln_session_create", [&] {
    if (out == nullptr) return fail(KILN_E_INVALID_ARGUMENT, "kiln_session_create: out is NULL");
    *out = nullptr;
    if (!check_handle(model, HandleKind::kModel, "kiln_session_create")) return KILN_E_INVALID_ARGUMENT;
    kiln_session_params p = kiln_session_default_params();
    if (!read_params(params, p, "kiln_session_create")) return KILN_E_INVALID_ARGUMENT;
    auto bad = [](const std::string& m) { return fail(KILN_E_INVALID_ARGUMENT, "kiln_session_create: " + m); };
    if (p.n_ctx < 0) return bad("n_ctx " + std::to_string(p.n_ctx) + " is negative (0 takes the default)");
    if (p.kv_type != KILN_KV_F32 && p.kv_type != KILN_KV_F16) return bad("kv_type must be KILN_KV_F32 or KILN_KV_F16");
    kiln_sampling_params sampling;
    if (!read_sampling(&p.sampling, sampling, "kiln_session_create: sampling")) return KILN_E_INVALID_ARGUMENT;
    // The caller's bytes as an integer: an out-of-range value loaded as the enum is undefined.
    std::underlying_type_t<kiln_profiling> level;
    std::memcpy(&level, &p.profiling, sizeof level);
    if (level != KILN_PROFILE_OFF && level != KILN_PROFILE_BASIC && level != KILN_PROFILE_DETAILED)
      return bad("profiling must be KILN_PROFILE_OFF, KILN_PROFILE_BASIC or KILN_PROFILE_DETAILED");
    SessionOptions o;
    o.n_ctx = p.n_ctx;
    o.kv_dtype = p.kv_type == KILN_KV_F16 ? DType::kF16 : DType::kF32;
    o.sampler = sampler_of(sampling);
    o.priority = p.priority;
    o.profiling = p.profiling == KILN_PROFILE_DETAILED ? ProfileLevel::kDetailed
                  : p.profiling == KILN_PROFILE_BASIC  ? ProfileLevel::kBasic
                                                       : ProfileLevel::kOff;
    o.check_numerics = p.check_numerics != 0;
    auto s = model->model->new_session(o);
    if (!s) return fail(s.status().with_context("kiln_session_create"));
    auto* h = new kiln_session{std::move(*s)};
    register_handle(h, HandleKind::kSession);
    *out = h;
    return ok();
  });
}

KILN_API void kiln_session_free(kiln_session* session) {
  if (!unregister_handle(session, HandleKind::kSession)) return;
  delete session;
}

KILN_API kiln_status kiln_session_generate(kiln_session* session, const char* prompt, const kiln_generate_params* params,
                                           kiln_token_fn on_token, void* user_data, kiln_generate_result* out) {
  return guarded("kiln_session_generate", [&] {
    kiln_generate_params p;
    TurnOptions turn;
    if (!turn_args(session, params, p, turn, "kiln_session_generate")) return KILN_E_INVALID_ARGUMENT;
    if (prompt == nullptr) return fail(KILN_E_INVALID_ARGUMENT, "kiln_session_generate: prompt is NULL");
    const std::string text(prompt);
    auto r = run_turn(*session->session, &text, nullptr, turn, sink_for(on_token, user_data));
    return finish(r, out, "kiln_session_generate");
  });
}

KILN_API kiln_status kiln_session_chat(kiln_session* session, const kiln_message* messages, size_t n_messages,
                                       const kiln_generate_params* params, kiln_token_fn on_token, void* user_data,
                                       kiln_generate_result* out) {
  return guarded("kiln_session_chat", [&] {
    kiln_generate_params p;
    TurnOptions turn;
    if (!turn_args(session, params, p, turn, "kiln_session_chat")) return KILN_E_INVALID_ARGUMENT;
    nlohmann::ordered_json conv;
    if (!read_messages(messages, n_messages, conv, "kiln_session_chat")) return KILN_E_INVALID_ARGUMENT;
    auto r = run_turn(*session->session, nullptr, &conv, turn, sink_for(on_token, user_data));
    return finish(r, out, "kiln_session_chat");
  });
}

KILN_API kiln_status kiln_session_generate_async(kiln_session* session, const char* prompt,
                                                 const kiln_generate_params* params, kiln_token_fn on_token,
                                                 void* user_data, kiln_job** out) {
  return guarded("kiln_session_generate_async", [&] {
    if (out == nullptr) return fail(KILN_E_INVALID_ARGUMENT, "kiln_session_generate_async: out is NULL");
    *out = nullptr;
    kiln_generate_params p;
    TurnOptions turn;
    if (!turn_args(session, params, p, turn, "kiln_session_generate_async")) return KILN_E_INVALID_ARGUMENT;
    if (prompt == nullptr) return fail(KILN_E_INVALID_ARGUMENT, "kiln_session_generate_async: prompt is NULL");
    return start_turn(session, std::string(prompt), {}, p, std::move(turn), on_token, user_data, out,
                      "kiln_session_generate_async");
  });
}

KILN_API kiln_status kiln_session_chat_async(kiln_session* session, const kiln_message* messages, size_t n_messages,
                                             const kiln_generate_params* params, kiln_token_fn on_token,
                                             void* user_data, kiln_job** out) {
  return guarded("kiln_session_chat_async", [&] {
    if (out == nullptr) return fail(KILN_E_INVALID_ARGUMENT, "kiln_session_chat_async: out is NULL");
    *out = nullptr;
    kiln_generate_params p;
    TurnOptions turn;
    if (!turn_args(session, params, p, turn, "kiln_session_chat_async")) return KILN_E_INVALID_ARGUMENT;
    nlohmann::ordered_json conv;
    if (!read_messages(messages, n_messages, conv, "kiln_session_chat_async")) return KILN_E_INVALID_ARGUMENT;
    return start_turn(session, std::nullopt, std::move(conv), p, std::move(turn), on_token, user_data, out,
                      "kiln_session_chat_async");
  });
}

KILN_API kiln_status kiln_session_chat_json(kiln_session* session, const char* request_json,
                                            const kiln_generate_params* params, kiln_token_fn on_token, void* user_data,
                                            kiln_generate_result* out) {
  return guarded("kiln_session_chat_json", [&] {
    kiln_generate_params p;
    TurnOptions turn;
    if (!turn_args(session, params, p, turn, "kiln_session_chat_json")) return KILN_E_INVALID_ARGUMENT;
    nlohmann::ordered_json conv, tools;
    if (!read_chat_json(request_json, conv, tools, "kiln_session_chat_json")) return KILN_E_INVALID_ARGUMENT;
    auto r = run_turn(*session->session, nullptr, &conv, turn, sink_for(on_token, user_data), tools);
    return finish(r, out, "kiln_session_chat_json");
  });
}

KILN_API kiln_status kiln_session_chat_json_async(kiln_session* session, const char* request_json,
                                                  const kiln_generate_params* params, kiln_token_fn on_token,
                                                  void* user_data, kiln_job** out) {
  return guarded("kiln_session_chat_json_async", [&] {
    if (out == nullptr) return fail(KILN_E_INVALID_ARGUMENT, "kiln_session_chat_json_async: out is NULL");
    *out = nullptr;
    kiln_generate_params p;
    TurnOptions turn;
    if (!turn_args(session, params, p, turn, "kiln_session_chat_json_async")) return KILN_E_INVALID_ARGUMENT;
    nlohmann::ordered_json conv, tools;
    if (!read_chat_json(request_json, conv, tools, "kiln_session_chat_json_async")) return KILN_E_INVALID_ARGUMENT;
    return start_turn(session, std::nullopt, std::move(conv), p, std::move(turn), on_token, user_data, out,
                      "kiln_session_chat_json_async", std::move(tools));
  });
}

KILN_API kiln_status kiln_session_cancel(kiln_session* session) {
  return guarded("kiln_session_cancel", [&] {
    if (!check_handle(session, HandleKind::kSession, "kiln_session_cancel")) return KILN_E_INVALID_ARGUMENT;
    session->session->cancel();
    return ok();
  });
}

KILN_API kiln_status kiln_session_set_sampling(kiln_session* session, const kiln_sampling_params* params) {
  return guarded("kiln_session_set_sampling", [&] {
    if (!check_handle(session, HandleKind::kSession, "kiln_session_set_sampling")) return KILN_E_INVALID_ARGUMENT;
    kiln_sampling_params p;
    if (!read_sampling(params, p, "kiln_session_set_sampling")) return KILN_E_INVALID_ARGUMENT;
    const Status st = session->session->set_sampler(sampler_of(p));
    return st ? ok() : fail(st.with_context("kiln_session_set_sampling"));
  });
}

KILN_API kiln_status kiln_session_reset(kiln_session* session) {
  return guarded("kiln_session_reset", [&] {
    if (!check_handle(session, HandleKind::kSession, "kiln_session_reset")) return KILN_E_INVALID_ARGUMENT;
    const Status st = session->session->reset();
    return st ? ok() : fail(st.with_context("kiln_session_reset"));
  });
}

KILN_API kiln_status kiln_session_save(kiln_session* session, const char* path) {
  return guarded("kiln_session_save", [&] {
    if (!check_handle(session, HandleKind::kSession, "kiln_session_save")) return KILN_E_INVALID_ARGUMENT;
    if (path == nullptr || *path == '\0') return fail(KILN_E_INVALID_ARGUMENT, "kiln_session_save: path is NULL or empty");
    const Status st = session->session->save(path);
    return st ? ok() : fail(st.with_context("kiln_session_save"));
  });
}

KILN_API kiln_status kiln_session_restore(kiln_session* session, const char* path) {
  return guarded("kiln_session_restore", [&] {
    if (!check_handle(session, HandleKind::kSession, "kiln_session_restore")) return KILN_E_INVALID_ARGUMENT;
    if (path == nullptr || *path == '\0')
      return fail(KILN_E_INVALID_ARGUMENT, "kiln_session_restore: path is NULL or empty");
    const Status st = session->session->restore(path);
    return st ? ok() : fail(st.with_context("kiln_session_restore"));
  });
}

KILN_API kiln_status kiln_session_stats_get(kiln_session* session, kiln_session_stats* out) {
  return guarded("kiln_session_stats_get", [&] {
    if (!check_handle(session, HandleKind::kSession, "kiln_session_stats_get")) return KILN_E_INVALID_ARGUMENT;
    if (out == nullptr) return fail(KILN_E_INVALID_ARGUMENT, "kiln_session_stats_get: out is NULL");
    const SessionState s = session->session->state();
    kiln_session_stats r;
    std::memset(&r, 0, sizeof r);
    r.size = sizeof r;
    r.n_ctx = s.n_ctx;
    r.position = s.position;
    r.reserved_bytes = s.reserved_bytes;
    r.generating = s.generating ? 1 : 0;
    r.evicted = s.evicted ? 1 : 0;
    write_sized(out, r);
    return ok();
  });
}

KILN_API kiln_status kiln_session_profile_json(kiln_session* session, char* buf, size_t capacity, size_t* len) {
  return guarded("kiln_session_profile_json", [&] {
    if (!check_handle(session, HandleKind::kSession, "kiln_session_profile_json")) return KILN_E_INVALID_ARGUMENT;
    if (len == nullptr) return fail(KILN_E_INVALID_ARGUMENT, "kiln_session_profile_json: len is NULL");
    if (buf == nullptr && capacity > 0) return fail(KILN_E_INVALID_ARGUMENT, "kiln_session_profile_json: buf is NULL");
    auto j = session->session->profile_json();
    if (!j) return fail(j.status().with_context("kiln_session_profile_json"));
    *len = j->size();
    if (j->size() > capacity)
      return fail(KILN_E_BUFFER_TOO_SMALL, "kiln_session_profile_json: " + std::to_string(j->size()) +
                                               " bytes do not fit a buffer of " + std::to_string(capacity));
    std::memcpy(buf, j->data(), j->size());
    if (j->size() < capacity) buf[j->size()] = '\0';
    return ok();
  });
}

KILN_API kiln_status kiln_session_decode(kiln_session* session, const int32_t* ids, size_t n_ids) {
  return guarded("kiln_session_decode", [&] {
    if (!check_handle(session, HandleKind::kSession, "kiln_session_decode")) return KILN_E_INVALID_ARGUMENT;
    if (ids == nullptr || n_ids == 0) return fail(KILN_E_INVALID_ARGUMENT, "kiln_session_decode: no ids (NULL or 0)");
    static_assert(sizeof(int) == sizeof(int32_t));
    const Status st = session->session->decode(std::span<const int>(reinterpret_cast<const int*>(ids), n_ids));
    return st ? ok() : fail(st.with_context("kiln_session_decode"));
  });
}

KILN_API kiln_status kiln_session_logits(kiln_session* session, float* out, size_t n) {
  return guarded("kiln_session_logits", [&] {
    if (!check_handle(session, HandleKind::kSession, "kiln_session_logits")) return KILN_E_INVALID_ARGUMENT;
    const size_t vocab = static_cast<size_t>(session->session->model()->config().vocab_size);
    if (n < vocab)
      return fail(KILN_E_BUFFER_TOO_SMALL, "kiln_session_logits: the logits are " + std::to_string(vocab) +
                                               " floats (the vocabulary); the buffer holds " + std::to_string(n));
    if (out == nullptr) return fail(KILN_E_INVALID_ARGUMENT, "kiln_session_logits: out is NULL");
    const Status st = session->session->logits(std::span<float>(out, vocab));
    return st ? ok() : fail(st.with_context("kiln_session_logits"));
  });
}

KILN_API kiln_status kiln_session_n_past(const kiln_session* session, int32_t* out) {
  return guarded("kiln_session_n_past", [&] {
    if (!check_handle(session, HandleKind::kSession, "kiln_session_n_past")) return KILN_E_INVALID_ARGUMENT;
    if (out == nullptr) return fail(KILN_E_INVALID_ARGUMENT, "kiln_session_n_past: out is NULL");
    *out = session->session->n_past();
    return ok();
  });
}

KILN_API kiln_status kiln_session_truncate(kiln_session* session, int32_t n_keep) {
  return guarded("kiln_session_truncate", [&] {
    if (!check_handle(session, HandleKind::kSession, "kiln_session_truncate")) return KILN_E_INVALID_ARGUMENT;
    const Status st = session->session->truncate(n_keep);
    return st ? ok() : fail(st.with_context("kiln_session_truncate"));
  });
}

KILN_API kiln_status kiln_session_sample(kiln_session* session, int32_t* out_id) {
  return guarded("kiln_session_sample", [&] {
    if (!check_handle(session, HandleKind::kSession, "kiln_session_sample")) return KILN_E_INVALID_ARGUMENT;
    if (out_id == nullptr) return fail(KILN_E_INVALID_ARGUMENT, "kiln_session_sample: out_id is NULL");
    auto id = session->session->sample();
    if (!id) return fail(id.status().with_context("kiln_session_sample"));
    *out_id = *id;
    return ok();
  });
}

}  // extern "C"
