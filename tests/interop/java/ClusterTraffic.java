// A topic spread over several brokers, through one name server: a Java 4.9.8 producer spreading its sends
// and two push consumers of one group rebalancing the topic's queues between them; one line per case.
//
//   rmq-java ClusterTraffic.java CASE...
//   CASE = name,namesrv,topic,group,count
//
// For each case: both consumers start (CONSUME_FROM_FIRST_OFFSET) and the program waits until they hold
// every queue of the topic between them (90 s at most), then sends count messages "<name> i", waits until
// every one was consumed (90 s at most) and 3 s more for duplicates, and prints
//
//   CASE name queues=<broker:n,...> sent=<broker:n,...> got=<distinct> dup=<n> lost=<n>
//        c1=<broker:queues,...> c2=<broker:queues,...> c1got=<broker:n,...> c2got=<broker:n,...>
//
// (one line; broker names sorted): the topic's write queues per broker as the producer sees them, the
// sends per broker, the messages consumed once and more than once, the ones never consumed, the queues
// each consumer holds and the messages each consumed per broker.
import java.nio.charset.StandardCharsets;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

public class ClusterTraffic {
    public static void main(String[] args) throws Exception {
        for (String arg : args) {
            String[] c = arg.split(",", -1);
            System.out.println("CASE " + c[0] + " " + run(c[0], c[1], c[2], c[3], Integer.parseInt(c[4])));
        }
        System.exit(0);  // the clients' threads are not all daemons
    }

    static String counts(Map<String, AtomicInteger> m) {
        StringBuilder sb = new StringBuilder();
        for (Map.Entry<String, AtomicInteger> e : new TreeMap<>(m).entrySet()) {
            sb.append(sb.length() == 0 ? "" : ",").append(e.getKey()).append(':').append(e.getValue().get());
        }
        return sb.toString();
    }

    static Map<String, AtomicInteger> queuesPerBroker(Set<MessageQueue> queues) {
        Map<String, AtomicInteger> out = new TreeMap<>();
        for (MessageQueue q : queues) {
            out.computeIfAbsent(q.getBrokerName(), k -> new AtomicInteger()).incrementAndGet();
        }
        return out;
    }

    /** The queues of topic the consumer holds (not those of its group's retry topic, which it holds too). */
    static Set<MessageQueue> held(DefaultMQPushConsumer consumer, String topic) {
        Set<MessageQueue> out = new HashSet<>();
        for (MessageQueue q : consumer.getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable().keySet()) {
            if (q.getTopic().equals(topic)) {
                out.add(q);
            }
        }
        return out;
    }

    static DefaultMQPushConsumer consumer(String name, String namesrv, String topic, String group,
                                          Map<String, AtomicInteger> seen, Map<String, AtomicInteger> got)
        throws Exception {
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName(name);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            for (MessageExt m : msgs) {
                seen.computeIfAbsent(new String(m.getBody(), StandardCharsets.UTF_8), k -> new AtomicInteger())
                    .incrementAndGet();
                got.computeIfAbsent(context.getMessageQueue().getBrokerName(), k -> new AtomicInteger())
                    .incrementAndGet();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        return consumer;
    }

    static String run(String name, String namesrv, String topic, String group, int count) throws Exception {
        Map<String, AtomicInteger> seen = new ConcurrentHashMap<>();
        Map<String, AtomicInteger> got1 = new ConcurrentHashMap<>();
        Map<String, AtomicInteger> got2 = new ConcurrentHashMap<>();
        DefaultMQProducer producer = new DefaultMQProducer("PG_" + group);
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName(name + "-p");
        producer.setSendMsgTimeout(10000);
        producer.start();
        DefaultMQPushConsumer c1 = consumer(name + "-c1", namesrv, topic, group, seen, got1);
        DefaultMQPushConsumer c2 = consumer(name + "-c2", namesrv, topic, group, seen, got2);
        try {
            int total = producer.fetchPublishMessageQueues(topic).size();
            long deadline = System.currentTimeMillis() + 90000;
            while (System.currentTimeMillis() < deadline
                && !(held(c1, topic).size() + held(c2, topic).size() == total && !held(c1, topic).isEmpty()
                     && !held(c2, topic).isEmpty())) {
                Thread.sleep(200);
            }
            Map<String, AtomicInteger> sent = new ConcurrentHashMap<>();
            for (int i = 0; i < count; i++) {
                Message msg = new Message(topic, (name + " " + i).getBytes(StandardCharsets.UTF_8));
                SendResult result = producer.send(msg);
                if (result.getSendStatus() != SendStatus.SEND_OK) {
                    return "error=send " + result.getSendStatus();
                }
                sent.computeIfAbsent(result.getMessageQueue().getBrokerName(), k -> new AtomicInteger())
                    .incrementAndGet();
            }
            deadline = System.currentTimeMillis() + 90000;
            while (seen.size() < count && System.currentTimeMillis() < deadline) {
                Thread.sleep(200);
            }
            Thread.sleep(3000);
            int dup = 0;
            for (AtomicInteger n : seen.values()) {
                dup += n.get() > 1 ? 1 : 0;
            }
            return "queues=" + counts(queuesPerBroker(Set.copyOf(producer.fetchPublishMessageQueues(topic))))
                + " sent=" + counts(sent) + " got=" + seen.size() + " dup=" + dup + " lost=" + (count - seen.size())
                + " c1=" + counts(queuesPerBroker(held(c1, topic))) + " c2=" + counts(queuesPerBroker(held(c2, topic)))
                + " c1got=" + counts(got1) + " c2got=" + counts(got2);
        } finally {
            c1.shutdown();
            c2.shutdown();
            producer.shutdown();
        }
    }
}
