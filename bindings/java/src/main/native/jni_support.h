// What every JNI entry point needs: the VM, the classes and methods it calls back (looked up once in
// JNI_OnLoad, so that kiln's job threads, where FindClass sees only the system class loader, never
// look one up), Java objects read and filled field by field by name (never by position), Java
// strings from UTF-8 (always through UTF-16), byte arrays to std::string, and KilnException from a
// kiln_status.
#ifndef KILN_JNI_SUPPORT_H
#define KILN_JNI_SUPPORT_H

#include <jni.h>

#include <string>
#include <string_view>

#include <kiln/kiln.h>

namespace kiln_jni {

struct JavaRefs {
  jclass exception;          // ai.kiln.KilnException
  jmethodID exception_init;  // (int status, String message): mapped by the C value
  jclass stats;              // ai.kiln.GenerationStats, filled by field
  jclass runtime_stats;      // ai.kiln.RuntimeStats
  jclass session_stats;      // ai.kiln.SessionStats
  jclass model_info;         // ai.kiln.ModelInfo
  jclass stop_reason;        // ai.kiln.StopReason
  jmethodID stop_reason_of;  // static StopReason of(int)
  jclass kv_type;            // ai.kiln.KvType
  jmethodID kv_type_of;      // static KvType of(int)
  jclass perf_mode;          // ai.kiln.PerfMode
  jmethodID perf_mode_of;    // static PerfMode of(int)
  jmethodID sink_token;      // TokenSink.token(String): boolean
  jmethodID sink_finish;     // TokenSink.finish(int status, String message, GenerationStats stats)
  jmethodID load_progress;   // LoadSink.progress(float): boolean
  jmethodID load_done;       // LoadSink.done(int status, long model, String message)
};
const JavaRefs& refs();
bool init_refs(JNIEnv* env);

// The calling thread's JNIEnv. A native thread (one of kiln's job threads) is attached, as a daemon,
// at its first callback and detached when it exits (a pthread key's destructor), never per callback.
JNIEnv* env_for_native_thread();
void set_vm(JavaVM* vm);

// A Java String with the text of `utf8` (an incomplete or invalid sequence becomes U+FFFD).
jstring new_string(JNIEnv* env, std::string_view utf8);
// The bytes of `array` (NULL: ""). A NUL inside is refused (the C API reads C strings).
bool read_bytes(JNIEnv* env, jbyteArray array, std::string& out, const char* what);
// The UTF-8 of `s` (NULL: ""; a lone surrogate becomes U+FFFD); a NUL inside is refused.
bool read_string(JNIEnv* env, jstring s, std::string& out, const char* what);

// A Java object's fields by name: reads return 0 / null and sets return quietly once a lookup has
// failed (NoSuchFieldError pending: check ok()). For the binding's own final classes only.
class Fields {
 public:
  Fields(JNIEnv* env, jobject obj);
  ~Fields();
  Fields(const Fields&) = delete;
  Fields& operator=(const Fields&) = delete;
  bool ok() const { return !env_->ExceptionCheck(); }

  jint get_int(const char* name);
  jlong get_long(const char* name);
  jfloat get_float(const char* name);
  jboolean get_boolean(const char* name);
  jobject get_object(const char* name, const char* sig);  // a local reference
  // The C value (its `value` field) of an enum field; false (KilnException pending) when it is null.
  bool get_enum(const char* name, const char* sig, jint& out);

  void set_int(const char* name, jint v);
  void set_long(const char* name, jlong v);
  void set_float(const char* name, jfloat v);
  void set_double(const char* name, jdouble v);
  void set_boolean(const char* name, bool v);
  void set_object(const char* name, const char* sig, jobject v);
  void set_string(const char* name, std::string_view utf8);
  // Sets an enum field to `cls`.of(value) (mapped by the C value).
  void set_enum(const char* name, const char* sig, jclass cls, jmethodID of, jint value);

 private:
  jfieldID id(const char* name, const char* sig);
  JNIEnv* env_;
  jobject obj_;
  jclass cls_;
};

// A new object of one of the binding's stats classes, its fields zero (filled by Fields).
jobject new_blank(JNIEnv* env, jclass cls);

jobject new_exception(JNIEnv* env, int status, std::string_view message);
// Throws KilnException(status, kiln_last_error()): call right after the failing kiln_* call.
void throw_status(JNIEnv* env, kiln_status status);
void throw_error(JNIEnv* env, kiln_status status, std::string_view message);

// A GenerationStats with the fields of `r`.
jobject new_stats(JNIEnv* env, const kiln_generate_result& r);

// True (and the exception cleared, after it is printed) when the last call into Java threw.
bool clear_exception(JNIEnv* env);

}  // namespace kiln_jni

#endif
