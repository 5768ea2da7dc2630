// What every JNI entry point needs: the VM, the classes and methods it calls back (looked up once in
// JNI_OnLoad), Java strings from UTF-8 (always through UTF-16), byte arrays to std::string, and
// KilnException from a kiln_status.
#ifndef KILN_JNI_SUPPORT_H
#define KILN_JNI_SUPPORT_H

#include <jni.h>

#include <string>
#include <string_view>

#include <kiln/kiln.h>

namespace kiln_jni {

struct JavaRefs {
  jclass exception;          // ai.kiln.KilnException
  jmethodID exception_init;  // (int status, String message)
  jclass stats;              // ai.kiln.GenerationStats
  jmethodID stats_init;      // (int stopReason, int prompt, int reused, int generated, double ttft, double prefill, double decode)
  jmethodID sink_begin;      // TokenSink.begin(): boolean
  jmethodID sink_token;      // TokenSink.token(String): boolean
  jmethodID sink_finish;     // TokenSink.finish(int status, String message, GenerationStats stats)
  jmethodID load_progress;   // LoadSink.progress(float): boolean
  jmethodID load_done;       // LoadSink.done(int status, long model, String message)
};
const JavaRefs& refs();
bool init_refs(JNIEnv* env);

// The calling thread's JNIEnv. A native thread (a session's worker, kiln's loading thread) is
// attached at its first call and detached when it exits, never per callback.
JNIEnv* env_for_native_thread();
void set_vm(JavaVM* vm);

// A Java String with the text of `utf8` (an incomplete or invalid sequence becomes U+FFFD).
jstring new_string(JNIEnv* env, std::string_view utf8);
// The bytes of `array` (NULL: ""). `nul_free`: a NUL inside is refused (the C API reads C strings).
bool read_bytes(JNIEnv* env, jbyteArray array, std::string& out, const char* what);

jobject new_exception(JNIEnv* env, int status, std::string_view message);
// Throws KilnException(status, kiln_last_error()): call right after the failing kiln_* call.
void throw_status(JNIEnv* env, kiln_status status);
void throw_error(JNIEnv* env, kiln_status status, std::string_view message);

jobject new_stats(JNIEnv* env, const kiln_generate_result& r);

// True (and the exception cleared, after it is printed) when the last call into Java threw.
bool clear_exception(JNIEnv* env);

}  // namespace kiln_jni

#endif
