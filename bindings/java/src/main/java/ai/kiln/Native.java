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
      throw new KilnException(KilnException.NOT_FOUND, "libkiln_jni could not be loaded: " + LOAD_ERROR.getMessage(),
          LOAD_ERROR);
    }
  }

  static native String version();

  static native long[] runtimeDefaults();

  static native long[] modelDefaults();

  static native long[] sessionDefaults();

  static native long[] generateDefaults();

  static native long runtimeCreate(int threads, long memoryBudgetBytes, int perfMode);

  static native void runtimeFree(long runtime);

  static native long runtimeTrim(long runtime);

  static native long[] runtimeStats(long runtime);

  /** Blocking when sink is null (returns the model); else starts an async load and returns 0. */
  static native long modelLoad(long runtime, byte[] path, int priority, int verify, byte[] scheme, byte[] tokenizer,
      int prefault, LoadSink sink);

  static native void modelFree(long model);

  static native String[] modelInfo(long model, long[] numbers);

  static native long sessionCreate(long model, int nCtx, int kvType, long seed, float temperature, int topK,
      float topP, float minP, float repeatPenalty, int repeatLastN, int priority);

  static native void sessionFree(long session);

  static native String sessionRun(long session, boolean chat, byte[] prompt, byte[][] roles, byte[][] contents,
      int maxTokens, byte[][] stop, int addBos, int parseSpecial, GenerationStats[] statsOut);

  static native void sessionRunAsync(long session, boolean chat, byte[] prompt, byte[][] roles, byte[][] contents,
      int maxTokens, byte[][] stop, int addBos, int parseSpecial, TokenSink sink, long callId);

  static native void sessionCancel(long session);

  /** Cancels the session's generation if the async call `callId` is the one running. */
  static native void sessionCancelCall(long session, long callId);

  static native void sessionReset(long session);

  static native void sessionSave(long session, byte[] path, boolean restore);

  static native long[] sessionStats(long session);

  static byte[] utf8(String s) {
    return s == null ? null : s.getBytes(java.nio.charset.StandardCharsets.UTF_8);
  }
}
