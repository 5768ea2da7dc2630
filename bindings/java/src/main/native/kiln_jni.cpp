// The native methods of ai.kiln.Native: each one a thin call of kiln.h. Handles arrive as jlong (the
// Java side zeroes them on close and never passes a freed one; kiln's C API checks them again).
// Options, requests and stats cross as Java objects read and filled field by field by name; enums
// by their C values. Every kiln_* failure becomes a KilnException with the C status and
// kiln_last_error().
//
// Threads: the binding starts none. Async generations run on the runtime's job threads
// (kiln_session_generate_async / kiln_session_chat_async); a job thread is attached to the JVM at
// its first callback and detached when it ends (jni_support.cpp), never per call.
#include <jni.h>

#include <cstring>
#include <string>
#include <vector>

#include <kiln/kiln.h>

#include "jni_support.h"
#include "utf16_stream.h"

using namespace kiln_jni;

namespace {

template <typename T>
T* ptr(jlong h) {
  return reinterpret_cast<T*>(static_cast<intptr_t>(h));
}
jlong handle(const void* p) { return static_cast<jlong>(reinterpret_cast<intptr_t>(p)); }

bool read_byte_arrays(JNIEnv* env, jobjectArray arrays, std::vector<std::string>& out, const char* what) {
  out.clear();
  if (arrays == nullptr) return true;
  const jsize n = env->GetArrayLength(arrays);
  for (jsize i = 0; i < n; ++i) {
    auto a = static_cast<jbyteArray>(env->GetObjectArrayElement(arrays, i));
    std::string s;
    const bool ok = read_bytes(env, a, s, what);
    env->DeleteLocalRef(a);
    if (!ok) return false;
    out.push_back(std::move(s));
  }
  return true;
}

// One generate or chat call's inputs (ai.kiln.Request), copied out of Java before the call runs,
// and kiln's views of them.
struct Turn {
  bool chat = false;
  std::string prompt;
  std::vector<std::string> roles, contents, stop;
  std::string grammar, json_schema, grammar_trigger;
  kiln_generate_params params = kiln_generate_default_params();
  std::vector<const char*> stop_ptrs;
  std::vector<kiln_message> messages;

  bool read(JNIEnv* env, jobject request) {
    if (request == nullptr) {
      throw_error(env, KILN_E_INVALID_ARGUMENT, "the request is null");
      return false;
    }
    Fields f(env, request);
    chat = f.get_boolean("chat") == JNI_TRUE;
    params.max_tokens = f.get_int("maxTokens");
    params.add_bos = f.get_int("addBos");
    params.parse_special = f.get_boolean("parseSpecial") == JNI_TRUE ? 1 : 0;
    params.lookup_ngram = f.get_int("lookupNgram");
    params.draft_max = f.get_int("draftMax");
    params.draft_model = ptr<kiln_model>(f.get_long("draftHandle"));
    if (!f.ok()) return false;
    auto bytes = [&](const char* name, std::string& out, const char* what) {
      auto a = static_cast<jbyteArray>(f.get_object(name, "[B"));
      const bool ok = f.ok() && read_bytes(env, a, out, what);
      if (a != nullptr) env->DeleteLocalRef(a);
      return ok;
    };
    auto arrays = [&](const char* name, std::vector<std::string>& out, const char* what) {
      auto a = static_cast<jobjectArray>(f.get_object(name, "[[B"));
      const bool ok = f.ok() && read_byte_arrays(env, a, out, what);
      if (a != nullptr) env->DeleteLocalRef(a);
      return ok;
    };
    if (!bytes("prompt", prompt, "the prompt") || !arrays("roles", roles, "a message's role") ||
        !arrays("contents", contents, "a message's content") || !arrays("stop", stop, "a stop string"))
      return false;
    // A grammar or schema given (null: none; an empty one is passed on for the C API to refuse).
    auto optional_bytes = [&](const char* name, std::string& out, const char*& param, const char* what) {
      auto a = static_cast<jbyteArray>(f.get_object(name, "[B"));
      if (!f.ok()) return false;
      if (a == nullptr) return true;
      const bool ok = read_bytes(env, a, out, what);
      env->DeleteLocalRef(a);
      param = out.c_str();
      return ok;
    };
    if (!optional_bytes("grammar", grammar, params.grammar, "the grammar") ||
        !optional_bytes("jsonSchema", json_schema, params.json_schema, "the JSON schema") ||
        !optional_bytes("grammarTrigger", grammar_trigger, params.grammar_trigger, "the grammar trigger"))
      return false;
    for (const std::string& s : stop) stop_ptrs.push_back(s.c_str());
    params.stop = stop_ptrs.empty() ? nullptr : stop_ptrs.data();
    params.n_stop = stop_ptrs.size();
    for (size_t i = 0; i < roles.size() && i < contents.size(); ++i)
      messages.push_back({roles[i].c_str(), contents[i].c_str()});
    return true;
  }
};

// The blocking call's sink: the reply's UTF-8, converted once at the end.
int collect(void* user, const char* text, size_t len, const int32_t*, size_t) {
  static_cast<std::string*>(user)->append(text, len);
  return 0;
}

// One async call, from kiln_session_*_async until its on_done: the TokenSink (a global reference)
// and the UTF-16 stream its pieces go through. Freed at the end of on_done, the job's last callback
// (kiln reads nothing of its kiln_job_done after fn returns).
struct AsyncCall {
  jobject sink = nullptr;
  Utf16Stream stream;
  std::u16string buf;
  kiln_job_done done{};

