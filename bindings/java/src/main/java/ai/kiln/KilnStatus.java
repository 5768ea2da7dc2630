package ai.kiln;

/**
 * kiln_status: what a KilnException carries. Each constant holds its C value ({@link #value()}),
 * which is how the binding maps it (never by ordinal); {@link #cName()} is kiln_status_name()'s
 * spelling. A value this binding does not know (a newer library) is UNKNOWN, its number kept in
 * {@link KilnException#code()}.
 */
public enum KilnStatus {
  OK(0),
  INVALID_ARGUMENT(1),
  IO(2),
  FORMAT(3),
  UNSUPPORTED(4),
  OUT_OF_MEMORY(5),
  BUDGET(6),
  CANCELLED(7),
  CONTEXT_FULL(8),
  REENTRANT(9),
  NOT_FOUND(10),
  INTERNAL(11),
  /** The caller's buffer cannot hold the answer; the call said how much it needs. */
  BUFFER_TOO_SMALL(12),
  /** A value this binding does not know. */
  UNKNOWN(-1);

  private final int value;

  KilnStatus(int value) {
    this.value = value;
  }

  /** The kiln_status value in C. */
  public int value() {
    return value;
  }

  /** "KILN_E_BUDGET", "KILN_OK": kiln_status_name()'s spelling (UNKNOWN: "KILN_E_UNKNOWN"). */
  public String cName() {
    return this == OK ? "KILN_OK" : "KILN_E_" + name();
  }

  /** The constant whose C value is `value`; UNKNOWN when there is none. */
  public static KilnStatus of(int value) {
    for (KilnStatus s : values()) {
      if (s.value == value && s != UNKNOWN) {
        return s;
      }
    }
    return UNKNOWN;
  }
}
