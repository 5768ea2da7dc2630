package ai.kiln;

import java.lang.ref.Cleaner;

/** What the classes share: the Cleaner that frees what a forgotten close() left, and the version. */
public final class Kiln {
  static final Cleaner CLEANER = Cleaner.create();

  private Kiln() {}

  /** The native library's version, "0.2.0". */
  public static String version() {
    return Native.version();
  }
}
