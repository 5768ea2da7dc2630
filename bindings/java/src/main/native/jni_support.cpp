#include "jni_support.h"

#include <pthread.h>

#include <cstdint>
#include <cstring>

#include "utf16_stream.h"

namespace kiln_jni {
namespace {

JavaVM* g_vm = nullptr;
JavaRefs g_refs{};
pthread_key_t g_detach_key;
pthread_once_t g_key_once = PTHREAD_ONCE_INIT;

void detach_at_exit(void*) {
  if (g_vm != nullptr) g_vm->DetachCurrentThread();
}

void make_key() { pthread_key_create(&g_detach_key, detach_at_exit); }

jclass global_class(JNIEnv* env, const char* name) {
  jclass local = env->FindClass(name);
  if (local == nullptr) return nullptr;
  auto global = static_cast<jclass>(env->NewGlobalRef(local));
  env->DeleteLocalRef(local);
  return global;
}

jmethodID method(JNIEnv* env, const char* cls, const char* name, const char* sig) {
  jclass c = env->FindClass(cls);
  if (c == nullptr) return nullptr;
  jmethodID m = env->GetMethodID(c, name, sig);
  env->DeleteLocalRef(c);
  return m;
}

}  // namespace

const JavaRefs& refs() { return g_refs; }

void set_vm(JavaVM* vm) { g_vm = vm; }

jmethodID static_method(JNIEnv* env, jclass cls, const char* name, const char* sig) {
  return cls != nullptr ? env->GetStaticMethodID(cls, name, sig) : nullptr;
}

bool init_refs(JNIEnv* env) {
  JavaRefs r{};
  if (!(r.exception = global_class(env, "ai/kiln/KilnException"))) return false;
  if (!(r.exception_init = env->GetMethodID(r.exception, "<init>", "(ILjava/lang/String;)V"))) return false;
  if (!(r.stats = global_class(env, "ai/kiln/GenerationStats"))) return false;
  if (!(r.runtime_stats = global_class(env, "ai/kiln/RuntimeStats"))) return false;
  if (!(r.session_stats = global_class(env, "ai/kiln/SessionStats"))) return false;
  if (!(r.model_info = global_class(env, "ai/kiln/ModelInfo"))) return false;
  if (!(r.stop_reason = global_class(env, "ai/kiln/StopReason"))) return false;
  if (!(r.stop_reason_of = static_method(env, r.stop_reason, "of", "(I)Lai/kiln/StopReason;"))) return false;
  if (!(r.kv_type = global_class(env, "ai/kiln/KvType"))) return false;
  if (!(r.kv_type_of = static_method(env, r.kv_type, "of", "(I)Lai/kiln/KvType;"))) return false;
  if (!(r.perf_mode = global_class(env, "ai/kiln/PerfMode"))) return false;
  if (!(r.perf_mode_of = static_method(env, r.perf_mode, "of", "(I)Lai/kiln/PerfMode;"))) return false;
  if (!(r.sink_token = method(env, "ai/kiln/TokenSink", "token", "(Ljava/lang/String;)Z"))) return false;
  if (!(r.sink_finish = method(env, "ai/kiln/TokenSink", "finish", "(ILjava/lang/String;Lai/kiln/GenerationStats;)V")))
    return false;
  if (!(r.load_progress = method(env, "ai/kiln/LoadSink", "progress", "(F)Z"))) return false;
  if (!(r.load_done = method(env, "ai/kiln/LoadSink", "done", "(IJLjava/lang/String;)V"))) return false;
  g_refs = r;
  return true;
}

JNIEnv* env_for_native_thread() {
  JNIEnv* env = nullptr;
  if (g_vm->GetEnv(reinterpret_cast<void**>(&env), JNI_VERSION_1_6) == JNI_OK) return env;
  pthread_once(&g_key_once, make_key);
  JavaVMAttachArgs args{JNI_VERSION_1_6, const_cast<char*>("kiln-job"), nullptr};
  // As a daemon: a native thread still running must not keep the JVM from exiting.
  if (g_vm->AttachCurrentThreadAsDaemon(reinterpret_cast<void**>(&env), &args) != JNI_OK) return nullptr;
  pthread_setspecific(g_detach_key, env);  // non-NULL, so detach_at_exit runs when the thread ends
  return env;
}

jstring new_string(JNIEnv* env, std::string_view utf8) {
  const std::u16string s = to_utf16(utf8);
  static_assert(sizeof(jchar) == sizeof(char16_t));
  return env->NewString(reinterpret_cast<const jchar*>(s.data()), static_cast<jsize>(s.size()));
}

bool read_bytes(JNIEnv* env, jbyteArray array, std::string& out, const char* what) {
  out.clear();
  if (array == nullptr) return true;
  const jsize n = env->GetArrayLength(array);
  out.resize(static_cast<size_t>(n));
  env->GetByteArrayRegion(array, 0, n, reinterpret_cast<jbyte*>(out.data()));
  if (std::memchr(out.data(), 0, out.size()) != nullptr) {
    throw_error(env, KILN_E_INVALID_ARGUMENT, std::string(what) + " contains a NUL character");
    return false;
  }
  return true;
}

jobject new_exception(JNIEnv* env, int status, std::string_view message) {
  jstring msg = new_string(env, message);
  if (msg == nullptr) return nullptr;
  jobject e = env->NewObject(g_refs.exception, g_refs.exception_init, static_cast<jint>(status), msg);
  env->DeleteLocalRef(msg);
  return e;
}

void throw_error(JNIEnv* env, kiln_status status, std::string_view message) {
  if (env->ExceptionCheck()) return;  // one already pending (an OutOfMemoryError) wins
  auto e = static_cast<jthrowable>(new_exception(env, status, message));
  if (e != nullptr) {
    env->Throw(e);
    env->DeleteLocalRef(e);
  }
}

void throw_status(JNIEnv* env, kiln_status status) {
  const std::string message = kiln_last_error();  // copied first: it lives until this thread's next call
  throw_error(env, status, message);
}

bool read_string(JNIEnv* env, jstring s, std::string& out, const char* what) {
  out.clear();
  if (s == nullptr) return true;
  const jsize n = env->GetStringLength(s);
  std::u16string u(static_cast<size_t>(n), u'\0');
  env->GetStringRegion(s, 0, n, reinterpret_cast<jchar*>(u.data()));
  for (size_t i = 0; i < u.size(); ++i) {
    uint32_t c = u[i];
    if (c >= 0xD800 && c <= 0xDBFF && i + 1 < u.size() && u[i + 1] >= 0xDC00 && u[i + 1] <= 0xDFFF) {
      c = 0x10000 + ((c - 0xD800) << 10) + (u[++i] - 0xDC00);
    } else if (c >= 0xD800 && c <= 0xDFFF) {
      c = 0xFFFD;  // a lone surrogate
    }
    if (c == 0) {
      throw_error(env, KILN_E_INVALID_ARGUMENT, std::string(what) + " contains a NUL character");
      return false;
    }
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else if (c < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (c >> 6)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else if (c < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (c >> 12)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (c >> 18)));
      out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    }
  }
  return true;
}

