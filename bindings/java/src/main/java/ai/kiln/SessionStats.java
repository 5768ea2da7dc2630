package ai.kiln;

/** kiln_session_stats: a session's state now; read from any thread, during a call too. */
public final class SessionStats {
  public final int nCtx;
  /** Tokens the KV cache holds, live: during a call it grows with each prefill chunk and token. */
  public final int position;
  /** KV cache, arena and scratch; 0 while the KV cache is in a snapshot file. */
  public final long reservedBytes;
  /** A generate or chat call is running. */
  public final boolean generating;
  /** The KV cache is in a snapshot file (the budget made room), back when the session is next used. */
  public final boolean evicted;

  /** Filled field by field by JNI (kiln_session_stats_get), never read by position. */
  private SessionStats() {
    nCtx = 0;
    position = 0;
    reservedBytes = 0;
    generating = false;
    evicted = false;
  }

  /** Every field, as a record prints them: "SessionStats[nCtx=512, position=12, ...]". */
  @Override
  public String toString() {
    return "SessionStats[nCtx=" + nCtx + ", position=" + position + ", reservedBytes=" + reservedBytes
        + ", generating=" + generating + ", evicted=" + evicted + "]";
  }
}
