package ai.kiln;

import java.io.File;

/** kiln_model: a mapped .kiln (or a source model compiled in memory), shared by its sessions. */
public final class KilnModel implements AutoCloseable {
  private final NativeRef ref;
  private final NativeCleaner.Cleanable cleanable;

  KilnModel(long handle) {
    ref = new NativeRef(handle, Native::modelFree, "KilnModel");
    cleanable = NativeCleaner.register(this, ref);
  }

  /** Loads on the calling thread (on Android: never the main thread; see loadAsync). null options: defaults. */
  public static KilnModel load(KilnRuntime runtime, String path, ModelOptions options) {
    return new KilnModel(start(runtime, path, options, null));
  }

  public static KilnModel load(KilnRuntime runtime, File path, ModelOptions options) {
    return load(runtime, path != null ? path.getPath() : null, options);
  }

  /**
   * Loads on a thread of its own; the listener's progress and result are called there. Returns
   * at once; cancel() stops the load at its next progress point.
   */
  public static Cancellable loadAsync(KilnRuntime runtime, String path, ModelOptions options, LoadListener listener) {
    if (listener == null) {
      throw new KilnException(KilnException.INVALID_ARGUMENT, "the LoadListener is null");
    }
    LoadSink sink = new LoadSink(listener);
    start(runtime, path, options, sink);
    return sink;
  }

  private static long start(KilnRuntime runtime, String path, ModelOptions options, LoadSink sink) {
    if (runtime == null || path == null) {
      throw new KilnException(KilnException.INVALID_ARGUMENT, "the runtime and the path must not be null");
    }
    ModelOptions o = options != null ? options : new ModelOptions();
    long rt = runtime.acquire();
    try {
      return Native.modelLoad(rt, Native.utf8(path), o.priority, o.verify ? 1 : 0, Native.utf8(o.scheme),
          Native.utf8(o.tokenizerPath), o.prefault ? 1 : 0, sink);
    } finally {
      runtime.release();
    }
  }

  /** A new conversation on this model. null options: defaults. */
  public KilnSession newSession(SessionOptions options) {
    SessionOptions o = options != null ? options : new SessionOptions();
    if (o.kvType == null) {
      throw new KilnException(KilnException.INVALID_ARGUMENT, "kvType is null");
    }
    long h = ref.acquire();
    try {
      long s = Native.sessionCreate(h, o.nCtx, o.kvType.ordinal(), o.seed, o.temperature, o.topK, o.topP, o.minP,
          o.repeatPenalty, o.repeatLastN, o.priority);
      return new KilnSession(s, o.systemPrompt);
    } finally {
      ref.release();
    }
  }

  public ModelInfo info() {
    long h = ref.acquire();
    try {
      long[] numbers = new long[13];
      String[] names = Native.modelInfo(h, numbers);
      return new ModelInfo(names, numbers);
    } finally {
      ref.release();
    }
  }

  /** The weights go when the model's last session is closed too. */
  @Override
  public void close() {
    ref.run();  // throws, still open, when called from inside its own call
    cleanable.clean();
  }
}