  // The pending UTF-16 to TokenSink.token: false when the sink refuses (cancelled, listener threw).
  bool deliver(JNIEnv* env) {
    if (buf.empty()) return true;
    jstring s = env->NewString(reinterpret_cast<const jchar*>(buf.data()), static_cast<jsize>(buf.size()));
    buf.clear();
    if (s == nullptr) {
      clear_exception(env);
      return false;
    }
    const jboolean go = env->CallBooleanMethod(sink, refs().sink_token, s);
    env->DeleteLocalRef(s);
    if (clear_exception(env)) return false;
    return go == JNI_TRUE;
  }
};

// On a job thread: each piece to TokenSink.token as UTF-16 from whole characters only (kiln already
// sends whole ones; the stream holds back a split tail regardless). The thread stays attached and
// never returns to Java, so each callback has its own local frame.
int on_async_token(void* user, const char* text, size_t len, const int32_t*, size_t) {
  auto* a = static_cast<AsyncCall*>(user);
  JNIEnv* env = env_for_native_thread();
  if (env == nullptr) return 1;
  a->stream.push(std::string_view(text, len), a->buf);
  if (env->PushLocalFrame(8) != 0) {
    clear_exception(env);
    return 1;
  }
  const bool go = a->deliver(env);
  env->PopLocalFrame(nullptr);
  return go ? 0 : 1;
}

// On the job thread, after the last token: the held tail, then TokenSink.finish; frees the call.
void on_async_done(void* user, kiln_status status, const kiln_generate_result* result, const char* error) {
  auto* a = static_cast<AsyncCall*>(user);
  JNIEnv* env = env_for_native_thread();
  if (env == nullptr) {
    delete a;  // its global reference cannot be deleted without a JNIEnv: the JVM is going away
    return;
  }
  if (env->PushLocalFrame(16) == 0) {
    a->stream.finish(a->buf);
    a->deliver(env);
    jstring msg = new_string(env, error != nullptr ? error : "");
    jobject stats = result != nullptr ? new_stats(env, *result) : nullptr;
    if (!clear_exception(env)) env->CallVoidMethod(a->sink, refs().sink_finish, static_cast<jint>(status), msg, stats);
    clear_exception(env);
    env->PopLocalFrame(nullptr);
  } else {
    clear_exception(env);
  }
  env->DeleteGlobalRef(a->sink);
  delete a;
}

// LoadSink on kiln's loading thread (attached there once, detached when it ends).
int on_load_progress(void* user, float fraction) {
  JNIEnv* env = env_for_native_thread();
  if (env == nullptr) return 0;
  const jboolean go = env->CallBooleanMethod(static_cast<jobject>(user), refs().load_progress, fraction);
  if (clear_exception(env)) return 1;
  return go == JNI_TRUE ? 0 : 1;
}

void on_load_done(void* user, kiln_status status, kiln_model* model, const char* error) {
  auto sink = static_cast<jobject>(user);
  JNIEnv* env = env_for_native_thread();
  if (env == nullptr) {
    kiln_model_free(model);
    return;
  }
  jstring msg = new_string(env, error != nullptr ? error : "");
  if (!clear_exception(env)) env->CallVoidMethod(sink, refs().load_done, static_cast<jint>(status), handle(model), msg);
  clear_exception(env);
  if (msg != nullptr) env->DeleteLocalRef(msg);
  env->DeleteGlobalRef(sink);
}

bool check(JNIEnv* env, kiln_status st) {
  if (st == KILN_OK) return true;
  throw_status(env, st);
  return false;
}

}  // namespace

