package ai.kiln;

/**
 * kiln_sampling_params: how a session picks its next token (the repetition penalty, the frequency
 * and presence penalties, then top-k, top-p, min-p and the temperature, llama.cpp's order). Part of
 * SessionOptions, and what KilnSession.setSampling takes. The no-argument constructor holds
 * kiln_sampling_default_params(); JNI reads and fills it field by field by name.
 */
public final class SamplingOptions {
  /** KILN_SEED_RANDOM (UINT64_MAX): a fresh seed per session. */
  public static final long SEED_RANDOM = -1L;
  long seed;
  float temperature;
  int topK;
  float topP;
  float minP;
  float repeatPenalty;
  int repeatLastN;
  float frequencyPenalty;
  float presencePenalty;

  public SamplingOptions() {
    Native.check();
    Native.samplingDefaults(this);  // every field, by name
  }

  SamplingOptions copy() {
    SamplingOptions c = new SamplingOptions();
    c.seed = seed;
    c.temperature = temperature;
    c.topK = topK;
    c.topP = topP;
    c.minP = minP;
    c.repeatPenalty = repeatPenalty;
    c.repeatLastN = repeatLastN;
    c.frequencyPenalty = frequencyPenalty;
    c.presencePenalty = presencePenalty;
    return c;
  }

  /** SEED_RANDOM (the default): a fresh one per session. */
  public SamplingOptions seed(long s) {
    seed = s;
    return this;
  }

  /** 0: greedy. */
  public SamplingOptions temperature(float t) {
    temperature = t;
    return this;
  }

  /** 0: off. */
  public SamplingOptions topK(int k) {
    topK = k;
    return this;
  }

  /** 1: off. */
  public SamplingOptions topP(float p) {
    topP = p;
    return this;
  }

  /** 0: off. */
  public SamplingOptions minP(float p) {
    minP = p;
    return this;
  }

  /** 1: off. */
  public SamplingOptions repeatPenalty(float r) {
    repeatPenalty = r;
    return this;
  }

  /** Tokens the repeat penalty looks back on. */
  public SamplingOptions repeatLastN(int n) {
    repeatLastN = n;
    return this;
  }

  /** OpenAI's, -2..2: each token's logit minus this times the times it was sampled; 0: off. */
  public SamplingOptions frequencyPenalty(float p) {
    frequencyPenalty = p;
    return this;
  }

  /** OpenAI's, -2..2: minus this once a token was sampled; 0: off. */
  public SamplingOptions presencePenalty(float p) {
    presencePenalty = p;
    return this;
  }

  public long seed() {
    return seed;
  }

  public float temperature() {
    return temperature;
  }

  public int topK() {
    return topK;
  }

  public float topP() {
    return topP;
  }

  public float minP() {
    return minP;
  }

  public float repeatPenalty() {
    return repeatPenalty;
  }

  public int repeatLastN() {
    return repeatLastN;
  }

  public float frequencyPenalty() {
    return frequencyPenalty;
  }

  public float presencePenalty() {
    return presencePenalty;
  }
}
