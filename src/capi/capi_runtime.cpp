// kiln.h: errors, version, runtime, models and their loading, tokenizer calls.
#include <cmath>
#include <cstring>
#include <string>

#include "capi/guard.h"
#include "core/byte_reader.h"
#include "core/cpu_features.h"
#include "core/utf8.h"
#include "engine/defaults.h"
#include "engine/tool_calls.h"

using namespace kiln;
using namespace kiln::capi;

namespace kiln::capi {
const char* last_error();
}

extern "C" {

KILN_API const char* kiln_last_error(void) { return kiln::capi::last_error(); }

KILN_API const char* kiln_version(void) { return KILN_VERSION_STRING; }

KILN_API int32_t kiln_api_version(void) { return KILN_API_VERSION; }

KILN_API const char* kiln_status_name(kiln_status s) {
  switch (s) {
    case KILN_OK: return "KILN_OK";
    case KILN_E_INVALID_ARGUMENT: return "KILN_E_INVALID_ARGUMENT";
    case KILN_E_IO: return "KILN_E_IO";
    case KILN_E_FORMAT: return "KILN_E_FORMAT";
    case KILN_E_UNSUPPORTED: return "KILN_E_UNSUPPORTED";
    case KILN_E_OUT_OF_MEMORY: return "KILN_E_OUT_OF_MEMORY";
    case KILN_E_BUDGET: return "KILN_E_BUDGET";
    case KILN_E_CANCELLED: return "KILN_E_CANCELLED";
    case KILN_E_CONTEXT_FULL: return "KILN_E_CONTEXT_FULL";
    case KILN_E_REENTRANT: return "KILN_E_REENTRANT";
    case KILN_E_NOT_FOUND: return "KILN_E_NOT_FOUND";
    case KILN_E_INTERNAL: return "KILN_E_INTERNAL";
    case KILN_E_BUFFER_TOO_SMALL: return "KILN_E_BUFFER_TOO_SMALL";
  }
  return "KILN_E_UNKNOWN";
}

KILN_API kiln_runtime_params kiln_runtime_default_params(void) {
  kiln_runtime_params p;
  std::memset(&p, 0, sizeof p);
  p.size = sizeof p;
  p.perf_mode = KILN_PERF_BALANCED;
  return p;
}

KILN_API kiln_status kiln_runtime_create(const kiln_runtime_params* params, kiln_runtime** out) {
  return guarded("kiln_runtime_create", [&] {
    if (out == nullptr) return fail(KILN_E_INVALID_ARGUMENT, "kiln_runtime_create: out is NULL");
    *out = nullptr;
    kiln_runtime_params p = kiln_runtime_default_params();
    if (!read_params(params, p, "kiln_runtime_create")) return KILN_E_INVALID_ARGUMENT;
    if (p.n_threads < 0 || p.n_threads > 256)
      return fail(KILN_E_INVALID_ARGUMENT, "kiln_runtime_create: n_threads " + std::to_string(p.n_threads) +
                                               " is outside 0..256 (0: chosen by perf_mode)");
    if (p.perf_mode < KILN_PERF_BALANCED || p.perf_mode > KILN_PERF_POWER_SAVER)
      return fail(KILN_E_INVALID_ARGUMENT, "kiln_runtime_create: unknown perf_mode " + std::to_string(p.perf_mode));
    if (Status cap = check_cpu_cap(); !cap) return fail(KILN_E_INVALID_ARGUMENT, "kiln_runtime_create: " + cap.message());
    RuntimeOptions o;
    o.n_threads = p.n_threads;
    o.memory_budget = p.memory_budget_bytes;
    const PerfMode modes[] = {PerfMode::kBalanced, PerfMode::kBurst, PerfMode::kSustained, PerfMode::kPowerSaver};
    o.perf_mode = modes[p.perf_mode];
    auto* h = new kiln_runtime{Runtime::create(o)};
    if (p.log) p.log(p.log_user_data, KILN_LOG_INFO, ("kiln: runtime with " + h->rt->thread_plan().summary).c_str());
    register_handle(h, HandleKind::kRuntime);
    *out = h;
    return ok();
  });
}

KILN_API void kiln_runtime_free(kiln_runtime* runtime) {
  if (!unregister_handle(runtime, HandleKind::kRuntime)) return;
  delete runtime;  // models still alive keep the Runtime itself
}

KILN_API kiln_status kiln_runtime_trim(kiln_runtime* runtime, uint64_t* released) {
  return guarded("kiln_runtime_trim", [&] {
    if (!check_handle(runtime, HandleKind::kRuntime, "kiln_runtime_trim")) return KILN_E_INVALID_ARGUMENT;
    const uint64_t n = runtime->rt->trim();
    if (released) *released = n;
    return ok();
  });
}

KILN_API kiln_status kiln_runtime_stats_get(kiln_runtime* runtime, kiln_runtime_stats* out) {
  return guarded("kiln_runtime_stats_get", [&] {
    if (!check_handle(runtime, HandleKind::kRuntime, "kiln_runtime_stats_get")) return KILN_E_INVALID_ARGUMENT;
    if (out == nullptr) return fail(KILN_E_INVALID_ARGUMENT, "kiln_runtime_stats_get: out is NULL");
    const RuntimeStats s = runtime->rt->stats();
    kiln_runtime_stats r;
    std::memset(&r, 0, sizeof r);
    r.size = sizeof r;
    r.memory_budget_bytes = s.budget;
    r.held_bytes = s.held;
    r.peak_held_bytes = s.peak_held;
    r.n_threads = s.n_threads;
    r.n_models = s.n_models;
    r.n_sessions = s.n_sessions;
    r.n_evictions = s.n_evictions;
    r.decode_steps = s.decode_steps;
    r.decode_tokens = s.decode_tokens;
    write_sized(out, r);
    return ok();
  });
}

KILN_API kiln_model_params kiln_model_default_params(void) {
  kiln_model_params p;
  std::memset(&p, 0, sizeof p);
  p.size = sizeof p;
  p.prefault = 1;
  return p;
}

}  // extern "C"

