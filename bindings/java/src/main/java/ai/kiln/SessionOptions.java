package ai.kiln;

/**
 * kiln_session_params (its sampling, kiln_sampling_params, included), plus a system prompt. Read by
 * JNI field by field by name; kvType by its C value. The no-argument constructor holds
 * kiln_session_default_params().
 */
public final class SessionOptions {
  /** KILN_SEED_RANDOM (UINT64_MAX): a fresh seed per session. */
  public static final long SEED_RANDOM = -1L;
  int nCtx;
  KvType kvType;
  long seed;
  float temperature;
  int topK;
  float topP;
  float minP;
  float repeatPenalty;
  int repeatLastN;
  float frequencyPenalty;
  float presencePenalty;
  int priority;
  String systemPrompt;

  public SessionOptions() {
    Native.check();
    Native.sessionDefaults(this);  // every field, by name
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
    seed = s;
    return this;
  }

  /** 0: greedy. */
  public SessionOptions temperature(float t) {
    temperature = t;
    return this;
  }

  /** 0: off. */
  public SessionOptions topK(int k) {
    topK = k;
    return this;
  }

  /** 1: off. */
  public SessionOptions topP(float p) {
    topP = p;
    return this;
  }

  /** 0: off. */
  public SessionOptions minP(float p) {
    minP = p;
    return this;
  }

  /** 1: off. */
  public SessionOptions repeatPenalty(float r) {
    repeatPenalty = r;
    return this;
  }

  /** Tokens the repeat penalty looks back on. */
  public SessionOptions repeatLastN(int n) {
    repeatLastN = n;
    return this;
  }

  /** OpenAI's, -2..2: each token's logit minus this times the times it was sampled; 0: off. */
  public SessionOptions frequencyPenalty(float p) {
    frequencyPenalty = p;
    return this;
  }

  /** OpenAI's, -2..2: minus this once a token was sampled; 0: off. */
  public SessionOptions presencePenalty(float p) {
    presencePenalty = p;
    return this;
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

  public int priority() {
    return priority;
  }

  public String systemPrompt() {
    return systemPrompt;
  }
}
