package ai.kiln;

/** kiln_model_params. The no-argument constructor holds kiln_model_default_params(). */
public final class ModelOptions {
  int priority;
  boolean verify;
  String scheme;
  String tokenizerPath;
  boolean prefault;
  boolean noCache;
  String cacheDir;

  public ModelOptions() {
    Native.check();
    Native.modelDefaults(this);  // every field, by name
  }

  /** Under the memory budget, lower priorities are evicted first. */
  public ModelOptions priority(int p) {
    priority = p;
    return this;
  }

  /** Check the weights' checksum too (reads every page). */
  public ModelOptions verify(boolean v) {
    verify = v;
    return this;
  }

  /** A source model (GGUF, HF folder, llama2.c) is compiled in this scheme ("f32", "w4a16"); null: its own. */
  public ModelOptions scheme(String s) {
    scheme = s;
    return this;
  }

  /** A source model's tokenizer from another file; null: the model's own. */
  public ModelOptions tokenizerPath(String path) {
    tokenizerPath = path;
    return this;
  }

  /** Map every weight page while loading, so the first token waits for no page fault. */
  public ModelOptions prefault(boolean p) {
    prefault = p;
    return this;
  }

  /**
   * Compile a source model in memory at every load instead of once into the compile cache (a
   * {@code .kiln} there, mapped on the next load).
   */
  public ModelOptions noCache(boolean n) {
    noCache = n;
    return this;
  }

  /** The compile cache's folder; null: KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln. */
  public ModelOptions cacheDir(String dir) {
    cacheDir = dir;
    return this;
  }

  public int priority() {
    return priority;
  }

  public boolean verify() {
    return verify;
  }

  public String scheme() {
    return scheme;
  }

  public String tokenizerPath() {
    return tokenizerPath;
  }

  public boolean prefault() {
    return prefault;
  }

  public boolean noCache() {
    return noCache;
  }

  public String cacheDir() {
    return cacheDir;
  }
}
