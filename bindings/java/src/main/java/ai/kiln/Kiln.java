package ai.kiln;

/** The library as a whole. */
public final class Kiln {
  private Kiln() {}

  /** kiln_version(): the native library's version, "major.minor.patch". */
  public static String version() {
    Native.check();
    return Native.version();
  }
}
