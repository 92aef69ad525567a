// The same small traffic against each name server given, for comparing what mqadmin prints about a Java broker and
// about ours (tests/interop/test_admina_stats.py). Every step is deterministic: queues are chosen by a selector,
// the consumer is the only one of its group, and it is stopped (its offsets persisted) before the last sends.
//
//   rmq-java AdminTraffic.java NAMESRV...
//
// For each name server, in turn:
//   1. producer PG_admin sends 10 messages to AdminT, message i to queue i % 4, tag tagA/tagB, key key<i>;
//   2. one message to AdminDelay queue 0 with delay level 1 (1 s);
//   3. push consumer CG_admin (subscribed to AdminT *, from the first offset) consumes the 10 and is shut down;
//   4. 3 more messages to AdminT, queues 0, 1, 2: the group is 3 behind.
// Prints per name server:  CASE <namesrv> sent=14 consumed=10 first=<offset msgId of message 0>
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.MessageQueueSelector;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

public class AdminTraffic {
    static final MessageQueueSelector BY_ARG = (List<MessageQueue> mqs, Message msg, Object arg) ->
        mqs.get((Integer) arg % mqs.size());

    public static void main(String[] args) throws Exception {
        for (String namesrv : args) {
            System.out.println("CASE " + namesrv + " " + traffic(namesrv));
        }
        System.exit(0);  // the clients' threads are not all daemons
    }

    static String traffic(String namesrv) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer("PG_admin");
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName("p-" + namesrv);
        producer.setSendMsgTimeout(15000);
        producer.start();
        String first = null;
        int sent = 0;
        try {
            for (int i = 0; i < 10; i++) {
                SendResult r = send(producer, "AdminT", i, i);
                first = first == null ? r.getOffsetMsgId() : first;
                sent++;
            }
            Message delayed = new Message("AdminDelay", "tagD", "keyD", "delayed".getBytes(StandardCharsets.UTF_8));
            delayed.setDelayTimeLevel(1);
            check(producer.send(delayed, BY_ARG, 0));
            sent++;
            int consumed = consume(namesrv, 10);
            for (int i = 10; i < 13; i++) {
                send(producer, "AdminT", i, i - 10);
                sent++;
            }
            return "sent=" + sent + " consumed=" + consumed + " first=" + first;
        } finally {
            producer.shutdown();
        }
    }

    static SendResult send(DefaultMQProducer producer, String topic, int i, int queue) throws Exception {
        Message msg = new Message(topic, i % 2 == 0 ? "tagA" : "tagB", "key" + i,
            ("admin " + i).getBytes(StandardCharsets.UTF_8));
        return check(producer.send(msg, BY_ARG, queue));
    }

    static SendResult check(SendResult r) {
        if (r.getSendStatus() != SendStatus.SEND_OK) {
            throw new IllegalStateException("send: " + r);
        }
        return r;
    }

    static int consume(String namesrv, int count) throws Exception {
        ConcurrentHashMap<String, Boolean> seen = new ConcurrentHashMap<>();
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer("CG_admin");
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName("c-" + namesrv);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe("AdminT", "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            for (MessageExt m : msgs) {
                seen.put(new String(m.getBody(), StandardCharsets.UTF_8), Boolean.TRUE);
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        try {
            long deadline = System.currentTimeMillis() + 90000;
            while (seen.size() < count && System.currentTimeMillis() < deadline) {
                TimeUnit.MILLISECONDS.sleep(100);
            }
            TimeUnit.MILLISECONDS.sleep(500);  // the last batch's offsets are updated after the listener returns
        } finally {
            consumer.shutdown();  // persists the offsets
        }
        return seen.size();
    }
}
