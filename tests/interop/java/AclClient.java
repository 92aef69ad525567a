// The Java client of RocketMQ 4.9.8 with ACL: producers and a lite pull consumer, each with or without
// AclClientRPCHook (the client's signing), one line per case.
//
//   rmq-java AclClient.java CASE...
//   CASE = name,namesrv,accessKey,secretKey,op,topic,group,count     (accessKey "-": no hook)
//   op   = send     count messages "<name> i" to topic; prints  CASE name code=0 sent=<count>
//                   or, refused,  CASE name code=<response code> remark=<the broker's remark>
//        | consume  polls topic as group until count messages came (60 s at most);
//                   prints  CASE name code=0 got=<n> bodies=<sorted bodies, | between>
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.remoting.RPCHook;

public class AclClient {
    public static void main(String[] args) throws Exception {
        for (String arg : args) {
            String[] c = arg.split(",", -1);
            RPCHook hook = c[2].equals("-") ? null : new AclClientRPCHook(new SessionCredentials(c[2], c[3]));
            String line = c[4].equals("send") ? send(c[0], c[1], hook, c[5], c[6], Integer.parseInt(c[7]))
                : consume(c[1], hook, c[5], c[6], Integer.parseInt(c[7]));
            System.out.println("CASE " + c[0] + " " + line.replace("\n", "\\n"));
        }
        System.exit(0);  // the clients' threads are not all daemons
    }

    static String send(String name, String namesrv, RPCHook hook, String topic, String group, int count)
        throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer(group, hook);
        producer.setNamesrvAddr(namesrv);
        producer.setSendMsgTimeout(10000);
        producer.setRetryTimesWhenSendFailed(0);
        producer.setInstanceName(name);
        producer.start();
        try {
            for (int i = 0; i < count; i++) {
                Message msg = new Message(topic, (name + " " + i).getBytes(StandardCharsets.UTF_8));
                SendResult result = producer.send(msg);
                if (result.getSendStatus() != SendStatus.SEND_OK) {
                    return "code=-1 status=" + result.getSendStatus();
                }
            }
            return "code=0 sent=" + count;
        } catch (MQClientException | MQBrokerException e) {
            for (Throwable t = e; t != null; t = t.getCause()) {
                if (t instanceof MQBrokerException) {
                    MQBrokerException b = (MQBrokerException) t;
                    return "code=" + b.getResponseCode() + " remark=" + b.getErrorMessage();
                }
            }
            return "code=-1 error=" + e;
        } finally {
            producer.shutdown();
        }
    }

    static String consume(String namesrv, RPCHook hook, String topic, String group, int count) throws Exception {
        DefaultLitePullConsumer consumer = new DefaultLitePullConsumer(group, hook);
        consumer.setNamesrvAddr(namesrv);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.start();
        List<String> bodies = new ArrayList<>();
        try {
            long deadline = System.currentTimeMillis() + 60000;
            while (bodies.size() < count && System.currentTimeMillis() < deadline) {
                for (MessageExt m : consumer.poll(1000)) {
                    bodies.add(new String(m.getBody(), StandardCharsets.UTF_8));
                }
            }
        } finally {
            consumer.shutdown();
        }
        Collections.sort(bodies);
        return "code=0 got=" + bodies.size() + " bodies=" + String.join("|", bodies);
    }
}
