package ai.kiln;

import java.util.Locale;

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
  /** Speculative decoding: tokens drafted, of them accepted, and the model's steps after the prompt. */
  public final int draftedTokens;
  public final int acceptedTokens;
  public final int targetSteps;

  /** Filled field by field by JNI (kiln_generate_result), never read by position. */
  private GenerationStats() {
    stopReason = StopReason.LENGTH;
    promptTokens = 0;
    reusedTokens = 0;
    generatedTokens = 0;
    timeToFirstTokenMs = 0;
    prefillTokensPerSecond = 0;
    decodeTokensPerSecond = 0;
    draftedTokens = 0;
    acceptedTokens = 0;
    targetSteps = 0;
  }

  /**
   * Every field, in words: "40 tokens (LENGTH), prompt 6 (1 reused), first after 2.5 ms, prefill 2400.0
   * tok/s, decode 1500.0 tok/s" (the same in every locale).
   */
  @Override
  public String toString() {
    return String.format(Locale.ROOT, "%d tokens (%s), prompt %d (%d reused), first after %.1f ms, prefill %.1f tok/s, decode %.1f tok/s",
        generatedTokens, stopReason, promptTokens, reusedTokens, timeToFirstTokenMs, prefillTokensPerSecond,
        decodeTokensPerSecond) + (draftedTokens > 0 ? String.format(Locale.ROOT, ", drafted %d (%d accepted) in %d steps",
        draftedTokens, acceptedTokens, targetSteps) : "");
  }
}
