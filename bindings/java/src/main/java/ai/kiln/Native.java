package ai.kiln;

/** The JNI methods (libkiln_jni), one per kiln.h call they wrap. Strings cross as UTF-8 byte arrays. */
final class Native {
  private static final Throwable LOAD_ERROR;

  static {
    // An explicit file (tests, a desktop app), the platform's search (an APK's jniLibs,
    // java.library.path), else the libkiln_jni.so beside kiln.jar, where the build puts it, so that
    // `java -cp kiln.jar:. App` works as it is.
    Throwable error = null;
    try {
      String path = System.getProperty("kiln.library");
      if (path != null) {
        System.load(new java.io.File(path).getAbsolutePath());
      } else {
        try {
          System.loadLibrary("kiln_jni");
        } catch (UnsatisfiedLinkError notOnPath) {
          java.io.File beside = besideJar();
          if (beside == null || !beside.isFile()) throw notOnPath;
          System.load(beside.getAbsolutePath());
        }
      }
    } catch (UnsatisfiedLinkError | SecurityException e) {
      error = e;
    }
    LOAD_ERROR = error;
  }

  private Native() {}

  /** libkiln_jni.so in the folder of the jar this class came from; null where that is unknown. */
  private static java.io.File besideJar() {
    try {
      java.security.CodeSource src = Native.class.getProtectionDomain().getCodeSource();
      if (src == null) return null;
      java.io.File jar = new java.io.File(src.getLocation().toURI());
      java.io.File dir = jar.isDirectory() ? jar : jar.getParentFile();
      return dir == null ? null : new java.io.File(dir, System.mapLibraryName("kiln_jni"));
    } catch (java.net.URISyntaxException | SecurityException | IllegalArgumentException e) {
      return null;
    }
  }

  /** Every way into the binding starts here: a library that did not load is a KilnException too. */
  static void check() {
    if (LOAD_ERROR != null) {
      throw new KilnException(KilnStatus.NOT_FOUND, "libkiln_jni could not be loaded: " + LOAD_ERROR.getMessage(),
          LOAD_ERROR);
    }
  }

  static native String version();

  static native int apiVersion();

  /** kiln_status_name(status). */
  static native String statusName(int status);

  // Each *Defaults fills its options object's fields, by name, with the C *_default_params().
  static native void runtimeDefaults(RuntimeOptions o);

  static native void modelDefaults(ModelOptions o);

  static native void sessionDefaults(SessionOptions o);

  static native void samplingDefaults(SamplingOptions o);

  static native void generateDefaults(GenerateOptions o);

  /** Reads the options' fields by name (enums by their C values). */
  static native long runtimeCreate(RuntimeOptions o);

  static native void runtimeFree(long runtime);

  static native long runtimeTrim(long runtime);

  static native RuntimeStats runtimeStats(long runtime);

  /** Blocking when sink is null (returns the model); else starts an async load and returns 0. */
  static native long modelLoad(long runtime, String path, ModelOptions o, LoadSink sink);

  /** kiln_model_load_fd: blocking; the model handle. */
  static native long modelLoadFd(long runtime, int fd, long offset, long length, ModelOptions o);

  static native void modelFree(long model);

  static native ModelInfo modelInfo(long model);

  /** kiln_tokenize: asks for the count first (KILN_E_BUFFER_TOO_SMALL), then fills. */
  static native int[] tokenize(long model, byte[] text, boolean addBos, boolean parseSpecial);

  static native String detokenize(long model, int[] ids);

  static native long sessionCreate(long model, SessionOptions o);

  static native void sessionFree(long session);

  /** Blocking generate or chat: the reply; its GenerationStats into request.stats. */
  static native String sessionRun(long session, Request request);

  /**
   * kiln_session_generate_async / kiln_session_chat_async: returns the kiln_job at once; the sink's
   * token() and finish() run on one of the runtime's job threads.
   */
  static native long sessionStartAsync(long session, Request request, TokenSink sink);

  static native void jobCancel(long job);

  /** kiln_job_free: waits for the job, or, from its own callback, lets it free itself when it ends. */
  static native void jobFree(long job);

  static native void sessionCancel(long session);

  static native void sessionSetSampling(long session, SamplingOptions o);

  static native void sessionReset(long session);

  static native void sessionSave(long session, String path);

  static native void sessionRestore(long session, String path);

  static native SessionStats sessionStats(long session);

  static native void sessionDecode(long session, int[] ids);

  /** The first n floats of `out` (n less than the vocabulary: BUFFER_TOO_SMALL from kiln). */
  static native void sessionLogits(long session, float[] out, int n);

  static native int sessionNPast(long session);

  static native void sessionTruncate(long session, int nKeep);

  static native int sessionSample(long session);

  static byte[] utf8(String s) {
    return s == null ? null : s.getBytes(java.nio.charset.StandardCharsets.UTF_8);
  }
}
