package ai.kiln;

/** kiln_kv_type: the KV cache's element type, each constant with its C value (never its ordinal). */
public enum KvType {
  F32(0), F16(1);

  final int value;

  KvType(int value) {
    this.value = value;
  }

  /** The kiln_kv_type value in C. */
  public int value() {
    return value;
  }

  static KvType of(int value) {
    for (KvType t : values()) {
      if (t.value == value) {
        return t;
      }
    }
    throw new KilnException(KilnStatus.INTERNAL, "kiln_kv_type " + value + " is not known to this binding");
  }
}
