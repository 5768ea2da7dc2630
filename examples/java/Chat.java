// A console chat over kiln's Java binding: each reply streams token by token.
//
//   javac -cp kiln.jar Chat.java
//   java -cp kiln.jar:. Chat model.kiln [--system TEXT]   (libkiln_jni.so beside kiln.jar, as the build puts it)
//        [--max-tokens N] [--temp T] [--seed S]
//
// One user message per line; /clear starts over, /exit (or end of input) leaves. A model without a
// chat template (the shipped stories260K) gets plain continuation of the whole transcript instead.
import ai.kiln.Cancellable;
import ai.kiln.GenerateOptions;
import ai.kiln.GenerationStats;
import ai.kiln.KilnException;
import ai.kiln.KilnModel;
import ai.kiln.KilnRuntime;
import ai.kiln.KilnSession;
import ai.kiln.Message;
import ai.kiln.RuntimeOptions;
import ai.kiln.SessionOptions;
import ai.kiln.TokenListener;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

public final class Chat {
  public static void main(String[] args) throws Exception {
    if (args.length < 1) {
      System.err.println("usage: java -cp kiln.jar:. Chat MODEL [--system TEXT] [--max-tokens N] [--temp T] [--seed S]");
      System.exit(1);
    }
    String system = null;
    int maxTokens = 256;
    SessionOptions sessionOptions = new SessionOptions();
    for (int i = 1; i + 1 < args.length; i += 2) {
      switch (args[i]) {
        case "--system": system = args[i + 1]; break;
        case "--max-tokens": maxTokens = Integer.parseInt(args[i + 1]); break;
        case "--temp": sessionOptions.temperature(Float.parseFloat(args[i + 1])); break;
        case "--seed": sessionOptions.seed(Long.parseLong(args[i + 1])); break;
        default:
          System.err.println("chat: unknown option " + args[i]);
          System.exit(1);
      }
    }
    PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    try (KilnRuntime runtime = KilnRuntime.create(new RuntimeOptions());
        KilnModel model = KilnModel.load(runtime, args[0], null);
        KilnSession session = model.newSession(sessionOptions.systemPrompt(system))) {
      boolean chat = model.info().hasChatTemplate;
      GenerateOptions options = new GenerateOptions().maxTokens(maxTokens);
      List<Message> conversation = new ArrayList<>();
      StringBuilder transcript = new StringBuilder();
      String line;
      while ((line = in.readLine()) != null && !line.equals("/exit")) {
        if (line.equals("/clear")) {
          conversation.clear();
          transcript.setLength(0);
          session.reset();
          continue;
        }
        StringBuilder reply = new StringBuilder();
        TokenListener listener = new TokenListener() {
          @Override
          public void onToken(String text) {
            reply.append(text);
            out.print(text);  // on a kiln job thread, as each piece arrives
          }

          @Override
          public void onDone(GenerationStats stats) {
            System.err.println("\n[" + stats + "]");
          }

          @Override
          public void onError(KilnException e) {
            System.err.println("\n[" + e + "]");
          }
        };
        Cancellable call;
        if (chat) {
          conversation.add(Message.user(line));
          call = session.chatAsync(conversation, options, listener);
        } else {
          transcript.append(line);
          call = session.generateAsync(transcript.toString(), options, listener);
        }
        call.await(1, TimeUnit.DAYS);
        out.println();
        if (chat) {
          conversation.add(Message.assistant(reply.toString()));
        } else {
          transcript.append(reply);
        }
      }
    } catch (KilnException e) {
      System.err.println("chat: " + e);
      System.exit(2);
    }
  }
}
