// tests/broker/test_streams_groups.py: Kafka 4.4's kafka-streams-groups (StreamsGroupCommand) run several times in one
// JVM (a JVM start per command would cost the suite seconds each).
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import org.apache.kafka.tools.streams.StreamsGroupCommand;

/** args: BOOTSTRAP COMMAND [";" COMMAND ...], each COMMAND the tool's arguments without --bootstrap-server; prints
 * "== ARGS" before and "== exit CODE" after each command's own output. */
public class StreamsGroupsTool {
    public static void main(String[] a) {
        List<String> command = new ArrayList<>();
        for (String arg : Arrays.copyOfRange(a, 1, a.length + 1)) {
            if (arg != null && !arg.equals(";")) { command.add(arg); continue; }
            List<String> full = new ArrayList<>(List.of("--bootstrap-server", a[0]));
            full.addAll(command);
            System.out.println("== " + String.join(" ", command));
            System.out.flush();
            int code = StreamsGroupCommand.execute(full.toArray(new String[0]));
            System.out.println("== exit " + code);
            System.out.flush();
            command.clear();
        }
    }
}
