package ai.kiln;

/** kiln_generate_result: how a reply ended and how fast it came. */
public final class GenerationStats {
  public final StopReason stopReason;
  public final int promptTokens;
  /** Of the prompt, the tokens already in the KV cache from the previous call. */
  public final int reusedTokens;
  public final int generatedTokens;
  public final double timeToFirstTokenMs;
  public final double prefillTokensPerSecond;
  public final double decodeTokensPerSecond;

  GenerationStats(int stopReason, int promptTokens, int reusedTokens, int generatedTokens, double timeToFirstTokenMs,
      double prefillTokensPerSecond, double decodeTokensPerSecond) {
    StopReason[] reasons = StopReason.values();
    this.stopReason = stopReason >= 0 && stopReason < reasons.length ? reasons[stopReason] : StopReason.LENGTH;
    this.promptTokens = promptTokens;
    this.reusedTokens = reusedTokens;
    this.generatedTokens = generatedTokens;
    this.timeToFirstTokenMs = timeToFirstTokenMs;
    this.prefillTokensPerSecond = prefillTokensPerSecond;
    this.decodeTokensPerSecond = decodeTokensPerSecond;
  }

  @Override
  public String toString() {
    return String.format("%d tokens (%s), prompt %d (%d reused), first after %.1f ms, prefill %.1f tok/s, decode %.1f tok/s",
        generatedTokens, stopReason, promptTokens, reusedTokens, timeToFirstTokenMs, prefillTokensPerSecond,
        decodeTokensPerSecond);
  }
}
