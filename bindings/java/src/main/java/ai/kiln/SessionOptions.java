package ai.kiln;

/**
 * kiln_session_params (its sampling, kiln_sampling_params, included), plus a system prompt. Read by
 * JNI field by field by name; kvType by its C value. The no-argument constructor holds
 * kiln_session_default_params().
 */
public final class SessionOptions {
  /** KILN_SEED_RANDOM (UINT64_MAX): a fresh seed per session. */
  public static final long SEED_RANDOM = SamplingOptions.SEED_RANDOM;
  int nCtx;
  KvType kvType;
  SamplingOptions sampling;  // kiln_session_params.sampling; the setters below write into it
  int priority;
  String systemPrompt;

  public SessionOptions() {
    Native.check();
    Native.sessionDefaults(this);  // every field, by name
    sampling = new SamplingOptions();
  }

  /** Positions the KV cache holds; 0: the model's maximum, at most 4096. */
  public SessionOptions nCtx(int n) {
    nCtx = n;
    return this;
  }

  public SessionOptions kvType(KvType t) {
    kvType = t;
    return this;
  }

  /** SEED_RANDOM (the default): a fresh one per session. */
  public SessionOptions seed(long s) {
    sampling.seed(s);
    return this;
  }

  /** 0: greedy. */
  public SessionOptions temperature(float t) {
    sampling.temperature(t);
    return this;
  }

  /** 0: off. */
  public SessionOptions topK(int k) {
    sampling.topK(k);
    return this;
  }

  /** 1: off. */
  public SessionOptions topP(float p) {
    sampling.topP(p);
    return this;
  }

  /** 0: off. */
  public SessionOptions minP(float p) {
    sampling.minP(p);
    return this;
  }

  /** 1: off. */
  public SessionOptions repeatPenalty(float r) {
    sampling.repeatPenalty(r);
    return this;
  }

  /** Tokens the repeat penalty looks back on. */
  public SessionOptions repeatLastN(int n) {
    sampling.repeatLastN(n);
    return this;
  }

  /** OpenAI's, -2..2: each token's logit minus this times the times it was sampled; 0: off. */
  public SessionOptions frequencyPenalty(float p) {
    sampling.frequencyPenalty(p);
    return this;
  }

  /** OpenAI's, -2..2: minus this once a token was sampled; 0: off. */
  public SessionOptions presencePenalty(float p) {
    sampling.presencePenalty(p);
    return this;
  }

  /** The whole sampling at once (copied); the setters above change single fields of it. */
  public SessionOptions sampling(SamplingOptions s) {
    if (s == null) {
      throw new KilnException(KilnStatus.INVALID_ARGUMENT, "the SamplingOptions are null");
    }
    sampling = s.copy();
    return this;
  }

  /** A copy of the sampling these options hold. */
  public SamplingOptions sampling() {
    return sampling.copy();
  }

  /** Under the memory budget, lower priorities are snapshotted first. */
  public SessionOptions priority(int p) {
    priority = p;
    return this;
  }

  /**
   * Sent by chat() as the first message when the conversation does not start with a system message
   * (the C API has no such field: this is the binding's; generate() sends the prompt as given).
   */
  public SessionOptions systemPrompt(String s) {
    systemPrompt = s;
    return this;
  }

  public int nCtx() {
    return nCtx;
  }

  public KvType kvType() {
    return kvType;
  }

  public long seed() {
    return sampling.seed();
  }

  public float temperature() {
    return sampling.temperature();
  }

  public int topK() {
    return sampling.topK();
  }

  public float topP() {
    return sampling.topP();
  }

  public float minP() {
    return sampling.minP();
  }

  public float repeatPenalty() {
    return sampling.repeatPenalty();
  }

  public int repeatLastN() {
    return sampling.repeatLastN();
  }

  public float frequencyPenalty() {
    return sampling.frequencyPenalty();
  }

  public float presencePenalty() {
    return sampling.presencePenalty();
  }

  public int priority() {
    return priority;
  }

  public String systemPrompt() {
    return systemPrompt;
  }
}
