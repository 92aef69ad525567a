// The Java client of RocketMQ 4.9.8 consuming orderly (MessageListenerOrderly), one line per message.
//
//   rmq-java OrderlyConsumer.java NAMESRV TOPIC GROUP EXPECTED SECONDS SLEEP_MS MAX_RECONSUME [DLQ_COUNT]
//
// Consumes TOPIC as GROUP from the first offset. For each message the listener prints
//   MSG <wall ms> <queueId> <queueOffset> <body> <reconsumeTimes>
// and sleeps SLEEP_MS; a message whose body starts with "suspend" is printed as TRY instead and always
// answered SUSPEND_CURRENT_QUEUE_A_MOMENT (the client sends it back once it has been reconsumed
// MAX_RECONSUME times; -1 keeps the client's default). When EXPECTED distinct bodies other than "suspend..."
// came (or SECONDS passed), it prints DONE <distinct> (or TIMEOUT <distinct>) and shuts the consumer down,
// which unlocks its queues. With DLQ_COUNT, it then pulls %DLQ%GROUP from offset 0 until DLQ_COUNT
// messages came (60 s at most), one line each:
//   DLQ <topic> <queueId> <queueOffset> <body> reconsumeTimes=<n> origin=<same|other> props=<k=v,... sorted>
// (origin: whether ORIGIN_MESSAGE_ID is the msgId the consumer saw), then DLQ_DONE <n>.
//
// The client's lock and rebalance periods are shortened (20 s renewal and rebalance, 30 s client-side lock)
// so that tests run in seconds: a lock is renewed every second and held client-side for 3 s, which tests keep
// below the broker's lock time, as 4.9.8's defaults are (30 s against 60 s).
import java.nio.charset.StandardCharsets;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.PullStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

public class OrderlyConsumer {
    static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        System.setProperty("rocketmq.client.rebalance.lockInterval", "1000");
        System.setProperty("rocketmq.client.rebalance.lockMaxLiveTime", "3000");
        System.setProperty("rocketmq.client.rebalance.waitInterval", "1000");
        System.setProperty("rocketmq.client.unlockDelayTimeMills", "1000");
        String namesrv = args[0], topic = args[1], group = args[2];
        int expected = Integer.parseInt(args[3]);
        long seconds = Long.parseLong(args[4]);
        long sleepMs = Long.parseLong(args[5]);
        int maxReconsume = Integer.parseInt(args[6]);
        int dlqCount = args.length > 7 ? Integer.parseInt(args[7]) : 0;

        Set<String> distinct = ConcurrentHashMap.newKeySet();
        Map<String, String> seenIds = new ConcurrentHashMap<>();
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        consumer.setNamesrvAddr(namesrv);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.setPersistConsumerOffsetInterval(1000);
        consumer.setHeartbeatBrokerInterval(1000);
        if (maxReconsume >= 0) {
            consumer.setMaxReconsumeTimes(maxReconsume);
        }
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerOrderly) (msgs, context) -> {
            for (MessageExt m : msgs) {
                String body = new String(m.getBody(), StandardCharsets.UTF_8);
                String rest = m.getQueueId() + " " + m.getQueueOffset() + " " + body + " " + m.getReconsumeTimes();
                if (body.startsWith("suspend")) {
                    seenIds.put(body, m.getMsgId());
                    say("TRY " + System.currentTimeMillis() + " " + rest);
                    context.setSuspendCurrentQueueTimeMillis(100);
                    return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT;
                }
                say("MSG " + System.currentTimeMillis() + " " + rest);
                distinct.add(body);
            }
            if (sleepMs > 0) {
                try {
                    Thread.sleep(sleepMs);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
            return ConsumeOrderlyStatus.SUCCESS;
        });
        consumer.start();
        say("STARTED " + consumer.getDefaultMQPushConsumerImpl().getmQClientFactory().getClientId());
        long deadline = System.currentTimeMillis() + seconds * 1000;
        while (distinct.size() < expected && System.currentTimeMillis() < deadline) {
            Thread.sleep(50);
        }
        say((distinct.size() >= expected ? "DONE " : "TIMEOUT ") + distinct.size());
        consumer.shutdown();
        say("SHUTDOWN");
        if (dlqCount > 0) {
            readDlq(namesrv, group, dlqCount, seenIds);
        }
        System.exit(0);  // the clients' threads are not all daemons
    }

    static void readDlq(String namesrv, String group, int count, Map<String, String> seenIds) throws Exception {
        String dlq = "%DLQ%" + group;
        DefaultMQPullConsumer puller = new DefaultMQPullConsumer(group + "_dlq_reader");
        puller.setNamesrvAddr(namesrv);
        puller.start();
        int got = 0;
        try {
            long deadline = System.currentTimeMillis() + 60000;
            Set<String> printed = new HashSet<>();
            while (got < count && System.currentTimeMillis() < deadline) {
                Set<MessageQueue> queues;
                try {
                    queues = puller.fetchSubscribeMessageQueues(dlq);
                } catch (Exception e) {  // no route yet: the topic is created by the first message sent back
                    Thread.sleep(300);
                    continue;
                }
                for (MessageQueue q : queues) {
                    PullResult r = puller.pull(q, "*", 0, 32);
                    if (r.getPullStatus() != PullStatus.FOUND) {
                        continue;
                    }
                    for (MessageExt m : r.getMsgFoundList()) {
                        if (printed.add(m.getQueueId() + "/" + m.getQueueOffset())) {
                            got++;
                            say("DLQ " + dlqLine(m, seenIds));
                        }
                    }
                }
                if (got < count) {
                    Thread.sleep(300);
                }
            }
        } finally {
            puller.shutdown();
        }
        say("DLQ_DONE " + got);
    }

    static String dlqLine(MessageExt m, Map<String, String> seenIds) {
        String body = new String(m.getBody(), StandardCharsets.UTF_8);
        String origin = m.getProperty("ORIGIN_MESSAGE_ID");
        Map<String, String> props = new TreeMap<>(m.getProperties());
        StringBuilder p = new StringBuilder();
        for (Map.Entry<String, String> e : props.entrySet()) {
            p.append(p.length() == 0 ? "" : ",").append(e.getKey()).append('=').append(e.getValue());
        }
        return m.getTopic() + " " + m.getQueueId() + " " + m.getQueueOffset() + " " + body + " reconsumeTimes="
            + m.getReconsumeTimes() + " origin=" + (origin != null && origin.equals(seenIds.get(body)) ? "same" : "other")
            + " props=" + p;
    }
}
