// Message trace with the Java client of RocketMQ 4.9.8: a producer and a push consumer built with
// enableMsgTrace = true write their trace records to RMQ_SYS_TRACE_TOPIC; the records are then queried back
// by message id, as `mqadmin queryMsgTraceById` does (queryMessage on the trace topic with the msgId as key,
// then TraceView.decodeFromTraceTransData).
//
//   rmq-java TraceClient.java NAMESRV TOPIC COUNT
//
// Prints, in this order:
//   SENT <i> <msgId> <offsetMsgId> <broker address>          one per message sent
//   CONSUMED <n>                                              once every message came (60 s at most)
//   TRACE <i> <type> group=<g> topic=<t> tags=<t> keys=<k> status=<s> clientHost=<h> storeHost=<h>
//         offsetMsgId=<id>                                    per message i, its trace views, sorted
//   (<i> stands for the message's msgId; waits up to 60 s for a Pub, a SubBefore and a SubAfter view of each)
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.rocketmq.client.QueryResult;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.trace.TraceView;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

public class TraceClient {
    public static void main(String[] args) throws Exception {
        String namesrv = args[0], topic = args[1];
        int count = Integer.parseInt(args[2]);
        DefaultMQProducer producer = new DefaultMQProducer("PG_trace", true);
        producer.setNamesrvAddr(namesrv);
        producer.setSendMsgTimeout(10000);
        producer.start();
        List<String> ids = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            Message msg = new Message(topic, "tag" + (i % 2), "key-" + i, ("traced " + i).getBytes(StandardCharsets.UTF_8));
            SendResult r = producer.send(msg);
            ids.add(r.getMsgId());
            System.out.println("SENT " + i + " " + r.getMsgId() + " " + r.getOffsetMsgId() + " "
                + producer.getDefaultMQProducerImpl().getmQClientFactory().findBrokerAddressInPublish(
                    r.getMessageQueue().getBrokerName()));
        }

        Set<String> consumed = ConcurrentHashMap.newKeySet();
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer("CG_trace", true);
        consumer.setNamesrvAddr(namesrv);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            for (MessageExt m : msgs) {
                consumed.add(m.getMsgId());
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        long deadline = System.currentTimeMillis() + 60000;
        while (!consumed.containsAll(ids) && System.currentTimeMillis() < deadline) {
            Thread.sleep(50);
        }
        System.out.println("CONSUMED " + consumed.size());
        Thread.sleep(1000);  // the consume hooks' SubAfter records are queued once the listener returned
        consumer.shutdown();  // each flushes its trace dispatcher
        producer.shutdown();

        DefaultMQProducer query = new DefaultMQProducer("PG_trace_query");
        query.setNamesrvAddr(namesrv);
        query.setInstanceName("trace-query");
        query.start();
        try {
            for (int i = 0; i < ids.size(); i++) {
                for (String line : traceLines(query, i, ids.get(i))) {
                    System.out.println(line);
                }
            }
        } finally {
            query.shutdown();
        }
        System.exit(0);  // the clients' threads are not all daemons
    }

    static List<String> traceLines(DefaultMQProducer query, int i, String msgId) throws Exception {
        long deadline = System.currentTimeMillis() + 60000;
        List<String> lines = new ArrayList<>();
        while (System.currentTimeMillis() < deadline) {
            lines.clear();
            Set<String> types = ConcurrentHashMap.newKeySet();
            try {
                QueryResult result = query.queryMessage("RMQ_SYS_TRACE_TOPIC", msgId, 64, 0, System.currentTimeMillis());
                for (MessageExt m : result.getMessageList()) {
                    for (TraceView v : TraceView.decodeFromTraceTransData(msgId, m)) {
                        types.add(v.getMsgType());
                        lines.add("TRACE " + i + " " + v.getMsgType() + " group=" + v.getGroupName() + " topic=" + v.getTopic()
                            + " tags=" + v.getTags() + " keys=" + v.getKeys() + " status=" + v.getStatus()
                            + " clientHost=" + v.getClientHost() + " storeHost=" + v.getStoreHost()
                            + " offsetMsgId=" + v.getOffSetMsgId());
                    }
                }
            } catch (Exception e) {  // no route or nothing indexed yet
                types.clear();
            }
            if (types.contains("Pub") && types.contains("SubBefore") && types.contains("SubAfter")) {
                Collections.sort(lines);
                return lines;
            }
            Thread.sleep(500);
        }
        lines.add("TRACE " + i + " incomplete: " + lines);
        return lines;
    }
}