namespace {

Result<ModelLoadOptions> load_options(const char* path, const kiln_model_params& p) {
  ModelLoadOptions o;
  o.priority = p.priority;
  o.open.verify = p.verify != 0;
  o.prefault = p.prefault != 0;
  if (p.tokenizer_path) o.open.tokenizer_path = p.tokenizer_path;
  o.open.cache.enabled = p.no_cache == 0;
  if (p.cache_dir) o.open.cache.dir = p.cache_dir;
  if (p.scheme) {
    if (is_kiln_file(path))
      return invalid_argument(std::string(path) + ": a .kiln is already compiled; its scheme cannot be changed at load "
                              "(scheme must be NULL)");
    KILN_ASSIGN_OR_RETURN(o.open.quant, source_scheme(p.scheme));
  }
  if (p.progress) {
    kiln_progress_fn fn = p.progress;
    void* user = p.progress_user_data;
    o.progress = [fn, user](double f) { return fn(user, static_cast<float>(f)) == 0; };
  }
  return o;
}

kiln_status load(kiln_runtime* runtime, const char* path, const kiln_model_params& p, kiln_model** out,
                 std::shared_ptr<const FileRange> range = nullptr) {
  auto o = load_options(path, p);
  if (!o) return fail(o.status());
  o->open.range = std::move(range);
  auto m = runtime->rt->load_model(path, *o);
  if (!m) return fail(m.status());
  auto* h = new kiln_model{std::move(*m)};
  register_handle(h, HandleKind::kModel);
  *out = h;
  return KILN_OK;
}

}  // namespace

