package ai.kiln.test;

import ai.kiln.Cancellable;
import ai.kiln.GenerateOptions;
import ai.kiln.GenerationStats;
import ai.kiln.KilnException;
import ai.kiln.KilnStatus;
import ai.kiln.KilnModel;
import ai.kiln.KilnRuntime;
import ai.kiln.KilnSession;
import ai.kiln.KvType;
import ai.kiln.LoadListener;
import ai.kiln.Message;
import ai.kiln.ModelOptions;
import ai.kiln.PerfMode;
import ai.kiln.RuntimeOptions;
import ai.kiln.RuntimeStats;
import ai.kiln.SessionOptions;
import ai.kiln.SessionStats;
import ai.kiln.StopReason;
import ai.kiln.TokenListener;
import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

/**
 * The Java binding's tests, on the shipped model and on a model made to emit CJK and emoji. A plain
 * runner (no JUnit): each test prints PASS or FAIL, the last line is "N passed, N failed".
 *
 *   java -Dkiln.library=libkiln_jni.so -cp kiln.jar:kiln-tests.jar ai.kiln.test.JavaTests \
 *        --models DIR --data DIR --kiln KILN_BINARY [--leak CYCLES]
 */
public final class JavaTests {
  private static File models;
  private static File data;
  private static String kilnBinary;
  private static File work;

  interface Test {
    void run() throws Exception;
  }

  public static void main(String[] args) throws Exception {
    if (args.length == 1 && args[0].equals("--without-library")) {
      withoutLibrary();
      return;
    }
    int leakCycles = 0;
    for (int i = 0; i + 1 < args.length; i += 2) {
      switch (args[i]) {
        case "--models": models = new File(args[i + 1]); break;
        case "--data": data = new File(args[i + 1]); break;
        case "--kiln": kilnBinary = args[i + 1]; break;
        case "--leak": leakCycles = Integer.parseInt(args[i + 1]); break;
        default: throw new IllegalArgumentException("unknown argument " + args[i]);
      }
    }
    work = Files.createTempDirectory("kiln-java-tests").toFile();
    Map<String, Test> tests = new LinkedHashMap<>();
    if (leakCycles > 0) {
      final int n = leakCycles;
      tests.put("LeakCheck.CyclesKeepRssFlat", () -> LeakCheck.run(shipped(), n));
      tests.put("LeakCheck.LongGenerationOnOneWorker", () -> LeakCheck.longGeneration(shipped(), 10000));
    } else {
      tests.put("Options.DefaultsAreTheCApis", JavaTests::defaultsAreTheCApis);
      tests.put("Generate.GreedyIsKilnRunAndTheGolden", JavaTests::greedyIsKilnRunAndTheGolden);
      tests.put("Generate.StreamedPiecesConcatenateToTheBlockingResult", JavaTests::streamedEqualsBlocking);
      tests.put("Generate.CjkAndEmojiArriveAsWholeUtf16", JavaTests::cjkAndEmoji);
      tests.put("Cancel.FromAnotherThreadStopsWithinOneStep", JavaTests::cancelAsync);
      tests.put("Cancel.BlockingPrefillAndTheSessionGoesOn", JavaTests::cancelBlocking);
      tests.put("Concurrency.TwoSessionsOnTwoThreadsGiveTheirSoloResults", JavaTests::twoThreads);
      tests.put("Load.ErrorsAreKilnExceptionsWithTheCMessage", JavaTests::loadErrors);
      tests.put("Load.AsyncReportsOffTheCallersThreadAndCancels", JavaTests::loadAsync);
      tests.put("Load.FromAnAlignedZipEntryByDescriptorGivesThePlainFilesText", JavaTests::loadFromFd);
      tests.put("Load.CacheDirHoldsOneEntryAndNoCacheWritesNone", JavaTests::compileCache);
      tests.put("Lifecycle.UseAfterCloseThrows", JavaTests::useAfterClose);
      tests.put("Session.SaveRestoreResetAndChat", JavaTests::saveRestoreResetChat);
      tests.put("Session.ListenerExceptionsAndCloseFromACallback", JavaTests::listenerFailures);
      tests.put("Lifecycle.ForgottenCloseIsFreedByTheCleaner", JavaTests::cleaner);
      tests.put("Chat.TemplateSystemPromptAndStreamingAgreeWithKilnRun", JavaTests::chatWithTemplate);
      tests.put("Load.AMissingNativeLibraryIsAKilnException", JavaTests::missingLibrary);
      tests.put("Strings.InfoAndStatsPrintEveryField", JavaTests::infoAndStatsStrings);
      tests.put("Strings.KilnExceptionShowsItsStatusByName", JavaTests::exceptionStrings);
      tests.put("Status.KilnStatusIsMappedByItsCValue", TokenAndAsyncTests::statusesMapByValue);
      tests.put("Constrained.GrammarAndJsonSchemaHoldTheReplyBlockingAndAsync", JavaTests::constrainedOutput);
      tests.put("Speculative.DraftModelAndLookupKeepGreedyTextAndCount", JavaTests::speculative);
      tests.put("Tokens.GreedyLoopIsTheGoldenAndTruncateIsBitExact", () -> TokenAndAsyncTests.greedyLoopTruncateAndErrors(data));
      tests.put("Sampling.SetSamplingIsASessionMadeWithIt", TokenAndAsyncTests::setSampling);
      tests.put("Async.NoThreadPerSessionOrCall", TokenAndAsyncTests::noThreadPerSessionOrCall);
      tests.put("Async.CancelStopsItsOwnCallOnly", TokenAndAsyncTests::cancelStopsItsOwnCallOnly);
    }
    int passed = 0;
    int failed = 0;
    for (Map.Entry<String, Test> t : tests.entrySet()) {
      long t0 = System.nanoTime();
      try {
        t.getValue().run();
        ++passed;
        System.out.printf("PASS %s (%d ms)%n", t.getKey(), (System.nanoTime() - t0) / 1_000_000);
      } catch (Throwable e) {
        ++failed;
        System.out.printf("FAIL %s: %s%n", t.getKey(), e);
        e.printStackTrace(System.out);
      }
    }
    deleteTree(work);
    System.out.printf("%d passed, %d failed%n", passed, failed);
    System.exit(failed == 0 ? 0 : 1);
  }

  // ---- helpers ------------------------------------------------------------------------------

  /** A value class with its fields set by name, as JNI fills them (its private constructor, then each field). */
  static <T> T make(Class<T> c, Object... namesAndValues) throws Exception {
    java.lang.reflect.Constructor<T> k = c.getDeclaredConstructor();
    k.setAccessible(true);
    T o = k.newInstance();
    for (int i = 0; i < namesAndValues.length; i += 2) {
      java.lang.reflect.Field f = c.getDeclaredField((String) namesAndValues[i]);
      f.setAccessible(true);
      f.set(o, namesAndValues[i + 1]);
    }
    return o;
  }

  static String shipped() {
    return new File(models, "stories260K/stories260K.bin").getPath();
  }

  static void check(boolean ok, String what) {
    if (!ok) {
      throw new AssertionError(what);
    }
  }

  static void equal(Object want, Object got, String what) {
    if (want == null ? got != null : !want.equals(got)) {
      throw new AssertionError(what + ": want <" + want + "> got <" + got + ">");
    }
  }

  /** status null: any. */
  static KilnException expectThrows(Test t, KilnStatus status, String what) throws Exception {
    try {
      t.run();
    } catch (KilnException e) {
      equal(KilnException.class, e.getClass(), what + ": exception class");
      if (status != null) {
        equal(status, e.status(), what + ": status of " + e);
      }
      return e;
    }
    throw new AssertionError(what + ": no KilnException");
  }

