package ai.kiln;

/**
 * kiln_session_params, plus a system prompt. The no-argument constructor holds
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
  int priority;
  String systemPrompt;

  public SessionOptions() {
    Native.check();
    long[] d = Native.sessionDefaults();
    nCtx = (int) d[0];
    kvType = KvType.values()[(int) d[1]];
    seed = d[2];
    temperature = Float.intBitsToFloat((int) d[3]);
    topK = (int) d[4];
    topP = Float.intBitsToFloat((int) d[5]);
    minP = Float.intBitsToFloat((int) d[6]);
    repeatPenalty = Float.intBitsToFloat((int) d[7]);
    repeatLastN = (int) d[8];
    priority = (int) d[9];
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

  public int priority() {
    return priority;
  }

  public String systemPrompt() {
    return systemPrompt;
  }
}