extern "C" {

KILN_API kiln_status kiln_model_load(kiln_runtime* runtime, const char* path, const kiln_model_params* params,
                                     kiln_model** out) {
  return guarded("kiln_model_load", [&] {
    if (out == nullptr) return fail(KILN_E_INVALID_ARGUMENT, "kiln_model_load: out is NULL");
    *out = nullptr;
    if (!check_handle(runtime, HandleKind::kRuntime, "kiln_model_load")) return KILN_E_INVALID_ARGUMENT;
    if (path == nullptr || *path == '\0') return fail(KILN_E_INVALID_ARGUMENT, "kiln_model_load: path is NULL or empty");
    kiln_model_params p = kiln_model_default_params();
    if (!read_params(params, p, "kiln_model_load")) return KILN_E_INVALID_ARGUMENT;
    return load(runtime, path, p, out);
  });
}

KILN_API kiln_status kiln_model_load_fd(kiln_runtime* runtime, int fd, uint64_t offset, uint64_t length,
                                        const kiln_model_params* params, kiln_model** out) {
  return guarded("kiln_model_load_fd", [&] {
    if (out == nullptr) return fail(KILN_E_INVALID_ARGUMENT, "kiln_model_load_fd: out is NULL");
    *out = nullptr;
    if (!check_handle(runtime, HandleKind::kRuntime, "kiln_model_load_fd")) return KILN_E_INVALID_ARGUMENT;
    kiln_model_params p = kiln_model_default_params();
    if (!read_params(params, p, "kiln_model_load_fd")) return KILN_E_INVALID_ARGUMENT;
    if (p.scheme != nullptr || p.tokenizer_path != nullptr)
      return fail(KILN_E_INVALID_ARGUMENT, "kiln_model_load_fd: a .kiln is already compiled; scheme and "
                                           "tokenizer_path must be NULL");
    auto range = FileRange::dup(fd, offset, length);
    if (!range) return fail(range.status());
    const std::string name = (*range)->name();
    return load(runtime, name.c_str(), p, out, std::move(*range));
  });
}

KILN_API kiln_status kiln_model_load_async(kiln_runtime* runtime, const char* path, const kiln_model_params* params,
                                           kiln_load_done_fn done, void* user_data, kiln_job** out) {
  return guarded("kiln_model_load_async", [&] {
    if (out) *out = nullptr;
    if (!check_handle(runtime, HandleKind::kRuntime, "kiln_model_load_async")) return KILN_E_INVALID_ARGUMENT;
    if (path == nullptr || *path == '\0')
      return fail(KILN_E_INVALID_ARGUMENT, "kiln_model_load_async: path is NULL or empty");
    if (done == nullptr) return fail(KILN_E_INVALID_ARGUMENT, "kiln_model_load_async: done is NULL");
    kiln_model_params p = kiln_model_default_params();
    if (!read_params(params, p, "kiln_model_load_async")) return KILN_E_INVALID_ARGUMENT;
    auto* job = new kiln_job();
    std::shared_ptr<kiln::Runtime> rt = runtime->rt;
    std::string where(path);
    start_job(*rt, job, [rt, where, p, done, user_data, job] {
      // The job's own progress hook: the caller's, then the job's cancel flag.
      struct Ctx {
        kiln_progress_fn user;
        void* user_data;
        kiln_job* job;
      } ctx{p.progress, p.progress_user_data, job};
      kiln_model_params q = p;
      q.progress = [](void* c, float f) -> int {
        auto* x = static_cast<Ctx*>(c);
        if (x->user && x->user(x->user_data, f) != 0) return 1;
        return x->job->cancel.load() ? 1 : 0;
      };
      q.progress_user_data = &ctx;
      kiln_runtime tmp{rt};
      kiln_model* model = nullptr;
      const kiln_status st = guarded("kiln_model_load_async", [&] { return load(&tmp, where.c_str(), q, &model); });
      const std::string error = st == KILN_OK ? "" : kiln_last_error();
      done(user_data, st, model, error.c_str());
      return st == KILN_OK ? KILN_OK : fail(st, error);
    }, out);
    return ok();
  });
}

KILN_API void kiln_model_free(kiln_model* model) {
  if (!unregister_handle(model, HandleKind::kModel)) return;
  delete model;  // its sessions keep the RuntimeModel until they go
}

KILN_API kiln_status kiln_model_info_get(const kiln_model* model, kiln_model_info* out) {
  return guarded("kiln_model_info_get", [&] {
    if (!check_handle(model, HandleKind::kModel, "kiln_model_info_get")) return KILN_E_INVALID_ARGUMENT;
    if (out == nullptr) return fail(KILN_E_INVALID_ARGUMENT, "kiln_model_info_get: out is NULL");
    const RuntimeModel& m = *model->model;
    const ModelConfig& c = m.config();
    kiln_model_info r;
    std::memset(&r, 0, sizeof r);
    r.size = sizeof r;
    auto copy = [](char* dst, size_t cap, std::string_view s) {
      const size_t n = std::min(cap - 1, s.size());
      std::memcpy(dst, s.data(), n);
      dst[n] = '\0';
    };
    copy(r.arch, sizeof r.arch, arch_name(c.arch));
    copy(r.kind, sizeof r.kind, m.opened().kind);
    copy(r.scheme, sizeof r.scheme, m.main_scheme());
    r.n_params = m.n_params();
    r.vocab_size = c.vocab_size;
    r.n_layers = c.n_layers;
    r.dim = c.dim;
    r.n_heads = c.n_heads;
    r.n_kv_heads = c.n_kv_heads;
    r.head_dim = c.head_dim;
    r.n_ctx_max = c.max_seq_len;
    r.bos_id = m.tokenizer().bos_id();
    r.eos_id = m.tokenizer().eos_id();
    r.has_chat_template = m.opened().chat.has_value() ? 1 : 0;
    r.weight_bytes = m.weight_bytes();
    r.file_bytes = m.opened().file_bytes;
    r.conformance_top1 = r.conformance_kl = r.conformance_ppl_reference = r.conformance_ppl = NAN;
    if (const auto& c = m.opened().conformance) {
      const ConformanceText& t = c->headline();
      r.has_conformance = 1;
      r.conformance_top1 = t.top1_agreement;
      r.conformance_kl = t.kl;
      r.conformance_ppl_reference = t.ppl_reference;
      r.conformance_ppl = t.ppl_quantized;
    }
    if (m.opened().chat) copy(r.tool_call_format, sizeof r.tool_call_format,
                              tool_call_format_name(tool_call_format_of(m.opened().chat->source)));
    write_sized(out, r);
    return ok();
  });
}

KILN_API kiln_status kiln_tool_call_grammar(const kiln_model* model, const char* tools_json, const char* function_name,
                                            int32_t parallel, char* buf, size_t capacity, size_t* len) {
  return guarded("kiln_tool_call_grammar", [&] {
    const char* what = "kiln_tool_call_grammar";
    if (!check_handle(model, HandleKind::kModel, what)) return KILN_E_INVALID_ARGUMENT;
    if (tools_json == nullptr) return fail(KILN_E_INVALID_ARGUMENT, "kiln_tool_call_grammar: tools_json is NULL");
    if (len == nullptr) return fail(KILN_E_INVALID_ARGUMENT, "kiln_tool_call_grammar: len is NULL");
    if (buf == nullptr && capacity > 0) return fail(KILN_E_INVALID_ARGUMENT, "kiln_tool_call_grammar: buf is NULL");
    const auto& chat = model->model->opened().chat;
    if (!chat) return fail(KILN_E_INVALID_ARGUMENT, "kiln_tool_call_grammar: the model has no chat template");
    const nlohmann::json tools = nlohmann::json::parse(tools_json, nullptr, false);
    if (tools.is_discarded()) return fail(KILN_E_INVALID_ARGUMENT, "kiln_tool_call_grammar: tools_json is not JSON");
    auto g = tool_call_gbnf(tool_call_format_of(chat->source), tools, function_name ? function_name : "", parallel != 0);
    if (!g) return fail(g.status().with_context(what));
    *len = g->size();
    if (g->size() > capacity)
      return fail(KILN_E_BUFFER_TOO_SMALL, "kiln_tool_call_grammar: " + std::to_string(g->size()) +
                                               " bytes do not fit a buffer of " + std::to_string(capacity));
    std::memcpy(buf, g->data(), g->size());
    if (g->size() < capacity) buf[g->size()] = '\0';
    return ok();
  });
}

KILN_API kiln_status kiln_tokenize(const kiln_model* model, const char* text, size_t len, int flags, int32_t* ids,
                                   size_t capacity, size_t* n_ids) {
  return guarded("kiln_tokenize", [&] {
    if (!check_handle(model, HandleKind::kModel, "kiln_tokenize")) return KILN_E_INVALID_ARGUMENT;
    if (text == nullptr && len > 0) return fail(KILN_E_INVALID_ARGUMENT, "kiln_tokenize: text is NULL");
    if (n_ids == nullptr) return fail(KILN_E_INVALID_ARGUMENT, "kiln_tokenize: n_ids is NULL");
    if (ids == nullptr && capacity > 0) return fail(KILN_E_INVALID_ARGUMENT, "kiln_tokenize: ids is NULL");
    const std::string_view t(text ? text : "", len);
    if (!is_valid_utf8(t)) return fail(KILN_E_INVALID_ARGUMENT, "kiln_tokenize: the text is not valid UTF-8");
    const Tokenizer& tok = model->model->tokenizer();
    EncodeOptions eo;
    eo.plain = (flags & KILN_TOKENIZE_PARSE_SPECIAL) == 0;
    auto r = tok.encode(t, eo);
    if (!r) return fail(r.status().with_context("kiln_tokenize"));
    if ((flags & KILN_TOKENIZE_ADD_BOS) && tok.bos_id() >= 0) r->insert(r->begin(), tok.bos_id());
    *n_ids = r->size();
    if (r->size() > capacity)
      return fail(KILN_E_BUFFER_TOO_SMALL, "kiln_tokenize: " + std::to_string(r->size()) +
                                               " ids do not fit a buffer of " + std::to_string(capacity));
    for (size_t i = 0; i < r->size(); ++i) ids[i] = (*r)[i];
    return ok();
  });
}

KILN_API kiln_status kiln_detokenize(const kiln_model* model, const int32_t* ids, size_t n_ids, char* buf,
                                     size_t capacity, size_t* len) {
  return guarded("kiln_detokenize", [&] {
    if (!check_handle(model, HandleKind::kModel, "kiln_detokenize")) return KILN_E_INVALID_ARGUMENT;
    if (ids == nullptr && n_ids > 0) return fail(KILN_E_INVALID_ARGUMENT, "kiln_detokenize: ids is NULL");
    if (len == nullptr) return fail(KILN_E_INVALID_ARGUMENT, "kiln_detokenize: len is NULL");
    if (buf == nullptr && capacity > 0) return fail(KILN_E_INVALID_ARGUMENT, "kiln_detokenize: buf is NULL");
    const Tokenizer& tok = model->model->tokenizer();
    std::vector<int> v(ids, ids + n_ids);
    for (int id : v)
      if (id < 0 || id >= model->model->config().vocab_size)
        return fail(KILN_E_INVALID_ARGUMENT, "kiln_detokenize: token id " + std::to_string(id) +
                                                 " is outside the vocabulary of " +
                                                 std::to_string(model->model->config().vocab_size));
    const std::string text = tok.decode_text(v);
    *len = text.size();
    if (text.size() > capacity)
      return fail(KILN_E_BUFFER_TOO_SMALL, "kiln_detokenize: " + std::to_string(text.size()) +
                                               " bytes do not fit a buffer of " + std::to_string(capacity));
    std::memcpy(buf, text.data(), text.size());
    if (text.size() < capacity) buf[text.size()] = '\0';
    return ok();
  });
}

}  // extern "C"