extern "C" {

JNIEXPORT jint JNICALL JNI_OnLoad(JavaVM* vm, void*) {
  JNIEnv* env = nullptr;
  if (vm->GetEnv(reinterpret_cast<void**>(&env), JNI_VERSION_1_6) != JNI_OK) return JNI_ERR;
  set_vm(vm);
  if (!init_refs(env)) return JNI_ERR;
  return JNI_VERSION_1_6;
}

JNIEXPORT jstring JNICALL Java_ai_kiln_Native_version(JNIEnv* env, jclass) { return new_string(env, kiln_version()); }

JNIEXPORT jint JNICALL Java_ai_kiln_Native_apiVersion(JNIEnv*, jclass) { return kiln_api_version(); }

JNIEXPORT jstring JNICALL Java_ai_kiln_Native_statusName(JNIEnv* env, jclass, jint status) {
  return new_string(env, kiln_status_name(static_cast<kiln_status>(status)));
}

// ---- options: the C defaults into the Java object, the Java object into the C struct, by field ----

JNIEXPORT void JNICALL Java_ai_kiln_Native_runtimeDefaults(JNIEnv* env, jclass, jobject o) {
  const kiln_runtime_params p = kiln_runtime_default_params();
  Fields f(env, o);
  f.set_int("threads", p.n_threads);
  f.set_long("memoryBudgetBytes", static_cast<jlong>(p.memory_budget_bytes));
  f.set_enum("perfMode", "Lai/kiln/PerfMode;", refs().perf_mode, refs().perf_mode_of, p.perf_mode);
}

JNIEXPORT void JNICALL Java_ai_kiln_Native_modelDefaults(JNIEnv* env, jclass, jobject o) {
  const kiln_model_params p = kiln_model_default_params();
  Fields f(env, o);
  f.set_int("priority", p.priority);
  f.set_boolean("verify", p.verify != 0);
  f.set_boolean("prefault", p.prefault != 0);
  f.set_boolean("noCache", p.no_cache != 0);
}

JNIEXPORT void JNICALL Java_ai_kiln_Native_sessionDefaults(JNIEnv* env, jclass, jobject o) {
  const kiln_session_params p = kiln_session_default_params();
  Fields f(env, o);
  f.set_int("nCtx", p.n_ctx);
  f.set_enum("kvType", "Lai/kiln/KvType;", refs().kv_type, refs().kv_type_of, p.kv_type);
  f.set_int("priority", p.priority);
  // Its sampling: SessionOptions' own SamplingOptions, filled by samplingDefaults.
}

JNIEXPORT void JNICALL Java_ai_kiln_Native_samplingDefaults(JNIEnv* env, jclass, jobject o) {
  const kiln_sampling_params q = kiln_sampling_default_params();
  Fields f(env, o);
  f.set_long("seed", static_cast<jlong>(q.seed));
  f.set_float("temperature", q.temperature);
  f.set_int("topK", q.top_k);
  f.set_float("topP", q.top_p);
  f.set_float("minP", q.min_p);
  f.set_float("repeatPenalty", q.repeat_penalty);
  f.set_int("repeatLastN", q.repeat_last_n);
  f.set_float("frequencyPenalty", q.frequency_penalty);
  f.set_float("presencePenalty", q.presence_penalty);
}

JNIEXPORT void JNICALL Java_ai_kiln_Native_generateDefaults(JNIEnv* env, jclass, jobject o) {
  const kiln_generate_params p = kiln_generate_default_params();
  Fields f(env, o);
  f.set_int("maxTokens", p.max_tokens);
  f.set_int("addBos", p.add_bos);
  f.set_boolean("parseSpecial", p.parse_special != 0);
}

JNIEXPORT jlong JNICALL Java_ai_kiln_Native_runtimeCreate(JNIEnv* env, jclass, jobject o) {
  kiln_runtime_params p = kiln_runtime_default_params();
  jint perf = 0;
  {
    Fields f(env, o);
    p.n_threads = f.get_int("threads");
    p.memory_budget_bytes = static_cast<uint64_t>(f.get_long("memoryBudgetBytes"));
    if (!f.get_enum("perfMode", "Lai/kiln/PerfMode;", perf)) return 0;
  }
  p.perf_mode = static_cast<kiln_perf_mode>(perf);
  kiln_runtime* rt = nullptr;
  if (!check(env, kiln_runtime_create(&p, &rt))) return 0;
  return handle(rt);
}

JNIEXPORT void JNICALL Java_ai_kiln_Native_runtimeFree(JNIEnv*, jclass, jlong rt) { kiln_runtime_free(ptr<kiln_runtime>(rt)); }

JNIEXPORT jlong JNICALL Java_ai_kiln_Native_runtimeTrim(JNIEnv* env, jclass, jlong rt) {
  uint64_t released = 0;
  if (!check(env, kiln_runtime_trim(ptr<kiln_runtime>(rt), &released))) return 0;
  return static_cast<jlong>(released);
}

JNIEXPORT jobject JNICALL Java_ai_kiln_Native_runtimeStats(JNIEnv* env, jclass, jlong rt) {
  kiln_runtime_stats s{};
  s.size = sizeof s;
  if (!check(env, kiln_runtime_stats_get(ptr<kiln_runtime>(rt), &s))) return nullptr;
  jobject o = new_blank(env, refs().runtime_stats);
  if (o == nullptr) return nullptr;
  Fields f(env, o);
  f.set_long("memoryBudgetBytes", static_cast<jlong>(s.memory_budget_bytes));
  f.set_long("heldBytes", static_cast<jlong>(s.held_bytes));
  f.set_long("peakHeldBytes", static_cast<jlong>(s.peak_held_bytes));
  f.set_int("nThreads", s.n_threads);
  f.set_int("nModels", s.n_models);
  f.set_int("nSessions", s.n_sessions);
  f.set_int("nEvictions", s.n_evictions);
  f.set_long("decodeSteps", static_cast<jlong>(s.decode_steps));
  f.set_long("decodeTokens", static_cast<jlong>(s.decode_tokens));
  return o;
}

JNIEXPORT jlong JNICALL Java_ai_kiln_Native_modelLoad(JNIEnv* env, jclass, jlong rt, jstring path, jobject o,
                                                      jobject sink) {
  std::string p, scheme, tokenizer, cache_dir;
  kiln_model_params mp = kiln_model_default_params();
  {
    Fields f(env, o);
    mp.priority = f.get_int("priority");
    mp.verify = f.get_boolean("verify") ? 1 : 0;
    mp.prefault = f.get_boolean("prefault") ? 1 : 0;
    auto s = static_cast<jstring>(f.get_object("scheme", "Ljava/lang/String;"));
    auto t = static_cast<jstring>(f.get_object("tokenizerPath", "Ljava/lang/String;"));
    mp.no_cache = f.get_boolean("noCache") ? 1 : 0;
    auto c = static_cast<jstring>(f.get_object("cacheDir", "Ljava/lang/String;"));
    if (!f.ok() || !read_string(env, path, p, "the model path") || !read_string(env, s, scheme, "the scheme") ||
        !read_string(env, t, tokenizer, "the tokenizer path") || !read_string(env, c, cache_dir, "the cache folder"))
      return 0;
    mp.scheme = s != nullptr ? scheme.c_str() : nullptr;
    mp.tokenizer_path = t != nullptr ? tokenizer.c_str() : nullptr;
    mp.cache_dir = c != nullptr ? cache_dir.c_str() : nullptr;
  }
  if (sink == nullptr) {
    kiln_model* m = nullptr;
    if (!check(env, kiln_model_load(ptr<kiln_runtime>(rt), p.c_str(), &mp, &m))) return 0;
    return handle(m);
  }
  // Async: the sink's progress and done run on kiln's loading thread; done ends the job, which
  // frees itself (cancel goes through progress returning false, at the same points kiln_job_cancel would).
  jobject global = env->NewGlobalRef(sink);
  mp.progress = on_load_progress;
  mp.progress_user_data = global;
  const kiln_status st = kiln_model_load_async(ptr<kiln_runtime>(rt), p.c_str(), &mp, on_load_done, global, nullptr);
  if (st != KILN_OK) {
    env->DeleteGlobalRef(global);
    throw_status(env, st);
  }
  return 0;
}

JNIEXPORT jlong JNICALL Java_ai_kiln_Native_modelLoadFd(JNIEnv* env, jclass, jlong rt, jint fd, jlong offset,
                                                        jlong length, jobject o) {
  kiln_model_params mp = kiln_model_default_params();
  {
    Fields f(env, o);
    mp.priority = f.get_int("priority");
    mp.verify = f.get_boolean("verify") ? 1 : 0;
    mp.prefault = f.get_boolean("prefault") ? 1 : 0;
    if (!f.ok()) return 0;
  }
  if (offset < 0 || length < 0) {
    throw_error(env, KILN_E_INVALID_ARGUMENT, "loadFromFd: offset " + std::to_string(offset) + " and length " +
                                                  std::to_string(length) + " must not be negative");
    return 0;
  }
  kiln_model* m = nullptr;
  if (!check(env, kiln_model_load_fd(ptr<kiln_runtime>(rt), fd, static_cast<uint64_t>(offset),
                                     static_cast<uint64_t>(length), &mp, &m)))
    return 0;
  return handle(m);
}

JNIEXPORT void JNICALL Java_ai_kiln_Native_modelFree(JNIEnv*, jclass, jlong m) { kiln_model_free(ptr<kiln_model>(m)); }

JNIEXPORT jobject JNICALL Java_ai_kiln_Native_modelInfo(JNIEnv* env, jclass, jlong m) {
  kiln_model_info info{};
  info.size = sizeof info;
  if (!check(env, kiln_model_info_get(ptr<kiln_model>(m), &info))) return nullptr;
  jobject o = new_blank(env, refs().model_info);
  if (o == nullptr) return nullptr;
  Fields f(env, o);
  f.set_string("arch", std::string_view(info.arch, strnlen(info.arch, sizeof info.arch)));
  f.set_string("kind", std::string_view(info.kind, strnlen(info.kind, sizeof info.kind)));
  f.set_string("scheme", std::string_view(info.scheme, strnlen(info.scheme, sizeof info.scheme)));
  f.set_long("nParams", info.n_params);
  f.set_int("vocabSize", info.vocab_size);
  f.set_int("nLayers", info.n_layers);
  f.set_int("dim", info.dim);
  f.set_int("nHeads", info.n_heads);
  f.set_int("nKvHeads", info.n_kv_heads);
  f.set_int("headDim", info.head_dim);
  f.set_int("nCtxMax", info.n_ctx_max);
  f.set_int("bosId", info.bos_id);
  f.set_int("eosId", info.eos_id);
  f.set_boolean("hasChatTemplate", info.has_chat_template != 0);
  f.set_long("weightBytes", static_cast<jlong>(info.weight_bytes));
  f.set_long("fileBytes", static_cast<jlong>(info.file_bytes));
  return o;
}

JNIEXPORT jintArray JNICALL Java_ai_kiln_Native_tokenize(JNIEnv* env, jclass, jlong m, jbyteArray text,
                                                         jboolean add_bos, jboolean parse_special) {
  std::string t;
  if (!read_bytes(env, text, t, "the text")) return nullptr;
  const int flags = (add_bos ? KILN_TOKENIZE_ADD_BOS : 0) | (parse_special ? KILN_TOKENIZE_PARSE_SPECIAL : 0);
  auto* model = ptr<kiln_model>(m);
  std::vector<int32_t> ids(t.size() + 8);  // a guess; kiln says what it needs when that is short
  size_t n = 0;
  kiln_status st = kiln_tokenize(model, t.data(), t.size(), flags, ids.data(), ids.size(), &n);
  if (st == KILN_E_BUFFER_TOO_SMALL) {
    ids.resize(n);
    st = kiln_tokenize(model, t.data(), t.size(), flags, ids.data(), ids.size(), &n);
  }
  if (!check(env, st)) return nullptr;
  jintArray out = env->NewIntArray(static_cast<jsize>(n));
  if (out != nullptr) env->SetIntArrayRegion(out, 0, static_cast<jsize>(n), reinterpret_cast<const jint*>(ids.data()));
  return out;
}

JNIEXPORT jstring JNICALL Java_ai_kiln_Native_detokenize(JNIEnv* env, jclass, jlong m, jintArray ids) {
  if (ids == nullptr) {
    throw_error(env, KILN_E_INVALID_ARGUMENT, "detokenize: the ids are null");
    return nullptr;
  }
  std::vector<int32_t> v(static_cast<size_t>(env->GetArrayLength(ids)));
  env->GetIntArrayRegion(ids, 0, static_cast<jsize>(v.size()), reinterpret_cast<jint*>(v.data()));
  auto* model = ptr<kiln_model>(m);
  std::string text(v.size() * 4 + 16, '\0');
  size_t len = 0;
  kiln_status st = kiln_detokenize(model, v.data(), v.size(), text.data(), text.size(), &len);
  if (st == KILN_E_BUFFER_TOO_SMALL) {
    text.resize(len);
    st = kiln_detokenize(model, v.data(), v.size(), text.data(), text.size(), &len);
  }
  if (!check(env, st)) return nullptr;
  text.resize(len);
  return new_string(env, text);
}

namespace {
// A SamplingOptions into kiln_sampling_params, by field; false (KilnException pending) when it is null.
bool read_sampling(JNIEnv* env, jobject o, kiln_sampling_params& q) {
  q = kiln_sampling_default_params();
  if (o == nullptr) {
    throw_error(env, KILN_E_INVALID_ARGUMENT, "the SamplingOptions are null");
    return false;
  }
  Fields f(env, o);
  q.seed = static_cast<uint64_t>(f.get_long("seed"));
  q.temperature = f.get_float("temperature");
  q.top_k = f.get_int("topK");
  q.top_p = f.get_float("topP");
  q.min_p = f.get_float("minP");
  q.repeat_penalty = f.get_float("repeatPenalty");
  q.repeat_last_n = f.get_int("repeatLastN");
  q.frequency_penalty = f.get_float("frequencyPenalty");
  q.presence_penalty = f.get_float("presencePenalty");
  return f.ok();
}
}  // namespace

// ---- sessions -----------------------------------------------------------------------------

JNIEXPORT jlong JNICALL Java_ai_kiln_Native_sessionCreate(JNIEnv* env, jclass, jlong m, jobject o) {
  kiln_session_params p = kiln_session_default_params();
  {
    Fields f(env, o);
    jint kv = 0;
    p.n_ctx = f.get_int("nCtx");
    p.priority = f.get_int("priority");
    if (!f.get_enum("kvType", "Lai/kiln/KvType;", kv)) return 0;
    p.kv_type = static_cast<kiln_kv_type>(kv);
    jobject sampling = f.get_object("sampling", "Lai/kiln/SamplingOptions;");
    const bool ok = f.ok() && read_sampling(env, sampling, p.sampling);
    if (sampling != nullptr) env->DeleteLocalRef(sampling);
    if (!ok) return 0;
  }
  kiln_session* s = nullptr;
  if (!check(env, kiln_session_create(ptr<kiln_model>(m), &p, &s))) return 0;
  return handle(s);
}

JNIEXPORT void JNICALL Java_ai_kiln_Native_sessionFree(JNIEnv*, jclass, jlong s) {
  kiln_session_free(ptr<kiln_session>(s));
}

// Blocking: the reply as one String; the call's GenerationStats into request.stats.
JNIEXPORT jstring JNICALL Java_ai_kiln_Native_sessionRun(JNIEnv* env, jclass, jlong h, jobject request) {
  Turn turn;
  if (!turn.read(env, request)) return nullptr;
  auto* s = ptr<kiln_session>(h);
  std::string text;
  kiln_generate_result r{};
  r.size = sizeof r;
  const kiln_status st =
      turn.chat ? kiln_session_chat(s, turn.messages.data(), turn.messages.size(), &turn.params, collect, &text, &r)
                : kiln_session_generate(s, turn.prompt.c_str(), &turn.params, collect, &text, &r);
  if (!check(env, st)) return nullptr;
  jobject stats = new_stats(env, r);
  if (stats == nullptr) return nullptr;
  {
    Fields f(env, request);
    f.set_object("stats", "Lai/kiln/GenerationStats;", stats);
  }
  env->DeleteLocalRef(stats);
  return new_string(env, text);
}

// Async: starts the call on one of the runtime's job threads and returns its kiln_job; the sink's
// token() and finish() are called there. Free the job with jobFree (from finish is fine).
JNIEXPORT jlong JNICALL Java_ai_kiln_Native_sessionStartAsync(JNIEnv* env, jclass, jlong h, jobject request,
                                                              jobject sink) {
  Turn turn;
  if (!turn.read(env, request)) return 0;
  auto* a = new AsyncCall();
  a->sink = env->NewGlobalRef(sink);
  if (a->sink == nullptr) {
    delete a;
    return 0;
  }
  a->done.fn = on_async_done;
  a->done.user_data = a;
  turn.params.on_done = &a->done;
  auto* s = ptr<kiln_session>(h);
  kiln_job* job = nullptr;
  // The strings, messages and params are copied before the call returns.
  const kiln_status st =
      turn.chat ? kiln_session_chat_async(s, turn.messages.data(), turn.messages.size(), &turn.params, on_async_token, a, &job)
                : kiln_session_generate_async(s, turn.prompt.c_str(), &turn.params, on_async_token, a, &job);
  if (st != KILN_OK) {
    env->DeleteGlobalRef(a->sink);
    delete a;
    throw_status(env, st);
    return 0;
  }
  return handle(job);
}

JNIEXPORT void JNICALL Java_ai_kiln_Native_jobCancel(JNIEnv*, jclass, jlong job) { kiln_job_cancel(ptr<kiln_job>(job)); }

JNIEXPORT void JNICALL Java_ai_kiln_Native_jobFree(JNIEnv*, jclass, jlong job) { kiln_job_free(ptr<kiln_job>(job)); }

JNIEXPORT void JNICALL Java_ai_kiln_Native_sessionCancel(JNIEnv*, jclass, jlong h) {
  kiln_session_cancel(ptr<kiln_session>(h));
}

JNIEXPORT void JNICALL Java_ai_kiln_Native_sessionSetSampling(JNIEnv* env, jclass, jlong h, jobject o) {
  kiln_sampling_params q;
  if (!read_sampling(env, o, q)) return;
  check(env, kiln_session_set_sampling(ptr<kiln_session>(h), &q));
}

JNIEXPORT void JNICALL Java_ai_kiln_Native_sessionReset(JNIEnv* env, jclass, jlong h) {
  check(env, kiln_session_reset(ptr<kiln_session>(h)));
}

JNIEXPORT void JNICALL Java_ai_kiln_Native_sessionSave(JNIEnv* env, jclass, jlong h, jstring path) {
  std::string p;
  if (!read_string(env, path, p, "the path")) return;
  check(env, kiln_session_save(ptr<kiln_session>(h), p.c_str()));
}

JNIEXPORT void JNICALL Java_ai_kiln_Native_sessionRestore(JNIEnv* env, jclass, jlong h, jstring path) {
  std::string p;
  if (!read_string(env, path, p, "the path")) return;
  check(env, kiln_session_restore(ptr<kiln_session>(h), p.c_str()));
}

JNIEXPORT jobject JNICALL Java_ai_kiln_Native_sessionStats(JNIEnv* env, jclass, jlong h) {
  kiln_session_stats s{};
  s.size = sizeof s;
  if (!check(env, kiln_session_stats_get(ptr<kiln_session>(h), &s))) return nullptr;
  jobject o = new_blank(env, refs().session_stats);
  if (o == nullptr) return nullptr;
  Fields f(env, o);
  f.set_int("nCtx", s.n_ctx);
  f.set_int("position", s.position);
  f.set_long("reservedBytes", static_cast<jlong>(s.reserved_bytes));
  f.set_boolean("generating", s.generating != 0);
  f.set_boolean("evicted", s.evicted != 0);
  return o;
}

// ---- token level --------------------------------------------------------------------------

JNIEXPORT void JNICALL Java_ai_kiln_Native_sessionDecode(JNIEnv* env, jclass, jlong h, jintArray ids) {
  if (ids == nullptr) return throw_error(env, KILN_E_INVALID_ARGUMENT, "decode: the ids are null");
  const jsize n = env->GetArrayLength(ids);
  std::vector<int32_t> v(static_cast<size_t>(n));
  static_assert(sizeof(jint) == sizeof(int32_t));
  env->GetIntArrayRegion(ids, 0, n, reinterpret_cast<jint*>(v.data()));
  check(env, kiln_session_decode(ptr<kiln_session>(h), v.data(), v.size()));
}

// Copies the last decode's logits into the first n floats of `out` (n below the vocabulary's size is
// KILN_E_BUFFER_TOO_SMALL, from kiln).
JNIEXPORT void JNICALL Java_ai_kiln_Native_sessionLogits(JNIEnv* env, jclass, jlong h, jfloatArray out, jint n) {
  if (out == nullptr || n < 0 || n > env->GetArrayLength(out))
    return throw_error(env, KILN_E_INVALID_ARGUMENT, "logits: no array, or n outside it");
  thread_local std::vector<float> buf;
  buf.resize(static_cast<size_t>(n));
  if (!check(env, kiln_session_logits(ptr<kiln_session>(h), buf.data(), buf.size()))) return;
  env->SetFloatArrayRegion(out, 0, n, buf.data());
}

JNIEXPORT jint JNICALL Java_ai_kiln_Native_sessionNPast(JNIEnv* env, jclass, jlong h) {
  int32_t n = 0;
  if (!check(env, kiln_session_n_past(ptr<kiln_session>(h), &n))) return 0;
  return n;
}

JNIEXPORT void JNICALL Java_ai_kiln_Native_sessionTruncate(JNIEnv* env, jclass, jlong h, jint n_keep) {
  check(env, kiln_session_truncate(ptr<kiln_session>(h), n_keep));
}

JNIEXPORT jint JNICALL Java_ai_kiln_Native_sessionSample(JNIEnv* env, jclass, jlong h) {
  int32_t id = 0;
  if (!check(env, kiln_session_sample(ptr<kiln_session>(h), &id))) return 0;
  return id;
}

}  // extern "C"
