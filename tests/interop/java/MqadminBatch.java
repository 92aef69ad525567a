// RocketMQ 4.9.8's own mqadmin, several commands in one JVM: each command line is handed to
// MQAdminStartup.main0 -- what bin/mqadmin runs -- one after the other, its output between markers
// (stderr joined to stdout, so a command's stack trace stays with it). Saves a JVM start per command.
// Each command gets fresh SubCommand objects, as in a process of its own (sendMessage keeps its producer in
// its SubCommand: a second one in the same JVM would find it shut down).
//
//   rmq-java MqadminBatch.java COMMAND ARGS... [";" COMMAND ARGS...]...
//   prints  @@BEGIN <n>  <what the n-th command printed> <a newline>  @@END <n>   (n from 0), a line each marker
import java.lang.reflect.Field;
import java.util.ArrayList;
import java.util.List;
import org.apache.rocketmq.tools.command.MQAdminStartup;

public class MqadminBatch {
    public static void main(String[] args) throws Exception {
        System.setErr(System.out);
        Field registered = MQAdminStartup.class.getDeclaredField("subCommandList");
        registered.setAccessible(true);
        List<String> command = new ArrayList<>();
        int n = 0;
        for (int i = 0; i <= args.length; i++) {
            if (i < args.length && !args[i].equals(";")) {
                command.add(args[i]);
                continue;
            }
            System.out.println("@@BEGIN " + n);
            ((List<?>) registered.get(null)).clear();  // main0 registers every SubCommand anew
            MQAdminStartup.main0(command.toArray(new String[0]), null);
            System.out.println();  // a command may end without a newline
            System.out.println("@@END " + n);
            command.clear();
            n++;
        }
        System.exit(0);  // the admin clients' threads are not all daemons
    }
}
