package ai.kiln.test;

import static ai.kiln.test.JavaTests.check;
import static ai.kiln.test.JavaTests.equal;
import static ai.kiln.test.JavaTests.expectThrows;

import ai.kiln.Cancellable;
import ai.kiln.GenerateOptions;
import ai.kiln.KilnException;
import ai.kiln.KilnModel;
import ai.kiln.KilnRuntime;
import ai.kiln.KilnSession;
import ai.kiln.KilnStatus;
import ai.kiln.KvType;
import ai.kiln.PerfMode;
import ai.kiln.RuntimeOptions;
import ai.kiln.SamplingOptions;
import ai.kiln.SessionOptions;
import ai.kiln.StopReason;
import java.io.File;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/** The binding on the C API's version 1: status values, token-level calls, async on kiln's job threads. */
final class TokenAndAsyncTests {
  private TokenAndAsyncTests() {}

  /**
   * Every kiln_status the library names has its KilnStatus, found by C value with kiln_status_name's
   * spelling; the enums that cross JNI carry their C values, whatever their order in Java.
   */
  static void statusesMapByValue() throws Exception {
    java.lang.reflect.Method cName = Class.forName("ai.kiln.Native").getDeclaredMethod("statusName", int.class);
    cName.setAccessible(true);
    int named = 0;
    for (int v = 0; v < 64; ++v) {
      String c = (String) cName.invoke(null, v);
      if (c.equals("KILN_E_UNKNOWN")) {
        equal(KilnStatus.UNKNOWN, KilnStatus.of(v), "no KilnStatus for the unnamed value " + v);
        continue;
      }
      ++named;
      KilnStatus s = KilnStatus.of(v);
      equal(v, s.value(), "KilnStatus.of(" + v + ")");
      equal(c, s.cName(), "the name of " + v);
    }
    equal(13, named, "kiln_status values the library names (KILN_OK .. KILN_E_BUFFER_TOO_SMALL)");
    equal(12, KilnStatus.BUFFER_TOO_SMALL.value(), "BUFFER_TOO_SMALL's C value");
    equal(1, KvType.F16.value(), "KILN_KV_F16");
    equal(3, PerfMode.POWER_SAVER.value(), "KILN_PERF_POWER_SAVER");
    equal(5, StopReason.CALLBACK.value(), "KILN_STOP_CALLBACK");
  }

  static int argmax(float[] v) {
    int best = 0;
    for (int i = 1; i < v.length; ++i) {
      if (v[i] > v[best]) {
        best = i;
      }
    }
    return best;
  }

  /**
   * An app's own greedy loop (decode, logits, argmax) gives generate()'s text at temperature 0, the
   * golden; sample() at temperature 0 is the argmax; truncate() back and the same tokens decoded
   * again give the same logits bit for bit; the errors are KilnExceptions with the C status.
   */
  static void greedyLoopTruncateAndErrors(File data) throws Exception {
    String golden = JavaTests.readUtf8(new File(data, "golden/stories260K_greedy200.txt"));
    try (KilnRuntime rt = KilnRuntime.create(new RuntimeOptions().threads(1));
        KilnModel model = KilnModel.load(rt, JavaTests.shipped(), null);
        KilnSession s = model.newSession(new SessionOptions().temperature(0f).nCtx(512))) {
      equal(512, s.vocabSize(), "vocabSize");
      expectThrows(s::logits, KilnStatus.INVALID_ARGUMENT, "logits before any decode");
      int[] prompt = model.tokenize("", true, true);
      equal(1, prompt.length, "the empty prompt is BOS");
      equal(model.info().bosId, prompt[0], "BOS");
      s.decode(prompt);
      equal(1, s.nPast(), "nPast after BOS");
      List<Integer> ids = new ArrayList<>();
      List<float[]> seen = new ArrayList<>();
      int eos = model.info().eosId;
      for (int i = 0; i < 200; ++i) {
        float[] l = s.logits();
        seen.add(l);
        int id = argmax(l);
        equal(id, s.sample(), "sample() at temperature 0 at step " + i);
        ids.add(id);
        if (id == eos) {
          break;
        }
        if (i + 1 < 200) {
          s.decode(id);
        }
      }
      int[] out = ids.stream().mapToInt(Integer::intValue).toArray();
      equal(golden, model.detokenize(out), "the greedy loop's text against the golden");
      equal(1 + out.length - 1, s.nPast(), "nPast after the loop");
      // Back to position 100 and the same token again: the same logits, bit for bit.
      s.truncate(100);
      equal(100, s.nPast(), "nPast after truncate");
      s.decode(out[99]);  // position p holds out[p - 1] (BOS at 0); seen[p] are the logits after it
      check(Arrays.equals(seen.get(100), s.logits()), "the logits after truncate and decode again differ");
      float[] big = new float[600];
      Arrays.fill(big, 7f);
      equal(512, s.logits(big), "logits(float[]) returns the vocabulary's size");
      check(Arrays.equals(seen.get(100), Arrays.copyOf(big, 512)) && big[599] == 7f, "logits into a longer array");
      // Errors carry kiln's status.
      KilnException e = expectThrows(() -> s.logits(new float[10]), KilnStatus.BUFFER_TOO_SMALL, "a short array");
      check(e.getMessage().startsWith("KILN_E_BUFFER_TOO_SMALL: "), e.getMessage());
      expectThrows(() -> s.decode(512), KilnStatus.INVALID_ARGUMENT, "an id outside the vocabulary");
      equal(101, s.nPast(), "nothing decoded by a refused decode");
      expectThrows(() -> s.decode(), KilnStatus.INVALID_ARGUMENT, "no ids");
      expectThrows(() -> s.truncate(-1), KilnStatus.INVALID_ARGUMENT, "truncate(-1)");
      expectThrows(() -> s.truncate(1000), KilnStatus.INVALID_ARGUMENT, "truncate past nPast");
      // The text level and the token level share the cache.
      s.reset();
      String text = s.generate("Once upon a time", new GenerateOptions().maxTokens(10));
      equal(s.position(), s.nPast(), "nPast after generate");
      int[] p2 = model.tokenize("Once upon a time", true, false);
      int[] gen = model.tokenize(text, false, false);
      check(p2.length > 1 && gen.length > 0, "tokenize");
      expectThrows(s::logits, KilnStatus.INVALID_ARGUMENT, "logits after a generate");
    }
    // A closed session's token calls throw.
    try (KilnRuntime rt = KilnRuntime.create(null); KilnModel model = KilnModel.load(rt, JavaTests.shipped(), null)) {
      KilnSession s = model.newSession(null);
      s.close();
      expectThrows(() -> s.decode(1), KilnStatus.INVALID_ARGUMENT, "decode after close");
      expectThrows(s::nPast, KilnStatus.INVALID_ARGUMENT, "nPast after close");
    }
  }

