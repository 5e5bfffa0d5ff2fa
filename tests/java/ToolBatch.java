// tests/kafka44/test_tidelake_on_kafka44.py: Kafka 4.4's command-line tools run in one JVM, one after the other
// (a JVM's start and class loading is most of a tool's time on two cores). Each line of stdin is one command: the
// tool's main class, then its arguments, tab-separated. Each command's stdout and stderr are captured apart and
// written, after the command, as
//   ==> <exit code>\t<stdout length>\t<stderr length>\n<stdout><stderr>
// (lengths in UTF-8 bytes). A tool's Exit.exit becomes its exit code here (Kafka's Exit procedure is replaced),
// so one failing command does not end the batch. The first Exit.exit of a command is its code: a tool that exits
// inside a try (TopicCommand's execute does, in a finally) sees the exception thrown instead, and exits again.
// The tools' log lines (WARN and up) go to this JVM's own stderr, not into a command's output: log4j is configured
// and started before the first command redirects System.err.
import org.apache.kafka.common.utils.internals.Exit;

import java.io.*;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;

public class ToolBatch {
  static final class ExitCalled extends RuntimeException {
    final int code;
    ExitCalled(int code) { super(null, null, false, false); this.code = code; }
  }

  static Integer firstExit;  // the command's first Exit.exit code, or null

  static void exit(int code) {
    if (firstExit == null) firstExit = code;
    throw new ExitCalled(code);
  }

  static final String LOG4J2 = String.join("\n",
      "rootLogger.level = WARN", "rootLogger.appenderRef.err.ref = err", "appender.err.type = Console",
      "appender.err.name = err", "appender.err.target = SYSTEM_ERR", "appender.err.layout.type = PatternLayout",
      "appender.err.layout.pattern = %p %m (%c)%n", "");

  public static void main(String[] a) throws Exception {
    PrintStream realOut = System.out, realErr = System.err;
    java.nio.file.Path log4j = java.nio.file.Files.createTempFile("tool-batch-log4j2", ".properties");
    java.nio.file.Files.writeString(log4j, LOG4J2);
    log4j.toFile().deleteOnExit();
    System.setProperty("log4j2.configurationFile", log4j.toString());
    org.apache.logging.log4j.LogManager.getLogger(ToolBatch.class);  // started now, bound to the real stderr
    Exit.setExitProcedure((code, message) -> exit(code));
    Exit.setHaltProcedure((code, message) -> exit(code));
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    String line;
    while ((line = in.readLine()) != null) {
      if (line.isEmpty()) continue;
      String[] parts = line.split("\t", -1);
      String[] args = java.util.Arrays.copyOfRange(parts, 1, parts.length);
      ByteArrayOutputStream out = new ByteArrayOutputStream(), err = new ByteArrayOutputStream();
      System.setOut(new PrintStream(out, true, StandardCharsets.UTF_8));
      System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
      int code = 0;
      firstExit = null;
      try {
        Method m = Class.forName(parts[0]).getMethod("main", String[].class);
        m.invoke(null, (Object) args);
      } catch (InvocationTargetException e) {
        Throwable cause = e.getCause();
        if (cause instanceof ExitCalled) code = ((ExitCalled) cause).code;
        else { cause.printStackTrace(); code = 99; }
      } catch (Throwable t) {
        t.printStackTrace();
        code = 98;
      } finally {
        System.out.flush();
        System.err.flush();
        System.setOut(realOut);
        System.setErr(realErr);
      }
      if (firstExit != null) code = firstExit;
      byte[] o = out.toByteArray(), e = err.toByteArray();
      realOut.print("==> " + code + "\t" + o.length + "\t" + e.length + "\n");
      realOut.flush();
      realOut.write(o);
      realOut.write(e);
      realOut.flush();
    }
  }
}