Fields::Fields(JNIEnv* env, jobject obj)
    : env_(env), obj_(obj), cls_(obj != nullptr ? env->GetObjectClass(obj) : nullptr) {
  if (obj == nullptr) throw_error(env, KILN_E_INVALID_ARGUMENT, "an options or stats object is null");
}

Fields::~Fields() {
  if (cls_ != nullptr) env_->DeleteLocalRef(cls_);
}

jfieldID Fields::id(const char* name, const char* sig) {
  if (cls_ == nullptr || env_->ExceptionCheck()) return nullptr;
  return env_->GetFieldID(cls_, name, sig);
}

jint Fields::get_int(const char* name) {
  jfieldID f = id(name, "I");
  return f != nullptr ? env_->GetIntField(obj_, f) : 0;
}
jlong Fields::get_long(const char* name) {
  jfieldID f = id(name, "J");
  return f != nullptr ? env_->GetLongField(obj_, f) : 0;
}
jfloat Fields::get_float(const char* name) {
  jfieldID f = id(name, "F");
  return f != nullptr ? env_->GetFloatField(obj_, f) : 0.0f;
}
jboolean Fields::get_boolean(const char* name) {
  jfieldID f = id(name, "Z");
  return f != nullptr ? env_->GetBooleanField(obj_, f) : JNI_FALSE;
}
jobject Fields::get_object(const char* name, const char* sig) {
  jfieldID f = id(name, sig);
  return f != nullptr ? env_->GetObjectField(obj_, f) : nullptr;
}
bool Fields::get_enum(const char* name, const char* sig, jint& out) {
  jobject e = get_object(name, sig);
  if (e == nullptr) {
    if (!env_->ExceptionCheck()) throw_error(env_, KILN_E_INVALID_ARGUMENT, std::string(name) + " is null");
    return false;
  }
  {
    Fields ef(env_, e);
    out = ef.get_int("value");
  }
  env_->DeleteLocalRef(e);
  return ok();
}