  /**
   * The binding starts no thread per session or per call: 164 async calls over 40 sessions (one
   * after another, and 4 sessions with 5 queued calls each at once) see their listeners on a handful
   * of kiln's job threads ("kiln-job", attached once each), and the JVM's count of threads ever
   * started grows by no more than those. The bound, 12: 4 sessions running at once, each with its
   * next call starting on another thread while the last one's onDone returns, and some slack; a
   * thread per session would be 40, per call 164.
   */
  static void noThreadPerSessionOrCall() throws Exception {
    ThreadMXBean mx = ManagementFactory.getThreadMXBean();
    Set<Thread> threads = ConcurrentHashMap.newKeySet();
    try (KilnRuntime rt = KilnRuntime.create(new RuntimeOptions().threads(1));
        KilnModel model = KilnModel.load(rt, JavaTests.shipped(), null)) {
      GenerateOptions go = new GenerateOptions().maxTokens(4);
      long started0 = mx.getTotalStartedThreadCount();
      int calls = 0;
      for (int i = 0; i < 36; ++i) {
        try (KilnSession s = model.newSession(new SessionOptions().temperature(0f).nCtx(64))) {
          for (int k = 0; k < 4; ++k) {
            JavaTests.Collector c = new JavaTests.Collector() {
              @Override
              public synchronized void onToken(String t) {
                super.onToken(t);
                threads.add(Thread.currentThread());
              }
            };
            s.generateAsync("Once upon a time", go, c);
            c.await();
            check(c.error == null, "call: " + c.error);
            ++calls;
          }
        }
      }
      List<KilnSession> sessions = new ArrayList<>();
      List<JavaTests.Collector> collectors = new ArrayList<>();
      for (int i = 0; i < 4; ++i) {
        KilnSession s = model.newSession(new SessionOptions().temperature(0f).nCtx(64));
        sessions.add(s);
        for (int k = 0; k < 5; ++k) {
          JavaTests.Collector c = new JavaTests.Collector() {
            @Override
            public synchronized void onToken(String t) {
              super.onToken(t);
              threads.add(Thread.currentThread());
            }
          };
          collectors.add(c);
          s.generateAsync("Once upon a time", go, c);
          ++calls;
        }
      }
      for (JavaTests.Collector c : collectors) {
        c.await();
        check(c.error == null, "queued call: " + c.error);
        equal(4, c.stats.generatedTokens, "queued call's tokens");
      }
      for (KilnSession s : sessions) {
        s.close();
      }
      long started = mx.getTotalStartedThreadCount() - started0;
      equal(164, calls, "calls");
      for (Thread t : threads) {
        check(t.getName().startsWith("kiln-job"), "a listener on thread " + t.getName());
        check(t.isDaemon(), "job threads are attached as daemons");
      }
      check(threads.size() <= 12, "listeners ran on " + threads.size() + " threads for " + calls + " calls");
      check(started <= 12, started + " threads started for " + calls + " calls on 40 sessions");
      System.out.printf("async: %d calls on 40 sessions ran their listeners on %d threads; %d threads started%n", calls,
          threads.size(), started);
    }
  }