  /** No lone surrogate: what a split 4-byte character would leave. */
  static void checkUtf16(String s, String what) {
    for (int i = 0; i < s.length(); ++i) {
      char c = s.charAt(i);
      if (Character.isHighSurrogate(c)) {
        check(i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1)), what + ": lone high surrogate in <" + s + ">");
        ++i;
      } else {
        check(!Character.isLowSurrogate(c), what + ": lone low surrogate in <" + s + ">");
      }
    }
  }

  /** A listener that collects the pieces; await() returns when the call ended. */
  static class Collector implements TokenListener {
    final List<String> pieces = new ArrayList<>();
    final StringBuilder text = new StringBuilder();
    final CountDownLatch ended = new CountDownLatch(1);
    volatile GenerationStats stats;
    volatile KilnException error;
    volatile Thread thread;

    @Override
    public synchronized void onToken(String t) {
      thread = Thread.currentThread();
      pieces.add(t);
      text.append(t);
    }

    @Override
    public void onDone(GenerationStats s) {
      stats = s;
      ended.countDown();
    }

    @Override
    public void onError(KilnException e) {
      error = e;
      ended.countDown();
    }

    synchronized String text() {
      return text.toString();
    }

    void await() throws InterruptedException {
      check(ended.await(60, TimeUnit.SECONDS), "the async call did not end within 60 s");
    }
  }

  /** At most one token a millisecond: a reply to the end of the context outlasts what the test does meanwhile. */
  static class SlowCollector extends Collector {
    @Override
    public synchronized void onToken(String t) {
      super.onToken(t);
      try {
        Thread.sleep(1);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }

  static String readUtf8(File f) throws IOException {
    return new String(Files.readAllBytes(f.toPath()), StandardCharsets.UTF_8);
  }

  static String runKiln(String... args) throws Exception {
    List<String> cmd = new ArrayList<>();
    cmd.add(kilnBinary);
    for (String a : args) {
      cmd.add(a);
    }
    // stdin from /dev/null: kiln run reads a prompt from a pipe on stdin when there is no -p.
    Process p = new ProcessBuilder(cmd).redirectInput(new File("/dev/null"))
                    .redirectError(ProcessBuilder.Redirect.DISCARD).start();
    byte[] out = p.getInputStream().readAllBytes();
    equal(0, p.waitFor(), "exit status of " + cmd);
    return new String(out, StandardCharsets.UTF_8);
  }

  static void deleteTree(File f) {
    File[] children = f.listFiles();
    if (children != null) {
      for (File c : children) {
        deleteTree(c);
      }
    }
    f.delete();
  }

  // ---- tests --------------------------------------------------------------------------------

  /** The options' defaults are what kiln.h's *_default_params() say (read through JNI). */
  static void defaultsAreTheCApis() {
    SessionOptions s = new SessionOptions();
    equal(0, s.nCtx(), "nCtx");
    equal(KvType.F32, s.kvType(), "kvType");
    equal(SessionOptions.SEED_RANDOM, s.seed(), "seed");
    equal(0.8f, s.temperature(), "temperature");
    equal(40, s.topK(), "topK");
    equal(0.95f, s.topP(), "topP");
    equal(0.05f, s.minP(), "minP");
    equal(1.0f, s.repeatPenalty(), "repeatPenalty");
    equal(64, s.repeatLastN(), "repeatLastN");
    equal(0, s.priority(), "priority");
    equal(null, s.systemPrompt(), "systemPrompt");
    GenerateOptions g = new GenerateOptions();
    equal(256, g.maxTokens(), "maxTokens");
    equal(null, g.addBos(), "addBos: the model's rule");
    equal(true, g.parseSpecial(), "parseSpecial");
    equal(0, g.stop().size(), "stop");
    RuntimeOptions r = new RuntimeOptions();
    equal(0, r.threads(), "threads");
    equal(0L, r.memoryBudgetBytes(), "memoryBudgetBytes");
    equal(PerfMode.BALANCED, r.perfMode(), "perfMode");
    ModelOptions m = new ModelOptions();
    equal(0, m.priority(), "model priority");
    equal(false, m.verify(), "verify");
    equal(true, m.prefault(), "prefault");
    equal(null, m.scheme(), "scheme");
    equal(false, m.noCache(), "noCache");
    equal(null, m.cacheDir(), "cacheDir");
    // Fluent setters chain and keep what they set.
    s = new SessionOptions().temperature(0f).nCtx(512).topK(1).seed(7);
    equal(0f, s.temperature(), "set temperature");
    equal(512, s.nCtx(), "set nCtx");
    equal(7L, s.seed(), "set seed");
    check(ai.kiln.Kiln.version().matches("[0-9]+\\.[0-9]+\\.[0-9]+"), "version " + ai.kiln.Kiln.version());
  }

  /** The shipped model, greedy, no prompt, 200 tokens: `kiln run --temp 0 -n 200`, and the golden. */
  static void greedyIsKilnRunAndTheGolden() throws Exception {
    String golden = readUtf8(new File(data, "golden/stories260K_greedy200.txt"));
    String cli = runKiln("run", "--temp", "0", "-n", "200");
    equal(golden, cli, "kiln run --temp 0 -n 200 against the golden");
    try (KilnRuntime rt = KilnRuntime.create(new RuntimeOptions().threads(1));
        KilnModel model = KilnModel.load(rt, shipped(), null);
        KilnSession s = model.newSession(new SessionOptions().temperature(0f).seed(42))) {
      String text = s.generate("", new GenerateOptions().maxTokens(200));
      equal(cli, text, "generate() against kiln run --temp 0");
      equal(200, s.lastStats().generatedTokens, "generated tokens");
      equal(StopReason.LENGTH, s.lastStats().stopReason, "stop reason");
      equal("llama", model.info().arch, "info().arch");
      equal(512, model.info().vocabSize, "info().vocabSize");
    }
  }

  /** A source model compiles once into cacheDir (loaded twice: one entry, the same text); noCache writes nothing. */
  static void compileCache() throws Exception {
    File cached = new File(work, "cache-on");
    File off = new File(work, "cache-off");
    check(off.mkdirs(), "mkdir " + off);
    String first = null;
    try (KilnRuntime rt = KilnRuntime.create(new RuntimeOptions().threads(1))) {
      for (int i = 0; i < 2; ++i) {
        try (KilnModel model = KilnModel.load(rt, shipped(), new ModelOptions().cacheDir(cached.getPath()));
            KilnSession s = model.newSession(new SessionOptions().temperature(0f))) {
          String text = s.generate("Once upon a time", new GenerateOptions().maxTokens(32));
          if (first == null) first = text;
          equal(first, text, "load " + (i + 1) + " through the cache");
        }
        File[] entries = cached.listFiles((d, name) -> name.endsWith(".kiln"));
        check(entries != null && entries.length == 1, "one .kiln entry in " + cached + " after load " + (i + 1));
      }
      try (KilnModel model = KilnModel.load(rt, shipped(), new ModelOptions().cacheDir(off.getPath()).noCache(true));
          KilnSession s = model.newSession(new SessionOptions().temperature(0f))) {
        equal(first, s.generate("Once upon a time", new GenerateOptions().maxTokens(32)), "noCache's text");
      }
      String[] left = off.list();
      check(left != null && left.length == 0, "noCache wrote nothing into " + off);
    }
  }

  static void streamedEqualsBlocking() throws Exception {
    try (KilnRuntime rt = KilnRuntime.create(new RuntimeOptions().threads(2));
        KilnModel model = KilnModel.load(rt, shipped(), null)) {
      for (float temp : new float[] {0f, 0.9f}) {
        SessionOptions so = new SessionOptions().temperature(temp).seed(1234);
        GenerateOptions go = new GenerateOptions().maxTokens(150);
        String blocking;
        try (KilnSession s = model.newSession(so)) {
          blocking = s.generate("Once upon a time", go);
        }
        try (KilnSession s = model.newSession(so)) {
          Collector c = new Collector();
          Cancellable call = s.generateAsync("Once upon a time", go, c);
          c.await();
          check(call.await(10, TimeUnit.SECONDS) && call.isDone(), "Cancellable.await after the end");
          check(c.error == null, "async error: " + c.error);
          equal(blocking, c.text(), "streamed pieces against the blocking result at temperature " + temp);
          check(c.pieces.size() > 50, "pieces: " + c.pieces.size());
          for (String p : c.pieces) {
            checkUtf16(p, "piece");
          }
          check(c.thread != Thread.currentThread() && c.thread != null, "callbacks on the caller's thread");
          equal(150, c.stats.generatedTokens, "async stats");
        }
      }
    }
  }

  /** A model that must say 你好😀 世界🌍, the 😀 as four byte tokens: every piece whole UTF-16. */
  static void cjkAndEmoji() throws Exception {
    File dir = new File(work, "chain");
    check(dir.mkdirs(), "mkdir");
    File path = ChainModel.write(dir);
    try (KilnRuntime rt = KilnRuntime.create(new RuntimeOptions().threads(1));
        KilnModel model = KilnModel.load(rt, path.getPath(), null);
        KilnSession s = model.newSession(new SessionOptions().temperature(0f))) {
      String text = s.generate("", new GenerateOptions().maxTokens(50));
      equal(ChainModel.TEXT, text, "blocking text");
      equal(StopReason.EOS, s.lastStats().stopReason, "stop reason");
      s.reset();
      Collector c = new Collector();
      s.generateAsync("", new GenerateOptions().maxTokens(50), c);
      c.await();
      check(c.error == null, "async error: " + c.error);
      equal(ChainModel.TEXT, c.text(), "streamed text");
      for (String p : c.pieces) {
        checkUtf16(p, "piece");
      }
      check(c.pieces.contains("\ud83d\ude00"), "the emoji made of four byte tokens arrives as one piece: " + c.pieces);
      // The binding's own detokenized text agrees with the CLI's.
      equal(ChainModel.TEXT, runKiln("run", path.getPath(), "--temp", "0", "-n", "50"), "kiln run on the chain model");
    }
  }

  static void cancelAsync() throws Exception {
    try (KilnRuntime rt = KilnRuntime.create(new RuntimeOptions().threads(1));
        KilnModel model = KilnModel.load(rt, shipped(), null);
        KilnSession s = model.newSession(new SessionOptions().temperature(0f))) {
      AtomicInteger count = new AtomicInteger();
      CountDownLatch twenty = new CountDownLatch(1);
      Collector c = new SlowCollector() {
        @Override
        public synchronized void onToken(String t) {
          super.onToken(t);
          if (count.incrementAndGet() == 20) {
            twenty.countDown();
          }
        }
      };
      Cancellable call = s.generateAsync("", new GenerateOptions().maxTokens(100000), c);
      check(twenty.await(60, TimeUnit.SECONDS), "20 tokens");
      AtomicInteger atCancel = new AtomicInteger();
      Thread other = new Thread(() -> {
        call.cancel();
        atCancel.set(count.get());
      });
      other.start();
      other.join();
      c.await();
      check(c.error != null, "a cancelled call ends in onError");
      equal(KilnStatus.CANCELLED, c.error.status(), "status");
      check(count.get() - atCancel.get() <= 1, "tokens after cancel(): " + (count.get() - atCancel.get()));
      check(count.get() < 500, "generated " + count.get());
      // The session goes on: a greedy turn afterwards equals a fresh session's.
      s.reset();
      String after = s.generate("Once upon a time", new GenerateOptions().maxTokens(30));
      try (KilnSession fresh = model.newSession(new SessionOptions().temperature(0f))) {
        equal(fresh.generate("Once upon a time", new GenerateOptions().maxTokens(30)), after, "after cancel");
      }
    }
  }

  static void cancelBlocking() throws Exception {
    try (KilnRuntime rt = KilnRuntime.create(new RuntimeOptions().threads(1));
        KilnModel model = KilnModel.load(rt, shipped(), null);
        KilnSession s = model.newSession(new SessionOptions().temperature(0f).nCtx(512))) {
      StringBuilder longPrompt = new StringBuilder();
      for (int i = 0; i < 40; ++i) {
        longPrompt.append("Once upon a time there was a cat. ");
      }
      AtomicBoolean done = new AtomicBoolean();
      Thread canceller = new Thread(() -> {
        while (!done.get()) {
          s.cancel();
          Thread.onSpinWait();
        }
      });
      canceller.start();
      long t0 = System.nanoTime();
      KilnException e;
      try {
        e = expectThrows(() -> s.generate(longPrompt.toString(), new GenerateOptions().maxTokens(100000)),
            KilnStatus.CANCELLED, "cancelled prefill");
      } finally {
        done.set(true);
        canceller.join();
      }
      check((System.nanoTime() - t0) / 1e6 < 5000, "took " + (System.nanoTime() - t0) / 1e6 + " ms");
      check(e.getMessage().contains("cancelled"), "message: " + e.getMessage());
      String after = s.generate("Once upon a time", new GenerateOptions().maxTokens(30));
      try (KilnSession fresh = model.newSession(new SessionOptions().temperature(0f).nCtx(512))) {
        equal(fresh.generate("Once upon a time", new GenerateOptions().maxTokens(30)), after, "after cancel");
      }
    }
  }

  static void twoThreads() throws Exception {
    try (KilnRuntime rt = KilnRuntime.create(new RuntimeOptions().threads(2));
        KilnModel model = KilnModel.load(rt, shipped(), null)) {
      String[] prompts = {"Once upon a time", "The cat"};
      SessionOptions[] opts = {new SessionOptions().temperature(0f).seed(100),
          new SessionOptions().temperature(0.8f).seed(101)};
      String[] solo = new String[2];
      for (int i = 0; i < 2; ++i) {
        try (KilnSession s = model.newSession(opts[i])) {
          solo[i] = s.generate(prompts[i], new GenerateOptions().maxTokens(80));
        }
      }
      String[] got = new String[2];
      AtomicReference<Throwable> failure = new AtomicReference<>();
      CountDownLatch start = new CountDownLatch(1);
      Thread[] threads = new Thread[2];
      for (int i = 0; i < 2; ++i) {
        final int k = i;
        threads[i] = new Thread(() -> {
          try (KilnSession s = model.newSession(opts[k])) {
            start.await();
            got[k] = s.generate(prompts[k], new GenerateOptions().maxTokens(80));
          } catch (Throwable t) {
            failure.set(t);
          }
        });
        threads[i].start();
      }
      start.countDown();
      for (Thread t : threads) {
        t.join();
      }
      check(failure.get() == null, "thread failed: " + failure.get());
      for (int i = 0; i < 2; ++i) {
        equal(solo[i], got[i], "session " + i);
      }
    }
  }

  /**
   * A .kiln stored in a zip (as an APK keeps an uncompressed asset) at a 16 KB-aligned offset, loaded
   * by (fd, offset, length) as AssetFileDescriptor gives them; at an unaligned offset, refused.
   */
  static void loadFromFd() throws Exception {
    File kiln = new File(work, "fd.kiln");
    runKiln("compile", shipped(), "-q", "w8a16", "-o", kiln.getPath());
    byte[] model = Files.readAllBytes(kiln.toPath());
    try (KilnRuntime rt = KilnRuntime.create(new RuntimeOptions().threads(1))) {
      String want;
      try (KilnModel m = KilnModel.load(rt, kiln.getPath(), null);
          KilnSession s = m.newSession(new SessionOptions().temperature(0f))) {
        want = s.generate("Once upon a time", new GenerateOptions().maxTokens(24));
      }
      for (int align : new int[] {16384, 1}) {
        File zip = new File(work, "app-" + align + ".zip");
        long offset = writeStoredZip(zip, "assets/model.kiln", model, align);
        try (java.io.FileInputStream in = new java.io.FileInputStream(zip)) {
          check(in.getFD().valid(), "the zip is open");
          int fd = fdOf(zip);
          if (align == 16384) {
            equal(0L, offset % 16384, "aligned offset");
            try (KilnModel m = KilnModel.loadFromFd(rt, fd, offset, model.length, null);
                KilnSession s = m.newSession(new SessionOptions().temperature(0f))) {
              equal("kiln", m.info().kind, "kind");
              equal(want, s.generate("Once upon a time", new GenerateOptions().maxTokens(24)), "text by descriptor");
            }
          } else {
            KilnException e = expectThrows(() -> KilnModel.loadFromFd(rt, fd, offset, model.length, null),
                KilnStatus.INVALID_ARGUMENT, "unaligned entry");
            check(e.getMessage().contains("offset " + offset + " is not a multiple of 16384"), e.getMessage());
          }
        }
      }
      expectThrows(() -> KilnModel.loadFromFd(rt, 0, -1, 0, null), KilnStatus.INVALID_ARGUMENT, "negative offset");
    }
  }

  /** The descriptor number the JVM opened `f` under (this process's /proc/self/fd), as Android's getFd() gives it. */
  static int fdOf(File f) throws IOException {
    java.nio.file.Path want = f.toPath().toRealPath();
    File[] fds = new File("/proc/self/fd").listFiles();
    for (File d : fds != null ? fds : new File[0]) {
      try {
        if (Files.readSymbolicLink(d.toPath()).equals(want)) {
          return Integer.parseInt(d.getName());
        }
      } catch (IOException e) {
        // a descriptor closed meanwhile
      }
    }
    throw new IOException("no descriptor of " + f + " in /proc/self/fd");
  }

  /**
   * A zip of one stored entry (method 0: zip -0, an APK's noCompress) after a 1000-byte stored
   * entry, its data padded to a multiple of `align` in the local header's extra field (zipalign's
   * way); returns the data's offset.
   */
  static long writeStoredZip(File zip, String name, byte[] data, int align) throws IOException {
    java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
    String[] names = {"lead.txt", name};
    byte[][] datas = {new byte[1000], data};
    int[] offsets = new int[2];
    long dataOffset = 0;
    for (int i = 0; i < 2; ++i) {
      byte[] n = names[i].getBytes(StandardCharsets.UTF_8);
      offsets[i] = out.size();
      int headerEnd = out.size() + 30 + n.length;
      int pad = i == 1 ? (align - headerEnd % align) % align : 0;
      java.util.zip.CRC32 crc = new java.util.zip.CRC32();
      crc.update(datas[i]);
      le(out, 0x04034b50, 4);
      le(out, 10, 2); le(out, 0, 2); le(out, 0, 2); le(out, 0, 2); le(out, 0x21, 2);
      le(out, crc.getValue(), 4); le(out, datas[i].length, 4); le(out, datas[i].length, 4);
      le(out, n.length, 2); le(out, pad, 2);
      out.write(n);
      out.write(new byte[pad]);
      if (i == 1) {
        dataOffset = out.size();
      }
      out.write(datas[i]);
    }
    int cdStart = out.size();
    for (int i = 0; i < 2; ++i) {
      byte[] n = names[i].getBytes(StandardCharsets.UTF_8);
      java.util.zip.CRC32 crc = new java.util.zip.CRC32();
      crc.update(datas[i]);
      le(out, 0x02014b50, 4);
      le(out, 20, 2); le(out, 10, 2); le(out, 0, 2); le(out, 0, 2); le(out, 0, 2); le(out, 0x21, 2);
      le(out, crc.getValue(), 4); le(out, datas[i].length, 4); le(out, datas[i].length, 4);
      le(out, n.length, 2); le(out, 0, 2); le(out, 0, 2); le(out, 0, 2); le(out, 0, 2);
      le(out, 0, 4); le(out, offsets[i], 4);
      out.write(n);
    }
    int cdSize = out.size() - cdStart;
    le(out, 0x06054b50, 4);
    le(out, 0, 2); le(out, 0, 2); le(out, 2, 2); le(out, 2, 2);
    le(out, cdSize, 4); le(out, cdStart, 4); le(out, 0, 2);
    Files.write(zip.toPath(), out.toByteArray());
    // The JDK's own reader agrees: the entry is stored and holds the bytes.
    try (java.util.zip.ZipFile z = new java.util.zip.ZipFile(zip)) {
      java.util.zip.ZipEntry e = z.getEntry(name);
      equal(java.util.zip.ZipEntry.STORED, e.getMethod(), "entry method");
      equal((long) data.length, e.getSize(), "entry size");
    }
    return dataOffset;
  }

  static void le(java.io.ByteArrayOutputStream out, long v, int bytes) {
    for (int i = 0; i < bytes; ++i) {
      out.write((int) (v >>> (8 * i)) & 0xFF);
    }
  }

  static void loadErrors() throws Exception {
    try (KilnRuntime rt = KilnRuntime.create(null)) {
      String missing = new File(work, "no-such-model.kiln").getPath();
      KilnException e = expectThrows(() -> KilnModel.load(rt, missing, null), null, "missing file");
      check(e.status() == KilnStatus.IO || e.status() == KilnStatus.NOT_FOUND, "status " + e);
      check(e.getMessage().contains(missing), "the message names the file: " + e.getMessage());
      // A .kiln with one byte of its weights changed: the checksum (verify) refuses it.
      File good = new File(work, "good.kiln");
      runKiln("compile", shipped(), "-o", good.getPath());
      File bad = new File(work, "bad.kiln");
      byte[] bytes = Files.readAllBytes(good.toPath());
      bytes[bytes.length - 100] ^= 0x5A;
      Files.write(bad.toPath(), bytes);
      e = expectThrows(() -> KilnModel.load(rt, bad.getPath(), new ModelOptions().verify(true)), KilnStatus.FORMAT,
          "corrupt .kiln");
      check(e.getMessage().contains(bad.getPath()), "the message names the file: " + e.getMessage());
      // A truncated one fails even without verify.
      File cut = new File(work, "cut.kiln");
      Files.write(cut.toPath(), java.util.Arrays.copyOf(bytes, 1000));
      e = expectThrows(() -> KilnModel.load(rt, cut.getPath(), null), KilnStatus.FORMAT, "truncated .kiln");
      check(e.getMessage().contains(cut.getPath()), "the message names the file: " + e.getMessage());
      equal("KILN_E_FORMAT", e.statusName(), "statusName");
      // The good one loads and generates what the source model does.
      try (KilnModel m = KilnModel.load(rt, good.getPath(), null);
          KilnSession s = m.newSession(new SessionOptions().temperature(0f))) {
        equal("kiln", m.info().kind, "kind");
        check(!s.generate("Once", new GenerateOptions().maxTokens(10)).isEmpty(), "generates");
      }
      // Bad arguments are KilnExceptions too, never NullPointerException or a crash.
      expectThrows(() -> KilnModel.load(rt, (String) null, null), KilnStatus.INVALID_ARGUMENT, "null path");
      expectThrows(() -> KilnModel.load(rt, "a\0b", null), KilnStatus.INVALID_ARGUMENT, "NUL in the path");
      expectThrows(() -> KilnModel.load(rt, (File) null, null), KilnStatus.INVALID_ARGUMENT, "null File");
      try (KilnModel m = KilnModel.load(rt, shipped(), null)) {
        expectThrows(() -> m.newSession(new SessionOptions().topP(2f)), KilnStatus.INVALID_ARGUMENT, "topP 2");
        try (KilnSession s = m.newSession(null)) {
          expectThrows(() -> s.generate(null, null), KilnStatus.INVALID_ARGUMENT, "null prompt");
          expectThrows(() -> s.generate("x", new GenerateOptions().maxTokens(-1)), KilnStatus.INVALID_ARGUMENT,
              "negative maxTokens");
          expectThrows(() -> s.generate("x", new GenerateOptions().stop("a", null)), KilnStatus.INVALID_ARGUMENT,
              "a null stop string");
          expectThrows(() -> s.generate("x\0y", null), KilnStatus.INVALID_ARGUMENT, "NUL in the prompt");
          expectThrows(() -> s.chat(java.util.Arrays.asList(Message.user("a"), null), null),
              KilnStatus.INVALID_ARGUMENT, "a null message");
        }
        // Stop strings work through the binding: the reply ends before the first one.
        try (KilnSession s = m.newSession(new SessionOptions().temperature(0f))) {
          String free = s.generate("Once upon a time", new GenerateOptions().maxTokens(40));
          s.reset();
          int space = free.indexOf(" ", 5);
          check(space > 0, "a space to stop at in <" + free + ">");
          String stopped = s.generate("Once upon a time",
              new GenerateOptions().maxTokens(40).stop((String[]) null).stop(free.substring(space, space + 2)));
          equal(free.substring(0, space), stopped, "stopped at the stop string");
          equal(StopReason.STRING, s.lastStats().stopReason, "stop reason");
        }
      }
    }
  }

  static void loadAsync() throws Exception {
    try (KilnRuntime rt = KilnRuntime.create(new RuntimeOptions().threads(1))) {
      Thread caller = Thread.currentThread();
      AtomicReference<KilnModel> loaded = new AtomicReference<>();
      AtomicReference<KilnException> error = new AtomicReference<>();
      AtomicBoolean progressOnCaller = new AtomicBoolean();
      AtomicInteger progressCalls = new AtomicInteger();
      AtomicReference<Thread> doneThread = new AtomicReference<>();
      Cancellable call = KilnModel.loadAsync(rt, shipped(), null, new LoadListener() {
        @Override
        public void onProgress(float f) {
          progressCalls.incrementAndGet();
          progressOnCaller.compareAndSet(false, Thread.currentThread() == caller);
        }

        @Override
        public void onLoaded(KilnModel m) {
          doneThread.set(Thread.currentThread());
          loaded.set(m);
        }

        @Override
        public void onError(KilnException e) {
          error.set(e);
        }
      });
      check(call.await(60, TimeUnit.SECONDS), "async load ended");
      check(error.get() == null, "error: " + error.get());
      check(progressCalls.get() > 0, "progress was reported");
      check(!progressOnCaller.get() && doneThread.get() != caller, "callbacks on the caller's thread");
      try (KilnModel m = loaded.get(); KilnSession s = m.newSession(new SessionOptions().temperature(0f).seed(42))) {
        String golden = readUtf8(new File(data, "golden/stories260K_greedy200.txt"));
        equal(golden, s.generate("", new GenerateOptions().maxTokens(200)), "the async-loaded model's greedy text");
      }
      // Cancelled at its first progress point: onError CANCELLED, no model.
      AtomicReference<Cancellable> self = new AtomicReference<>();
      CountDownLatch ready = new CountDownLatch(1);
      AtomicReference<KilnException> cancelled = new AtomicReference<>();
      self.set(KilnModel.loadAsync(rt, shipped(), null, new LoadListener() {
        @Override
        public void onProgress(float f) {
          try {
            ready.await();
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
          }
          self.get().cancel();
        }

        @Override
        public void onLoaded(KilnModel m) {
          m.close();
        }

        @Override
        public void onError(KilnException e) {
          cancelled.set(e);
        }
      }));
      ready.countDown();
      check(self.get().await(60, TimeUnit.SECONDS), "cancelled load ended");
      check(cancelled.get() != null, "a cancelled load ends in onError");
      equal(KilnStatus.CANCELLED, cancelled.get().status(), "status");
      // A missing file, async: onError with the C message.
      AtomicReference<KilnException> missing = new AtomicReference<>();
      Cancellable m = KilnModel.loadAsync(rt, "/nonexistent/model.kiln", null, new LoadListener() {
        @Override
        public void onLoaded(KilnModel model) {
          model.close();
        }

        @Override
        public void onError(KilnException e) {
          missing.set(e);
        }
      });
      check(m.await(60, TimeUnit.SECONDS), "ended");
      check(missing.get() != null && missing.get().getMessage().contains("/nonexistent/model.kiln"),
          "async missing file: " + missing.get());
    }
  }

  static void useAfterClose() throws Exception {
    KilnRuntime rt = KilnRuntime.create(null);
    KilnModel model = KilnModel.load(rt, shipped(), null);
    KilnSession s = model.newSession(new SessionOptions().temperature(0f));
    s.generate("Once", new GenerateOptions().maxTokens(5));
    s.close();
    s.close();  // twice is harmless
    KilnException e = expectThrows(() -> s.generate("Once", null), KilnStatus.INVALID_ARGUMENT, "closed session");
    check(e.getMessage().contains("closed"), e.getMessage());
    expectThrows(() -> s.generateAsync("Once", null, new Collector()), KilnStatus.INVALID_ARGUMENT, "closed, async");
    expectThrows(s::reset, KilnStatus.INVALID_ARGUMENT, "reset");
    expectThrows(() -> s.save(new File(work, "x.session")), KilnStatus.INVALID_ARGUMENT, "save");
    expectThrows(s::position, KilnStatus.INVALID_ARGUMENT, "position");
    s.cancel();  // a no-op, as kiln_session_cancel on an idle session
    // A session outlives its closed model (the C API keeps the weights until the last session goes).
    KilnSession alive = model.newSession(new SessionOptions().temperature(0f));
    model.close();
    expectThrows(() -> model.newSession(null), KilnStatus.INVALID_ARGUMENT, "closed model");
    expectThrows(model::info, KilnStatus.INVALID_ARGUMENT, "closed model info");
    check(!alive.generate("Once", new GenerateOptions().maxTokens(5)).isEmpty(), "the session outlives its model");
    alive.close();
    rt.close();
    expectThrows(() -> KilnModel.load(rt, shipped(), null), KilnStatus.INVALID_ARGUMENT, "closed runtime");
    expectThrows(rt::trim, KilnStatus.INVALID_ARGUMENT, "closed runtime trim");
    // Closing while an async call runs on another thread: the call ends (CANCELLED), nothing crashes.
    try (KilnRuntime rt2 = KilnRuntime.create(null); KilnModel m2 = KilnModel.load(rt2, shipped(), null)) {
      KilnSession busy = m2.newSession(null);
      Collector c = new SlowCollector();
      Collector queued = new Collector();
      busy.generateAsync("", new GenerateOptions().maxTokens(100000), c);
      busy.generateAsync("", new GenerateOptions().maxTokens(10), queued);
      Thread.sleep(20);
      busy.close();
      c.await();
      queued.await();
      check(c.error != null && c.error.status() == KilnStatus.CANCELLED, "running call: " + c.error);
      check(queued.error != null && queued.error.status() == KilnStatus.CANCELLED, "queued call: " + queued.error);
    }
  }

  // A Llama-2-like template (the one tests/chat_test.cpp gives stories260K): BOS, turns, EOS after each reply.
  static final String TEMPLATE = "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'system' %}"
      + "{{ m['content'] }}\n{% elif m['role'] == 'user' %}User: {{ m['content'] }}\n"
      + "{% else %}Bot: {{ m['content'] }}{{ eos_token }}\n{% endif %}{% endfor %}"
      + "{% if add_generation_prompt %}Bot:{% endif %}";

  static String jsonString(String s) {
    return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n") + "\"";
  }

  /** stories260K as a Hugging Face folder with TEMPLATE in its tokenizer_config.json. */
  static File chatModel() throws IOException {
    File dir = new File(work, "chat-stories260K");
    check(dir.mkdirs(), "mkdir");
    File[] files = new File(data, "stories260K-hf").listFiles();
    check(files != null, "stories260K-hf");
    for (File f : files) {
      Files.copy(f.toPath(), new File(dir, f.getName()).toPath());
    }
    File cfg = new File(dir, "tokenizer_config.json");
    String json = readUtf8(cfg);
    int brace = json.indexOf('{');
    json = json.substring(0, brace + 1) + "\n  \"chat_template\": " + jsonString(TEMPLATE) + "," + json.substring(brace + 1);
    Files.write(cfg.toPath(), json.getBytes(StandardCharsets.UTF_8));
    return dir;
  }

  static void chatWithTemplate() throws Exception {
    File dir = chatModel();
    String system = "You tell stories.";
    String cli = runKiln("run", dir.getPath(), "--chat", "-p", "Once upon a time", "--temp", "0", "-n", "12");
    String cliSystem = runKiln("run", dir.getPath(), "--chat", "--system", system, "-p", "Once upon a time", "--temp", "0",
        "-n", "12");
    GenerateOptions go = new GenerateOptions().maxTokens(12);
    try (KilnRuntime rt = KilnRuntime.create(null); KilnModel m = KilnModel.load(rt, dir.getPath(), null)) {
      check(m.info().hasChatTemplate, "the model has a chat template");
      try (KilnSession s = m.newSession(new SessionOptions().temperature(0f))) {
        equal(cli, s.chat(List.of(Message.user("Once upon a time")), go), "chat() against kiln run --chat");
      }
      // SessionOptions.systemPrompt is sent as the first message ...
      try (KilnSession s = m.newSession(new SessionOptions().temperature(0f).systemPrompt(system))) {
        equal(cliSystem, s.chat(List.of(Message.user("Once upon a time")), go), "systemPrompt against kiln run --system");
        // ... unless the conversation brings its own.
        s.reset();
        String cliOther = runKiln("run", dir.getPath(), "--chat", "--system", "Other.", "-p", "Once upon a time",
            "--temp", "0", "-n", "12");
        equal(cliOther, s.chat(List.of(Message.system("Other."), Message.user("Once upon a time")), go),
            "a conversation's own system message wins");
      }
      try (KilnSession s = m.newSession(new SessionOptions().temperature(0f).systemPrompt(system))) {
        Collector c = new Collector();
        s.chatAsync(List.of(Message.user("Once upon a time")), go, c);
        c.await();
        check(c.error == null, "chatAsync: " + c.error);
        equal(cliSystem, c.text(), "chatAsync's pieces");
        // The next turn reuses what the cache holds of the first.
        String reply2 = s.chat(List.of(Message.user("Once upon a time"), Message.assistant(c.text()),
            Message.user("Tell me more")), go);
        check(s.lastStats().reusedTokens > 0, "second turn reused nothing: " + s.lastStats());
        try (KilnSession fresh = m.newSession(new SessionOptions().temperature(0f).systemPrompt(system))) {
          equal(fresh.chat(List.of(Message.user("Once upon a time"), Message.assistant(c.text()),
              Message.user("Tell me more")), go), reply2, "second turn against a fresh session");
        }
      }
    }
  }

  /** In a JVM whose kiln.library does not exist: each way in throws KilnException NOT_FOUND. */
  static void withoutLibrary() {
    int ok = 0;
    Test[] ways = {() -> new SessionOptions(), () -> new GenerateOptions(), () -> new ModelOptions(),
        () -> new ai.kiln.SamplingOptions(),
        () -> KilnRuntime.create(null), () -> ai.kiln.Kiln.version()};
    for (Test t : ways) {
      try {
        t.run();
      } catch (KilnException e) {
        if (e.status() == KilnStatus.NOT_FOUND && e.getMessage().contains("libkiln_jni could not be loaded")) {
          ++ok;
        }
      } catch (Throwable e) {
        System.out.println("escaped: " + e);
      }
    }
    System.out.println("without library: " + ok + " of " + ways.length + " KilnException NOT_FOUND");
  }

  static void missingLibrary() throws Exception {
    String java = new File(System.getProperty("java.home"), "bin/java").getPath();
    Process p = new ProcessBuilder(java, "-Dkiln.library=" + new File(work, "no-such-libkiln_jni.so").getPath(), "-cp",
        System.getProperty("java.class.path"), "ai.kiln.test.JavaTests", "--without-library")
        .redirectErrorStream(true).start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    equal(0, p.waitFor(), "exit status");
    equal("without library: 6 of 6 KilnException NOT_FOUND\n", out, "output");
  }

  /** Models and sessions nobody closed: the collector finds them, the cleaner frees them natively. */
  static void cleaner() throws Exception {
    try (KilnRuntime rt = KilnRuntime.create(null)) {
      for (int i = 0; i < 3; ++i) {
        KilnModel m = KilnModel.load(rt, shipped(), null);
        m.newSession(null).generate("Once", new GenerateOptions().maxTokens(2));
        m.newSession(null);
      }
      equal(3, rt.stats().nModels, "models before");
      equal(6, rt.stats().nSessions, "sessions before");
      long deadline = System.nanoTime() + 10_000_000_000L;
      while ((rt.stats().nSessions > 0 || rt.stats().nModels > 0) && System.nanoTime() < deadline) {
        System.gc();
        Thread.sleep(10);
      }
      equal(0, rt.stats().nSessions, "sessions after the collector");
      equal(0, rt.stats().nModels, "models after the collector");
    }
  }

  static void saveRestoreResetChat() throws Exception {
    try (KilnRuntime rt = KilnRuntime.create(null);
        KilnModel model = KilnModel.load(rt, shipped(), null);
        KilnSession a = model.newSession(new SessionOptions().temperature(0f).nCtx(256));
        KilnSession b = model.newSession(new SessionOptions().temperature(0f).nCtx(256))) {
      String first = a.generate("Once upon a time", new GenerateOptions().maxTokens(20));
      int pos = a.position();
      check(pos > 20, "position " + pos);
      File f = new File(work, "a.session");
      a.save(f);
      b.restore(f);
      equal(pos, b.position(), "restored position");
      String cont = "Once upon a time" + first + " The end.";
      String ra = a.generate(cont, new GenerateOptions().maxTokens(20));
      String rb = b.generate(cont, new GenerateOptions().maxTokens(20));
      equal(ra, rb, "continuations after restore");
      check(b.lastStats().reusedTokens >= pos - 1, "the restored cache is reused: " + b.lastStats());
      b.reset();
      equal(0, b.position(), "after reset");
      // A damaged file is refused, and the session is unchanged.
      File bad = new File(work, "bad.session");
      byte[] bytes = Files.readAllBytes(f.toPath());
      bytes[bytes.length / 2] ^= 1;
      Files.write(bad.toPath(), bytes);
      expectThrows(() -> b.restore(bad), KilnStatus.FORMAT, "damaged session file");
      equal(0, b.position(), "unchanged");
      // The shipped model has no chat template: chat is NOT_FOUND, with the C message.
      KilnException e = expectThrows(() -> a.chat(List.of(Message.user("hi")), null), KilnStatus.NOT_FOUND, "chat");
      check(!e.getMessage().isEmpty(), "message");
      Collector c = new Collector();
      a.chatAsync(List.of(Message.user("hi")), null, c);
      c.await();
      check(c.error != null && c.error.status() == KilnStatus.NOT_FOUND, "chatAsync: " + c.error);
      check(rt.trim() >= 0, "trim");
    }
  }

  static void listenerFailures() throws Exception {
    try (KilnRuntime rt = KilnRuntime.create(null); KilnModel model = KilnModel.load(rt, shipped(), null)) {
      // onToken throws: the call stops and ends in onError (a KilnException carrying the cause).
      try (KilnSession s = model.newSession(new SessionOptions().temperature(0f))) {
        Collector c = new Collector() {
          @Override
          public synchronized void onToken(String t) {
            super.onToken(t);
            throw new IllegalStateException("listener bug");
          }
        };
        s.generateAsync("Once", new GenerateOptions().maxTokens(50), c);
        c.await();
        equal(1, c.pieces.size(), "pieces before the stop");
        check(c.error != null && c.error.getCause() instanceof IllegalStateException, "error: " + c.error);
        s.reset();
        try (KilnSession fresh = model.newSession(new SessionOptions().temperature(0f))) {
          equal(fresh.generate("Once", new GenerateOptions().maxTokens(10)),
              s.generate("Once", new GenerateOptions().maxTokens(10)), "the session still works");
        }
      }
      // A callback that calls its own session: KILN_E_REENTRANT, not a deadlock.
      try (KilnSession s = model.newSession(new SessionOptions().temperature(0f))) {
        AtomicReference<KilnException> inner = new AtomicReference<>();
        Collector c = new Collector() {
          @Override
          public synchronized void onToken(String t) {
            super.onToken(t);
            if (inner.get() == null) {
              try {
                s.generate("x", null);
              } catch (KilnException e) {
                inner.set(e);
              }
            }
          }
        };
        s.generateAsync("Once", new GenerateOptions().maxTokens(5), c);
        c.await();
        check(inner.get() != null && inner.get().status() == KilnStatus.REENTRANT, "inner: " + inner.get());
        check(c.error == null, "the outer call goes on: " + c.error);
      }
      // A listener that calls its session while another thread closes it: the call fails as closed
      // (close() waits for the listener, so the listener must not wait for close()), nothing hangs.
      for (int round = 0; round < 20; ++round) {
        KilnSession busy = model.newSession(null);
        CountDownLatch started = new CountDownLatch(1);
        AtomicReference<Cancellable> call = new AtomicReference<>();
        AtomicInteger refused = new AtomicInteger();
        Collector c = new Collector() {
          @Override
          public synchronized void onToken(String t) {
            super.onToken(t);
            started.countDown();
            try {
              busy.position();
              Cancellable self = call.get();
              if (self != null && pieces.size() > 1000) {
                self.cancel();
              }
            } catch (KilnException e) {
              refused.incrementAndGet();
            }
          }
        };
        call.set(busy.generateAsync("", new GenerateOptions().maxTokens(100000), c));
        check(started.await(60, TimeUnit.SECONDS), "started");
        busy.close();
        c.await();
        check(c.error != null && c.error.status() == KilnStatus.CANCELLED, "ended by close: " + c.error);
      }
      // close() from inside the session's own callback: the call ends, the session is freed after it.
      KilnSession s = model.newSession(new SessionOptions().temperature(0f));
      AtomicInteger after = new AtomicInteger();
      Collector c = new Collector() {
        @Override
        public synchronized void onToken(String t) {
          super.onToken(t);
          if (pieces.size() == 3) {
            s.close();
          } else if (pieces.size() > 3) {
            after.incrementAndGet();
          }
        }
      };
      s.generateAsync("", new GenerateOptions().maxTokens(1000), c);
      c.await();
      check(after.get() <= 1, "pieces after close: " + after.get());
      check(c.error != null && c.error.status() == KilnStatus.CANCELLED, "error: " + c.error);
      expectThrows(() -> s.generate("x", null), KilnStatus.INVALID_ARGUMENT, "closed from its callback");
    }
  }

  /** ModelInfo, GenerationStats, RuntimeStats and SessionStats print every field. */
  static void infoAndStatsStrings() throws Exception {
    try (KilnRuntime rt = KilnRuntime.create(new RuntimeOptions().threads(1).memoryBudgetBytes(1L << 30));
        KilnModel model = KilnModel.load(rt, shipped(), null);
        KilnSession s = model.newSession(new SessionOptions().temperature(0f).nCtx(64))) {
      equal("ModelInfo[arch=llama, kind=llama2c, scheme=f32, nParams=260032, vocabSize=512, nLayers=5, dim=64, "
              + "nHeads=8, nKvHeads=4, headDim=8, nCtxMax=512, bosId=1, eosId=2, hasChatTemplate=false, "
              + "weightBytes=1050368, fileBytes=0]",
          model.info().toString(), "ModelInfo of the shipped model");
      s.generate("Once upon a time", new GenerateOptions().maxTokens(10));
      SessionStats ss = s.stats();
      // "Once upon a time" is BOS and 4 tokens; the last of the 10 new ones is not decoded yet.
      equal("SessionStats[nCtx=64, position=14, reservedBytes=" + ss.reservedBytes + ", generating=false, evicted=false]",
          ss.toString(), "SessionStats after a call");
      check(ss.reservedBytes > 0, "reserved bytes " + ss);
      RuntimeStats r = rt.stats();
      equal("RuntimeStats[memoryBudgetBytes=1073741824, heldBytes=" + r.heldBytes + ", peakHeldBytes=" + r.peakHeldBytes
              + ", nThreads=1, nModels=1, nSessions=1, nEvictions=0, decodeSteps=9, decodeTokens=9]",
          r.toString(), "RuntimeStats after a call");
    }
    // Fixed numbers through the constructors, every field in its place.
    equal("RuntimeStats[memoryBudgetBytes=1, heldBytes=2, peakHeldBytes=3, nThreads=4, nModels=5, nSessions=6, "
            + "nEvictions=7, decodeSteps=8, decodeTokens=9]",
        make(RuntimeStats.class, "memoryBudgetBytes", 1L, "heldBytes", 2L, "peakHeldBytes", 3L, "nThreads", 4, "nModels", 5,
            "nSessions", 6, "nEvictions", 7, "decodeSteps", 8L, "decodeTokens", 9L).toString(), "RuntimeStats");
    equal("SessionStats[nCtx=512, position=37, reservedBytes=1048576, generating=true, evicted=false]",
        make(SessionStats.class, "nCtx", 512, "position", 37, "reservedBytes", 1L << 20, "generating", true, "evicted",
            false).toString(), "SessionStats");
    equal("40 tokens (EOS), prompt 6 (2 reused), first after 2.5 ms, prefill 2400.0 tok/s, decode 1500.3 tok/s",
        make(GenerationStats.class, "stopReason", StopReason.EOS, "promptTokens", 6, "reusedTokens", 2, "generatedTokens", 40,
            "timeToFirstTokenMs", 2.5, "prefillTokensPerSecond", 2400.0, "decodeTokensPerSecond", 1500.25).toString(),
        "GenerationStats");
  }

  /** getMessage() and toString() start with the status's name; detail() is the message alone. */
  static void exceptionStrings() throws Exception {
    KilnException e = new KilnException(KilnStatus.BUDGET, "needs 5 bytes");
    equal("KILN_E_BUDGET: needs 5 bytes", e.getMessage(), "getMessage");
    equal("KilnException: KILN_E_BUDGET: needs 5 bytes", e.toString(), "toString");
    equal("needs 5 bytes", e.detail(), "detail");
    equal("KILN_E_BUDGET", e.statusName(), "statusName");
    java.lang.reflect.Constructor<KilnException> fromC = KilnException.class.getDeclaredConstructor(int.class, String.class);
    fromC.setAccessible(true);
    KilnException unknown = fromC.newInstance(42, "odd");
    equal("KILN_E_UNKNOWN(42): odd", unknown.getMessage(), "an unknown status");
    equal(KilnStatus.UNKNOWN, unknown.status(), "its KilnStatus");
    equal(42, unknown.code(), "its C value kept");
    equal("KILN_E_BUFFER_TOO_SMALL: short", fromC.newInstance(12, "short").getMessage(), "a C value maps by value");
    // One thrown by the C API: its kiln_last_error() text after the name.
    try (KilnRuntime rt = KilnRuntime.create(null)) {
      String missing = new File(work, "no-such-model.kiln").getPath();
      KilnException thrown = expectThrows(() -> KilnModel.load(rt, missing, null), KilnStatus.NOT_FOUND, "missing");
      equal("KILN_E_NOT_FOUND: " + thrown.detail(), thrown.getMessage(), "getMessage of a C API failure");
      equal(missing + ": no such file or folder", thrown.detail(), "the C message");
    }
  }

  /** grammar and jsonSchema: the reply is what they allow (blocking and async); a bad one names its place. */
  static void constrainedOutput() throws Exception {
    try (KilnRuntime rt = KilnRuntime.create(new RuntimeOptions().threads(2));
        KilnModel model = KilnModel.load(rt, shipped(), null)) {
      equal(null, new GenerateOptions().grammar(), "grammar default");
      equal(null, new GenerateOptions().jsonSchema(), "jsonSchema default");
      for (long seed = 1; seed <= 4; ++seed) {
        try (KilnSession s = model.newSession(new SessionOptions().temperature(1f).seed(seed))) {
          String yes = s.generate("Once", new GenerateOptions().grammar("root ::= (\"yes\" | \"no\") \"!\"").maxTokens(20));
          check(yes.equals("yes!") || yes.equals("no!"), "grammar reply <" + yes + ">");
          equal(StopReason.EOS, s.lastStats().stopReason, "a grammar's end is a stop token's place");
          String schema = "{\"type\": \"object\", \"properties\": {\"pet\": {\"enum\": [\"cat\", \"dog\"]}, "
              + "\"n\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 9}}, \"required\": [\"pet\", \"n\"], "
              + "\"additionalProperties\": false}";
          Collector c = new Collector();
          s.generateAsync("Once", new GenerateOptions().jsonSchema(schema).maxTokens(60), c);
          c.await();
          equal(null, c.error, "async json schema error");
          String json = c.text().replaceAll("\\s", "");
          check(json.matches("\\{\"pet\":\"(cat|dog)\",\"n\":[1-9]\\}"), "json schema reply <" + c.text() + ">");
        }
      }
      // A lazy grammar: the greedy text up to the trigger, the grammar from there (here the model's own sentence, ended at its period).
      try (KilnSession s = model.newSession(new SessionOptions().temperature(0f))) {
        String free = s.generate("Once upon a time", new GenerateOptions().maxTokens(60));
        int she = free.indexOf(" She");
        check(she > 0, "the free text has the trigger: <" + free + ">");
        String lazy = s.generate("Once upon a time", new GenerateOptions().maxTokens(60)
            .grammar("root ::= \" She\" [^.]* \".\"").grammarTrigger(" She"));
        equal(free.substring(0, free.indexOf('.', she) + 1), lazy, "a lazy grammar's reply");
        equal(StopReason.EOS, s.lastStats().stopReason, "the lazy grammar's end");
      }
      try (KilnSession s = model.newSession(null)) {
        KilnException e = expectThrows(() -> s.generate("x", new GenerateOptions().grammar("root ::= \"a\" |\nfoo ::= (")),
            KilnStatus.INVALID_ARGUMENT, "a grammar that does not parse");
        check(e.detail().contains("line 2"), "the grammar error names its line: " + e.detail());
        e = expectThrows(() -> s.generate("x", new GenerateOptions().jsonSchema("{\"type\": \"string\", \"not\": {}}")),
            KilnStatus.INVALID_ARGUMENT, "an unsupported schema keyword");
        check(e.detail().contains("'not'"), "the schema error names the keyword: " + e.detail());
        expectThrows(() -> s.generate("x", new GenerateOptions().grammar("root ::= \"a\"").jsonSchema("{}")),
            KilnStatus.INVALID_ARGUMENT, "grammar and jsonSchema both");
        expectThrows(() -> s.generate("x", new GenerateOptions().grammarTrigger("a")),
            KilnStatus.INVALID_ARGUMENT, "a grammar trigger without a grammar");
        // The session goes on unconstrained.
        check(!s.generate("Once", new GenerateOptions().maxTokens(5)).isEmpty(), "a plain call after the errors");
      }
    }
  }

  /** A draft model (here the model itself: every draft accepted) and prompt lookup: greedy text unchanged, counts reported. */
  static void speculative() throws Exception {
    try (KilnRuntime rt = KilnRuntime.create(new RuntimeOptions().threads(2));
        KilnModel model = KilnModel.load(rt, shipped(), null);
        KilnModel draft = KilnModel.load(rt, shipped(), null)) {
      GenerateOptions plain = new GenerateOptions().maxTokens(120);
      String want;
      try (KilnSession s = model.newSession(new SessionOptions().temperature(0f))) {
        want = s.generate("Once upon a time", plain);
        equal(0, s.lastStats().draftedTokens, "drafted without speculation");
      }
      try (KilnSession s = model.newSession(new SessionOptions().temperature(0f))) {
        GenerateOptions o = new GenerateOptions().maxTokens(120).draftModel(draft).draftMax(4);
        equal(draft, o.draftModel(), "draftModel kept");
        equal(want, s.generate("Once upon a time", o), "greedy text with a draft model");
        GenerationStats g = s.lastStats();
        check(g.draftedTokens > 0 && g.acceptedTokens == g.draftedTokens, "the model drafting for itself: " + g);
        check(g.targetSteps < g.generatedTokens, "fewer model steps than tokens: " + g);
        check(g.toString().contains("drafted"), "toString shows the counts: " + g);
        Collector c = new Collector();
        s.reset();
        s.generateAsync("Once upon a time", o, c);
        c.await();
        equal(want, c.text(), "greedy text with a draft model, async");
        check(c.stats.draftedTokens > 0, "async counts: " + c.stats);
      }
      try (KilnSession s = model.newSession(new SessionOptions().temperature(0f))) {
        equal(want, s.generate("Once upon a time", new GenerateOptions().maxTokens(120).lookupNgram(2)), "greedy text with lookup");
        equal(2, new GenerateOptions().lookupNgram(2).lookupNgram(), "lookupNgram kept");
        expectThrows(() -> s.generate("x", new GenerateOptions().lookupNgram(-1)), KilnStatus.INVALID_ARGUMENT, "a negative n-gram");
      }
      // A closed draft model is refused before anything runs.
      KilnModel closed = KilnModel.load(rt, shipped(), null);
      closed.close();
      try (KilnSession s = model.newSession(null)) {
        expectThrows(() -> s.generate("x", new GenerateOptions().draftModel(closed)), null, "a closed draft model");
      }
    }
  }
}
