package ai.kiln;

/** kiln_runtime_stats. */
public final class RuntimeStats {
  public final long memoryBudgetBytes;
  /** What the runtime counts as held now: mapped weights, KV caches, arenas, scratch. */
  public final long heldBytes;
  public final long peakHeldBytes;
  public final int nThreads;
  /** Loaded, evicted ones included; a closed model whose sessions live on still counts. */
  public final int nModels;
  public final int nSessions;
  public final int nEvictions;
  /** Decode steps run so far, and the tokens they carried: sessions decoding at once share steps. */
  public final long decodeSteps;
  public final long decodeTokens;

  /** Filled field by field by JNI (kiln_runtime_stats_get), never read by position. */
  private RuntimeStats() {
    memoryBudgetBytes = 0;
    heldBytes = 0;
    peakHeldBytes = 0;
    nThreads = 0;
    nModels = 0;
    nSessions = 0;
    nEvictions = 0;
    decodeSteps = 0;
    decodeTokens = 0;
  }

  /** Every field, as a record prints them: "RuntimeStats[memoryBudgetBytes=0, ...]". */
  @Override
  public String toString() {
    return "RuntimeStats[memoryBudgetBytes=" + memoryBudgetBytes + ", heldBytes=" + heldBytes + ", peakHeldBytes="
        + peakHeldBytes + ", nThreads=" + nThreads + ", nModels=" + nModels + ", nSessions=" + nSessions
        + ", nEvictions=" + nEvictions + ", decodeSteps=" + decodeSteps + ", decodeTokens=" + decodeTokens + "]";
  }
}
