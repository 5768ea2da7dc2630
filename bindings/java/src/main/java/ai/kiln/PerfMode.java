package ai.kiln;

/** kiln_perf_mode, each constant with its C value (never its ordinal). */
public enum PerfMode {
  BALANCED(0), BURST(1), SUSTAINED(2), POWER_SAVER(3);

  final int value;

  PerfMode(int value) {
    this.value = value;
  }

  /** The kiln_perf_mode value in C. */
  public int value() {
    return value;
  }

  static PerfMode of(int value) {
    for (PerfMode m : values()) {
      if (m.value == value) {
        return m;
      }
    }
    throw new KilnException(KilnStatus.INTERNAL, "kiln_perf_mode " + value + " is not known to this binding");
  }
}