void Fields::set_int(const char* name, jint v) {
  if (jfieldID f = id(name, "I")) env_->SetIntField(obj_, f, v);
}
void Fields::set_long(const char* name, jlong v) {
  if (jfieldID f = id(name, "J")) env_->SetLongField(obj_, f, v);
}
void Fields::set_float(const char* name, jfloat v) {
  if (jfieldID f = id(name, "F")) env_->SetFloatField(obj_, f, v);
}
void Fields::set_double(const char* name, jdouble v) {
  if (jfieldID f = id(name, "D")) env_->SetDoubleField(obj_, f, v);
}
void Fields::set_boolean(const char* name, bool v) {
  if (jfieldID f = id(name, "Z")) env_->SetBooleanField(obj_, f, v ? JNI_TRUE : JNI_FALSE);
}
void Fields::set_object(const char* name, const char* sig, jobject v) {
  if (jfieldID f = id(name, sig)) env_->SetObjectField(obj_, f, v);
}
void Fields::set_string(const char* name, std::string_view utf8) {
  if (!ok()) return;
  jstring s = new_string(env_, utf8);
  if (s == nullptr) return;
  set_object(name, "Ljava/lang/String;", s);
  env_->DeleteLocalRef(s);
}
void Fields::set_enum(const char* name, const char* sig, jclass cls, jmethodID of, jint value) {
  if (!ok()) return;
  jobject e = env_->CallStaticObjectMethod(cls, of, value);
  if (e == nullptr) return;  // of() threw
  set_object(name, sig, e);
  env_->DeleteLocalRef(e);
}

jobject new_blank(JNIEnv* env, jclass cls) { return env->AllocObject(cls); }

jobject new_stats(JNIEnv* env, const kiln_generate_result& r) {
  jobject o = new_blank(env, g_refs.stats);
  if (o == nullptr) return nullptr;
  Fields f(env, o);
  f.set_enum("stopReason", "Lai/kiln/StopReason;", g_refs.stop_reason, g_refs.stop_reason_of,
             static_cast<jint>(r.stop_reason));
  f.set_int("promptTokens", r.prompt_tokens);
  f.set_int("reusedTokens", r.reused_tokens);
  f.set_int("generatedTokens", r.generated_tokens);
  f.set_double("timeToFirstTokenMs", r.time_to_first_token_ms);
  f.set_double("prefillTokensPerSecond", r.prefill_tokens_per_second);
  f.set_double("decodeTokensPerSecond", r.decode_tokens_per_second);
  f.set_int("draftedTokens", r.drafted_tokens);
  f.set_int("acceptedTokens", r.accepted_tokens);
  f.set_int("targetSteps", r.target_steps);
  if (!f.ok()) {
    env->DeleteLocalRef(o);
    return nullptr;
  }
  return o;
}

bool clear_exception(JNIEnv* env) {
  if (!env->ExceptionCheck()) return false;
  env->ExceptionDescribe();
  env->ExceptionClear();
  return true;
}

}  // namespace kiln_jni
