// The native methods of ai.kiln.Native: each one a thin call of kiln.h. Handles arrive as jlong (the
// Java side zeroes them on close and never passes a freed one; kiln's C API checks them again).
// Every kiln_* failure becomes a KilnException with the C status and kiln_last_error().
#include <jni.h>

#include <cstring>
#include <string>
#include <vector>

#include <kiln/kiln.h>

#include "jni_support.h"
#include "session_box.h"
#include "utf16_stream.h"

using namespace kiln_jni;

namespace {

template <typename T>
T* ptr(jlong h) {
  return reinterpret_cast<T*>(static_cast<intptr_t>(h));
}
jlong handle(const void* p) { return static_cast<jlong>(reinterpret_cast<intptr_t>(p)); }

jint float_bits(float f) {
  jint i;
  std::memcpy(&i, &f, sizeof i);
  return i;
}

jlongArray long_array(JNIEnv* env, const std::vector<jlong>& v) {
  jlongArray a = env->NewLongArray(static_cast<jsize>(v.size()));
  if (a != nullptr) env->SetLongArrayRegion(a, 0, static_cast<jsize>(v.size()), v.data());
  return a;
}

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

bool read_turn(JNIEnv* env, jboolean chat, jbyteArray prompt, jobjectArray roles, jobjectArray contents, jint max_tokens,
               jobjectArray stop, jint add_bos, jint parse_special, Turn& turn) {
  turn.chat = chat;
  if (!read_bytes(env, prompt, turn.prompt, "the prompt")) return false;
  if (!read_byte_arrays(env, roles, turn.roles, "a message's role")) return false;
  if (!read_byte_arrays(env, contents, turn.contents, "a message's content")) return false;
  if (!read_byte_arrays(env, stop, turn.stop, "a stop string")) return false;
  turn.params.max_tokens = max_tokens;
  turn.params.add_bos = add_bos;
  turn.params.parse_special = parse_special;
  return true;
}

// The blocking call's sink: the reply's UTF-8, converted once at the end.
int collect(void* user, const char* text, size_t len, const int32_t*, size_t) {
  static_cast<std::string*>(user)->append(text, len);
  return 0;
}

// An async call's sink: each piece to TokenSink.token on the worker thread, as UTF-16 from whole
// characters only (kiln already sends whole ones; the stream holds back a split tail regardless).
struct AsyncSink {
  JNIEnv* env;
  jobject sink;
  Utf16Stream stream;
  std::u16string buf;
  bool deliver() {
    if (buf.empty()) return true;
    jstring s = env->NewString(reinterpret_cast<const jchar*>(buf.data()), static_cast<jsize>(buf.size()));
    buf.clear();
    if (s == nullptr) {
      clear_exception(env);
      return false;
    }
    const jboolean go = env->CallBooleanMethod(sink, refs().sink_token, s);
    env->DeleteLocalRef(s);  // one local reference per token, released at once
    if (clear_exception(env)) return false;
    return go == JNI_TRUE;
  }
};

int on_async_token(void* user, const char* text, size_t len, const int32_t*, size_t) {
  auto* a = static_cast<AsyncSink*>(user);
  a->stream.push(std::string_view(text, len), a->buf);
  return a->deliver() ? 0 : 1;
}

void finish(JNIEnv* env, jobject sink, kiln_status st, const std::string& message, const kiln_generate_result* r) {
  jstring msg = new_string(env, message);
  jobject stats = r != nullptr ? new_stats(env, *r) : nullptr;
  if (!clear_exception(env)) env->CallVoidMethod(sink, refs().sink_finish, static_cast<jint>(st), msg, stats);
  clear_exception(env);
  if (stats != nullptr) env->DeleteLocalRef(stats);
  if (msg != nullptr) env->DeleteLocalRef(msg);
}

void run_async(JNIEnv* env, SessionBox* box, const Turn& turn, jobject sink, int64_t call) {
  if (box->closing()) return finish(env, sink, KILN_E_CANCELLED, "the session was closed", nullptr);
  const jboolean go = env->CallBooleanMethod(sink, refs().sink_begin);
  if (clear_exception(env) || go != JNI_TRUE) return finish(env, sink, KILN_E_CANCELLED, "cancelled before it started", nullptr);
  const std::lock_guard<std::recursive_mutex> lock(box->use());
  AsyncSink a{env, sink, {}, {}};
  kiln_generate_result r{};
  r.size = sizeof r;
  box->set_running(call);
  const kiln_status st = run_turn(box->session(), turn, on_async_token, &a, &r);
  box->set_running(0);
  const std::string message = st == KILN_OK ? "" : kiln_last_error();
  a.stream.finish(a.buf);
  a.deliver();
  const bool has_stats = st == KILN_OK || st == KILN_E_CANCELLED;
  finish(env, sink, st, message, has_stats ? &r : nullptr);
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

JNIEXPORT jlongArray JNICALL Java_ai_kiln_Native_runtimeDefaults(JNIEnv* env, jclass) {
  const kiln_runtime_params p = kiln_runtime_default_params();
  return long_array(env, {p.n_threads, static_cast<jlong>(p.memory_budget_bytes), p.perf_mode});
}

JNIEXPORT jlongArray JNICALL Java_ai_kiln_Native_modelDefaults(JNIEnv* env, jclass) {
  const kiln_model_params p = kiln_model_default_params();
  return long_array(env, {p.priority, p.verify, p.prefault});
}

JNIEXPORT jlongArray JNICALL Java_ai_kiln_Native_sessionDefaults(JNIEnv* env, jclass) {
  const kiln_session_params p = kiln_session_default_params();
  return long_array(env, {p.n_ctx, p.kv_type, static_cast<jlong>(p.seed), float_bits(p.temperature), p.top_k,
                          float_bits(p.top_p), float_bits(p.min_p), float_bits(p.repeat_penalty), p.repeat_last_n,
                          p.priority});
}

JNIEXPORT jlongArray JNICALL Java_ai_kiln_Native_generateDefaults(JNIEnv* env, jclass) {
  const kiln_generate_params p = kiln_generate_default_params();
  return long_array(env, {p.max_tokens, p.add_bos, p.parse_special});
}

JNIEXPORT jlong JNICALL Java_ai_kiln_Native_runtimeCreate(JNIEnv* env, jclass, jint threads, jlong budget, jint perf) {
  kiln_runtime_params p = kiln_runtime_default_params();
  p.n_threads = threads;
  p.memory_budget_bytes = static_cast<uint64_t>(budget);
  p.perf_mode = static_cast<kiln_perf_mode>(perf);
  kiln_runtime* rt = nullptr;
  const kiln_status st = kiln_runtime_create(&p, &rt);
  if (st != KILN_OK) throw_status(env, st);
  return handle(rt);
}

JNIEXPORT void JNICALL Java_ai_kiln_Native_runtimeFree(JNIEnv*, jclass, jlong rt) { kiln_runtime_free(ptr<kiln_runtime>(rt)); }

JNIEXPORT jlong JNICALL Java_ai_kiln_Native_runtimeTrim(JNIEnv* env, jclass, jlong rt) {
  uint64_t released = 0;
  const kiln_status st = kiln_runtime_trim(ptr<kiln_runtime>(rt), &released);
  if (st != KILN_OK) throw_status(env, st);
  return static_cast<jlong>(released);
}

JNIEXPORT jlongArray JNICALL Java_ai_kiln_Native_runtimeStats(JNIEnv* env, jclass, jlong rt) {
  kiln_runtime_stats s{};
  s.size = sizeof s;
  const kiln_status st = kiln_runtime_stats_get(ptr<kiln_runtime>(rt), &s);
  if (st != KILN_OK) {
    throw_status(env, st);
    return nullptr;
  }
  return long_array(env, {static_cast<jlong>(s.memory_budget_bytes), static_cast<jlong>(s.held_bytes),
                          static_cast<jlong>(s.peak_held_bytes), s.n_threads, s.n_models, s.n_sessions, s.n_evictions,
                          static_cast<jlong>(s.decode_steps), static_cast<jlong>(s.decode_tokens)});
}

JNIEXPORT jlong JNICALL Java_ai_kiln_Native_modelLoad(JNIEnv* env, jclass, jlong rt, jbyteArray path, jint priority,
                                                      jint verify, jbyteArray scheme, jbyteArray tokenizer, jint prefault,
                                                      jobject sink) {
  std::string p, s, t;
  if (!read_bytes(env, path, p, "the model path") || !read_bytes(env, scheme, s, "the scheme") ||
      !read_bytes(env, tokenizer, t, "the tokenizer path"))
    return 0;
  kiln_model_params mp = kiln_model_default_params();
  mp.priority = priority;
  mp.verify = verify;
  mp.scheme = scheme != nullptr ? s.c_str() : nullptr;
  mp.tokenizer_path = tokenizer != nullptr ? t.c_str() : nullptr;
  mp.prefault = prefault;
  if (sink == nullptr) {
    kiln_model* m = nullptr;
    const kiln_status st = kiln_model_load(ptr<kiln_runtime>(rt), p.c_str(), &mp, &m);
    if (st != KILN_OK) throw_status(env, st);
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

JNIEXPORT void JNICALL Java_ai_kiln_Native_modelFree(JNIEnv*, jclass, jlong m) { kiln_model_free(ptr<kiln_model>(m)); }

JNIEXPORT jobjectArray JNICALL Java_ai_kiln_Native_modelInfo(JNIEnv* env, jclass, jlong m, jlongArray numbers) {
  kiln_model_info_t info{};
  info.size = sizeof info;
  const kiln_status st = kiln_model_info(ptr<kiln_model>(m), &info);
  if (st != KILN_OK) {
    throw_status(env, st);
    return nullptr;
  }
  const jlong n[] = {info.n_params,   info.vocab_size, info.n_layers, info.dim,     info.n_heads,
                     info.n_kv_heads, info.head_dim,   info.n_ctx_max, info.bos_id, info.eos_id,
                     info.has_chat_template, static_cast<jlong>(info.weight_bytes), static_cast<jlong>(info.file_bytes)};
  env->SetLongArrayRegion(numbers, 0, static_cast<jsize>(std::size(n)), n);
  jclass string_class = env->FindClass("java/lang/String");
  jobjectArray names = env->NewObjectArray(3, string_class, nullptr);
  env->DeleteLocalRef(string_class);
  if (names == nullptr) return nullptr;
  const char* texts[] = {info.arch, info.kind, info.scheme};
  for (jsize i = 0; i < 3; ++i) {
    jstring s = new_string(env, std::string_view(texts[i], strnlen(texts[i], 32)));
    env->SetObjectArrayElement(names, i, s);
    env->DeleteLocalRef(s);
  }
  return names;
}

JNIEXPORT jlong JNICALL Java_ai_kiln_Native_sessionCreate(JNIEnv* env, jclass, jlong m, jint n_ctx, jint kv_type,
                                                          jlong seed, jfloat temperature, jint top_k, jfloat top_p,
                                                          jfloat min_p, jfloat repeat_penalty, jint repeat_last_n,
                                                          jint priority) {
  kiln_session_params p = kiln_session_default_params();
  p.n_ctx = n_ctx;
  p.kv_type = static_cast<kiln_kv_type>(kv_type);
  p.seed = static_cast<uint64_t>(seed);
  p.temperature = temperature;
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  p.repeat_penalty = repeat_penalty;
  p.repeat_last_n = repeat_last_n;
  p.priority = priority;
  kiln_session* s = nullptr;
  const kiln_status st = kiln_session_create(ptr<kiln_model>(m), &p, &s);
  if (st != KILN_OK) {
    throw_status(env, st);
    return 0;
  }
  return handle(new SessionBox(s));
}

JNIEXPORT void JNICALL Java_ai_kiln_Native_sessionFree(JNIEnv*, jclass, jlong box) {
  SessionBox::close(ptr<SessionBox>(box));
}

JNIEXPORT jstring JNICALL Java_ai_kiln_Native_sessionRun(JNIEnv* env, jclass, jlong h, jboolean chat, jbyteArray prompt,
                                                         jobjectArray roles, jobjectArray contents, jint max_tokens,
                                                         jobjectArray stop, jint add_bos, jint parse_special,
                                                         jobjectArray stats_out) {
  Turn turn;
  if (!read_turn(env, chat, prompt, roles, contents, max_tokens, stop, add_bos, parse_special, turn)) return nullptr;
  SessionBox* box = ptr<SessionBox>(h);
  std::string text;
  kiln_generate_result r{};
  r.size = sizeof r;
  kiln_status st;
  {
    const std::lock_guard<std::recursive_mutex> lock(box->use());
    st = run_turn(box->session(), turn, collect, &text, &r);
  }
  if (st != KILN_OK) {
    throw_status(env, st);
    return nullptr;
  }
  if (stats_out != nullptr) {
    jobject stats = new_stats(env, r);
    if (stats == nullptr) return nullptr;
    env->SetObjectArrayElement(stats_out, 0, stats);
    env->DeleteLocalRef(stats);
  }
  return new_string(env, text);
}

JNIEXPORT void JNICALL Java_ai_kiln_Native_sessionRunAsync(JNIEnv* env, jclass, jlong h, jboolean chat,
                                                           jbyteArray prompt, jobjectArray roles, jobjectArray contents,
                                                           jint max_tokens, jobjectArray stop, jint add_bos,
                                                           jint parse_special, jobject sink, jlong call) {
  Turn turn;
  if (!read_turn(env, chat, prompt, roles, contents, max_tokens, stop, add_bos, parse_special, turn)) return;
  SessionBox* box = ptr<SessionBox>(h);
  jobject global = env->NewGlobalRef(sink);
  if (global == nullptr) return;
  box->post([box, turn = std::move(turn), global, call](JNIEnv* worker) {
    // The worker stays attached for the session's life: its local references would pile up
    // without a frame per call.
    if (worker->PushLocalFrame(16) == 0) {
      run_async(worker, box, turn, global, call);
      worker->PopLocalFrame(nullptr);
    } else {
      clear_exception(worker);
    }
    worker->DeleteGlobalRef(global);
  });
}

JNIEXPORT void JNICALL Java_ai_kiln_Native_sessionCancel(JNIEnv*, jclass, jlong h) {
  kiln_session_cancel(ptr<SessionBox>(h)->session());
}

JNIEXPORT void JNICALL Java_ai_kiln_Native_sessionCancelCall(JNIEnv*, jclass, jlong h, jlong call) {
  ptr<SessionBox>(h)->cancel_if_running(call);
}

JNIEXPORT void JNICALL Java_ai_kiln_Native_sessionReset(JNIEnv* env, jclass, jlong h) {
  SessionBox* box = ptr<SessionBox>(h);
  const std::lock_guard<std::recursive_mutex> lock(box->use());
  const kiln_status st = kiln_session_reset(box->session());
  if (st != KILN_OK) throw_status(env, st);
}

JNIEXPORT void JNICALL Java_ai_kiln_Native_sessionSave(JNIEnv* env, jclass, jlong h, jbyteArray path, jboolean restore) {
  std::string p;
  if (!read_bytes(env, path, p, "the path")) return;
  SessionBox* box = ptr<SessionBox>(h);
  const std::lock_guard<std::recursive_mutex> lock(box->use());
  const kiln_status st = restore ? kiln_session_restore(box->session(), p.c_str()) : kiln_session_save(box->session(), p.c_str());
  if (st != KILN_OK) throw_status(env, st);
}

JNIEXPORT jlongArray JNICALL Java_ai_kiln_Native_sessionStats(JNIEnv* env, jclass, jlong h) {
  kiln_session_stats s{};
  s.size = sizeof s;
  const kiln_status st = kiln_session_stats_get(ptr<SessionBox>(h)->session(), &s);
  if (st != KILN_OK) {
    throw_status(env, st);
    return nullptr;
  }
  return long_array(env, {s.n_ctx, s.position, static_cast<jlong>(s.reserved_bytes), s.generating, s.evicted});
}

}  // extern "C"
