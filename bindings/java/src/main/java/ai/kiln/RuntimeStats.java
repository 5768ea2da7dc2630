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

  RuntimeStats(long[] n) {
    memoryBudgetBytes = n[0];
    heldBytes = n[1];
    peakHeldBytes = n[2];
    nThreads = (int) n[3];
    nModels = (int) n[4];
    nSessions = (int) n[5];
    nEvictions = (int) n[6];
    decodeSteps = n[7];
    decodeTokens = n[8];
  }

  /** Every field, as a record prints them: "RuntimeStats[memoryBudgetBytes=0, ...]". */
  @Override
  public String toString() {
    return "RuntimeStats[memoryBudgetBytes=" + memoryBudgetBytes + ", heldBytes=" + heldBytes + ", peakHeldBytes="
        + peakHeldBytes + ", nThreads=" + nThreads + ", nModels=" + nModels + ", nSessions=" + nSessions
        + ", nEvictions=" + nEvictions + ", decodeSteps=" + decodeSteps + ", decodeTokens=" + decodeTokens + "]";
  }
}