  /**
   * SamplingOptions (kiln_sampling_params): its defaults are the C API's, SessionOptions holds one,
   * and setSampling changes the next calls' sampling (generate and sample()) on a live session as a
   * session made with it samples; out-of-range values are refused, the sampling unchanged.
   */
  static void setSampling() throws Exception {
    SamplingOptions d = new SamplingOptions();
    equal(SamplingOptions.SEED_RANDOM, d.seed(), "seed");
    equal(0.8f, d.temperature(), "temperature");
    equal(40, d.topK(), "topK");
    equal(0.95f, d.topP(), "topP");
    equal(0.05f, d.minP(), "minP");
    equal(1.0f, d.repeatPenalty(), "repeatPenalty");
    equal(64, d.repeatLastN(), "repeatLastN");
    equal(0f, d.frequencyPenalty(), "frequencyPenalty");
    equal(0f, d.presencePenalty(), "presencePenalty");
    SessionOptions so = new SessionOptions().sampling(new SamplingOptions().temperature(0.5f).topK(7)).seed(9);
    equal(0.5f, so.temperature(), "sampling() then a field setter");
    equal(7, so.sampling().topK(), "sampling() read back");
    equal(9L, so.sampling().seed(), "seed() writes into the sampling");
    GenerateOptions go = new GenerateOptions().maxTokens(40);
    try (KilnRuntime rt = KilnRuntime.create(new RuntimeOptions().threads(1));
        KilnModel model = KilnModel.load(rt, JavaTests.shipped(), null);
        KilnSession s = model.newSession(new SessionOptions().temperature(0f));
        KilnSession hot = model.newSession(new SessionOptions().sampling(new SamplingOptions().temperature(1f).seed(7)))) {
      String greedy = s.generate("Once upon a time", go);
      String want = hot.generate("Once upon a time", go);
      check(!want.equals(greedy), "temperature 1 gave the greedy text");
      s.setSampling(new SamplingOptions().temperature(1f).seed(7));
      s.reset();
      equal(want, s.generate("Once upon a time", go), "setSampling against a session made with that sampling");
      expectThrows(() -> s.setSampling(new SamplingOptions().topP(2f)), KilnStatus.INVALID_ARGUMENT, "topP 2");
      expectThrows(() -> s.setSampling(null), KilnStatus.INVALID_ARGUMENT, "null");
      // sample() follows it too: greedy again is the argmax.
      s.setSampling(new SamplingOptions().temperature(0f));
      s.reset();
      s.decode(model.tokenize("Once upon a time", true, false));
      equal(argmax(s.logits()), s.sample(), "sample() after setSampling(temperature 0)");
    }
  }

  /** cancel() of one async call stops that call only: the next queued one runs to its end. */
  static void cancelStopsItsOwnCallOnly() throws Exception {
    try (KilnRuntime rt = KilnRuntime.create(new RuntimeOptions().threads(1));
        KilnModel model = KilnModel.load(rt, JavaTests.shipped(), null);
        KilnSession s = model.newSession(new SessionOptions().temperature(0f).nCtx(512))) {
      JavaTests.Collector first = new JavaTests.SlowCollector();
      JavaTests.Collector second = new JavaTests.Collector();
      JavaTests.Collector third = new JavaTests.Collector();
      Cancellable a = s.generateAsync("", new GenerateOptions().maxTokens(100000), first);
      s.generateAsync("Once upon a time", new GenerateOptions().maxTokens(20), second);
      Cancellable c = s.generateAsync("Once upon a time", new GenerateOptions().maxTokens(20), third);
      c.cancel();  // queued: it never starts
      while (first.pieces.size() < 5) {
        Thread.sleep(1);
      }
      a.cancel();
      first.await();
      second.await();
      third.await();
      equal(KilnStatus.CANCELLED, first.error != null ? first.error.status() : null, "the cancelled call");
      check(second.error == null, "the next call: " + second.error);
      equal(20, second.stats.generatedTokens, "the next call's tokens");
      equal(KilnStatus.CANCELLED, third.error != null ? third.error.status() : null, "the call cancelled while queued");
      equal(0, third.pieces.size(), "pieces of the call cancelled while queued");
      // A blocking call waits for the async calls, then runs: the same text as a fresh session's.
      s.generateAsync("Once upon a time", new GenerateOptions().maxTokens(20), new JavaTests.Collector());
      s.reset();
      String text = s.generate("Once upon a time", new GenerateOptions().maxTokens(20));
      try (KilnSession fresh = model.newSession(new SessionOptions().temperature(0f).nCtx(512))) {
        equal(fresh.generate("Once upon a time", new GenerateOptions().maxTokens(20)), text, "after the async calls");
      }
    }
  }
}
