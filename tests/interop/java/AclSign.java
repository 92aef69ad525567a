// The signature RocketMQ 4.9.8's AclClientRPCHook puts on a request, computed by the real AclUtils.
//
//   rmq-java AclSign.java CASE [";" CASE]...
//   CASE = NAME SECRET_KEY BODY KEY=VALUE...      (BODY "-": no body)
//
// The request carries the KEY=VALUE pairs as extFields (AccessKey among them, as the hook adds it);
// prints per case  CASE NAME <base64 HMAC-SHA1 of the values sorted by key, then the body>
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeMap;
import org.apache.rocketmq.acl.common.AclUtils;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;

public class AclSign {
    public static void main(String[] args) {
        List<String> one = new ArrayList<>();
        for (String arg : args) {
            if (arg.equals(";")) {
                sign(one);
                one.clear();
            } else {
                one.add(arg);
            }
        }
        sign(one);
    }

    static void sign(List<String> c) {
        RemotingCommand request = RemotingCommand.createRequestCommand(310, null);
        if (!c.get(2).equals("-")) {
            request.setBody(c.get(2).getBytes(StandardCharsets.UTF_8));
        }
        for (String field : c.subList(3, c.size())) {
            int eq = field.indexOf('=');
            request.addExtField(field.substring(0, eq), field.substring(eq + 1));
        }
        byte[] content = AclUtils.combineRequestContent(request, new TreeMap<>(request.getExtFields()));
        System.out.println("CASE " + c.get(0) + " " + AclUtils.calSignature(content, c.get(1)));
    }
}
