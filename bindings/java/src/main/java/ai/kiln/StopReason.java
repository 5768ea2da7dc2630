package ai.kiln;

/** kiln_stop_reason, each constant with its C value (never its ordinal). */
public enum StopReason {
  LENGTH(0), EOS(1), STRING(2), CONTEXT_FULL(3), CANCELLED(4), CALLBACK(5),
  /** A value this binding does not know (a newer library). */
  UNKNOWN(-1);

  final int value;

  StopReason(int value) {
    this.value = value;
  }

  /** The kiln_stop_reason value in C. */
  public int value() {
    return value;
  }

  static StopReason of(int value) {
    for (StopReason r : values()) {
      if (r.value == value && r != UNKNOWN) {
        return r;
      }
    }
    return UNKNOWN;
  }
}
