// The signature RocketMQ 4.9.8's AclClientRPCHook puts on a request, computed by the real AclUtils.
//
//   rmq-java AclSign.java SECRET_KEY BODY KEY=VALUE...      (BODY "-": no body)
//
// The request carries the KEY=VALUE pairs as extFields (AccessKey among them, as the hook adds it);
// prints  SIGNATURE <base64 HMAC-SHA1 of the values sorted by key, then the body>
import java.nio.charset.StandardCharsets;
import java.util.TreeMap;
import org.apache.rocketmq.acl.common.AclUtils;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;

public class AclSign {
    public static void main(String[] args) {
        RemotingCommand request = RemotingCommand.createRequestCommand(310, null);
        if (!args[1].equals("-")) {
            request.setBody(args[1].getBytes(StandardCharsets.UTF_8));
        }
        for (int i = 2; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            request.addExtField(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        byte[] content = AclUtils.combineRequestContent(request, new TreeMap<>(request.getExtFields()));
        System.out.println("SIGNATURE " + AclUtils.calSignature(content, args[0]));
    }
}
