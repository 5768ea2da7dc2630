package ai.kiln;

/** kiln_stop_reason, in its order. */
public enum StopReason {
  LENGTH, EOS, STRING, CONTEXT_FULL, CANCELLED, CALLBACK
}
