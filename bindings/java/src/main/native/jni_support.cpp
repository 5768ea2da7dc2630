#include "jni_support.h"

#include <pthread.h>

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

bool init_refs(JNIEnv* env) {
  JavaRefs r{};
  if (!(r.exception = global_class(env, "ai/kiln/KilnException"))) return false;
  if (!(r.exception_init = env->GetMethodID(r.exception, "<init>", "(ILjava/lang/String;)V"))) return false;
  if (!(r.stats = global_class(env, "ai/kiln/GenerationStats"))) return false;
  if (!(r.stats_init = env->GetMethodID(r.stats, "<init>", "(IIIIDDD)V"))) return false;
  if (!(r.sink_begin = method(env, "ai/kiln/TokenSink", "begin", "()Z"))) return false;
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
  JavaVMAttachArgs args{JNI_VERSION_1_6, const_cast<char*>("kiln-native"), nullptr};
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

jobject new_stats(JNIEnv* env, const kiln_generate_result& r) {
  return env->NewObject(g_refs.stats, g_refs.stats_init, static_cast<jint>(r.stop_reason), r.prompt_tokens,
                        r.reused_tokens, r.generated_tokens, r.time_to_first_token_ms, r.prefill_tokens_per_second,
                        r.decode_tokens_per_second);
}

bool clear_exception(JNIEnv* env) {
  if (!env->ExceptionCheck()) return false;
  env->ExceptionDescribe();
  env->ExceptionClear();
  return true;
}

}  // namespace kiln_jni
