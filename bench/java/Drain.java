// Fill a topic, then drain it with a pull consumer and with a push consumer: the Java 4.9.8 client's side of
// bench/broker_drain.py (issue 23), run through the distribution's bin/rmq-java.
//
//   rmq-java Drain.java NAMESRV TOPIC MESSAGES QUEUES FILL_THREADS BATCH
//
// 1. fill: the topic is created with QUEUES read and write queues (createTopic through TBW102's route) and,
//    once the name server routes all of them, FILL_THREADS threads send MESSAGES messages (1 KiB body, tag
//    "TagA", a key each, as tools/JBench.java) in batches of BATCH (DefaultMQProducer.send of a list; a
//    batch the broker refuses as busy, SYSTEM_BUSY, before storing it is sent again 10 ms later); then the
//    program waits until the queues' max offsets sum to MESSAGES (every message dispatched, none twice).
// 2. pull: a DefaultMQPullConsumer (as RocketMQ's own PullConsumer example: synchronous pulls at offsets
//    the caller keeps), one thread per queue, 32 messages a pull, from offset 0 to the queue's max offset.
// 3. push: a DefaultMQPushConsumer of a new group, CONSUME_FROM_FIRST_OFFSET, its defaults otherwise (32
//    messages a pull, 20 consume threads), a listener that counts.
// A drain is timed from the client's first PULL_MESSAGE request (an RPCHook sees it go out) to the moment
// the count reaches MESSAGES; the fill from its first send to the last one answered.
//
// Each phase begins with "READY <phase>" on stdout and waits for a line on stdin (the bench samples the
// broker's CPU time and resets its peak RSS then), and ends with
//   DONE <phase> messages=<n> seconds=<s> [not_ok=<n> busy=<n>]
// After the fill, "DISPATCHED seconds=<s> offsets=<max offset of queue 0>,<of 1>,...". A failure prints
// "ERROR <phase> <what>" and exits 1.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.PullStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.common.protocol.RequestCode;
import org.apache.rocketmq.common.protocol.ResponseCode;
import org.apache.rocketmq.common.topic.TopicValidator;
import org.apache.rocketmq.remoting.RPCHook;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;

public class Drain {
    static final int PULL_BATCH = 32;
    static final BufferedReader IN = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));

    static String namesrv, topic;
    static long messages, deadlineMillis;

    public static void main(String[] a) throws Exception {
        namesrv = a[0];
        topic = a[1];
        messages = Long.parseLong(a[2]);
        int queues = Integer.parseInt(a[3]), threads = Integer.parseInt(a[4]), batch = Integer.parseInt(a[5]);
        deadlineMillis = 120_000 + messages / 2;  // a phase's limit: 2 min + 0.5 ms a message
        String phase = "fill";
        try {
            fill(queues, threads, batch);
            phase = "pull";
            Drained pulled = new Drained();
            DefaultMQPullConsumer puller = new DefaultMQPullConsumer("CG_drain_pull", pulled);
            puller.setNamesrvAddr(namesrv);
            puller.setInstanceName("drain-pull");
            puller.start();
            try {
                List<MessageQueue> mqs = new ArrayList<>(puller.fetchSubscribeMessageQueues(topic));
                mqs.sort(Comparator.comparingInt(MessageQueue::getQueueId));
                long[] max = dispatched(puller, mqs);
                pull(puller, mqs, max, pulled);
            } finally {
                puller.shutdown();
            }
            phase = "push";
            push();
        } catch (Throwable e) {
            System.out.println("ERROR " + phase + " " + e.toString().replace('\n', ' '));
            e.printStackTrace();
            System.exit(1);
        }
        System.exit(0);  // the clients' threads are not all daemons
    }

    /** Print "READY phase" and wait for the bench's line on stdin. */
    static void ready(String phase) throws Exception {
        System.out.println("READY " + phase);
        System.out.flush();
        if (IN.readLine() == null) {
            throw new IllegalStateException("stdin closed before the " + phase + " phase");
        }
    }

    static void done(String phase, long n, long nanos, String extra) {
        System.out.printf("DONE %s messages=%d seconds=%.3f%s%n", phase, n, nanos / 1e9, extra);
        System.out.flush();
    }

    /** Counts a drain's messages; as the consumer's RPCHook, notes when its first PULL_MESSAGE goes out. */
    static final class Drained implements RPCHook {
        final AtomicLong got = new AtomicLong(), first = new AtomicLong(Long.MIN_VALUE),
            last = new AtomicLong(Long.MIN_VALUE);
        final CountDownLatch all = new CountDownLatch(1);
        final AtomicReference<Throwable> failure = new AtomicReference<>();

        @Override
        public void doBeforeRequest(String remoteAddr, RemotingCommand request) {
            if (request.getCode() == RequestCode.PULL_MESSAGE) {
                first.compareAndSet(Long.MIN_VALUE, System.nanoTime());
            }
        }

        @Override
        public void doAfterResponse(String remoteAddr, RemotingCommand request, RemotingCommand response) {
        }

        void count(int n) {
            if (got.addAndGet(n) >= messages && last.compareAndSet(Long.MIN_VALUE, System.nanoTime())) {
                all.countDown();
            }
        }

        void fail(Throwable e) {
            failure.compareAndSet(null, e);
            all.countDown();
        }

        /** Wait until every message is counted (or a consumer thread failed, or the phase's time is up). */
        void await(String phase) throws InterruptedException {
            all.await(deadlineMillis, TimeUnit.MILLISECONDS);
            if (failure.get() != null) {
                throw new IllegalStateException(phase + " failed: " + failure.get(), failure.get());
            }
            if (last.get() == Long.MIN_VALUE) {
                throw new IllegalStateException(phase + ": " + got.get() + " of " + messages + " messages in "
                    + deadlineMillis + " ms");
            }
            done(phase, got.get(), last.get() - first.get(), "");
        }
    }

    static void fill(int queues, int threads, int batch) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer("PG_drain_fill");
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName("drain-fill");
        producer.setSendMsgTimeout(10000);
        producer.setCompressMsgBodyOverHowmuch(1 << 20);
        producer.start();
        try {
            producer.createTopic(TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC, topic, queues);
            long until = System.currentTimeMillis() + 60_000;
            while (routed(producer) < queues) {
                if (System.currentTimeMillis() > until) {
                    throw new IllegalStateException("the name server routes " + routed(producer) + " of " + queues
                        + " queues of " + topic + " after 60 s");
                }
                Thread.sleep(100);
            }
            byte[] body = new byte[1024];
            for (int i = 0; i < body.length; i++) {
                body[i] = (byte) i;
            }
            AtomicLong claimed = new AtomicLong(), notOk = new AtomicLong(), busy = new AtomicLong();
            AtomicReference<Throwable> failure = new AtomicReference<>();
            List<Thread> senders = new ArrayList<>();
            ready("fill");
            long t0 = System.nanoTime();
            for (int t = 0; t < threads; t++) {
                Thread th = new Thread(() -> {
                    try {
                        for (long from = claimed.getAndAdd(batch); from < messages && failure.get() == null;
                             from = claimed.getAndAdd(batch)) {
                            List<Message> msgs = new ArrayList<>(batch);
                            for (long i = from; i < Math.min(messages, from + batch); i++) {
                                msgs.add(new Message(topic, "TagA", "key-" + i, body));
                            }
                            SendResult r = send(producer, msgs, busy);
                            if (r.getSendStatus() != SendStatus.SEND_OK) {
                                notOk.addAndGet(msgs.size());  // stored, but not flushed or replicated in time
                            }
                        }
                    } catch (Throwable e) {
                        failure.compareAndSet(null, e);
                    }
                });
                th.start();
                senders.add(th);
            }
            for (Thread th : senders) {
                th.join();
            }
            long nanos = System.nanoTime() - t0;
            if (failure.get() != null) {
                throw new IllegalStateException("a batch send failed: " + failure.get(), failure.get());
            }
            done("fill", messages, nanos, " not_ok=" + notOk.get() + " busy=" + busy.get());
        } finally {
            producer.shutdown();
        }
    }

    /** Send a batch; again after a short pause while the broker answers it is busy (SYSTEM_BUSY: its flow
     *  control refused the batch before storing it, e.g. a request waited over 200 ms in a Java broker's send
     *  queue), counting those answers in busy. */
    static SendResult send(DefaultMQProducer producer, List<Message> msgs, AtomicLong busy) throws Exception {
        long until = System.currentTimeMillis() + deadlineMillis;
        while (true) {
            try {
                return producer.send(msgs);
            } catch (MQBrokerException e) {
                if (e.getResponseCode() != ResponseCode.SYSTEM_BUSY || System.currentTimeMillis() > until) {
                    throw e;
                }
                busy.incrementAndGet();
                Thread.sleep(10);
            }
        }
    }

    static int routed(DefaultMQProducer producer) {
        try {
            return producer.fetchPublishMessageQueues(topic).size();
        } catch (Exception e) {  // no route yet
            return 0;
        }
    }

    /** Wait until the queues' max offsets sum to the messages sent; print them. */
    static long[] dispatched(DefaultMQPullConsumer consumer, List<MessageQueue> mqs) throws Exception {
        long t0 = System.nanoTime(), until = System.currentTimeMillis() + deadlineMillis;
        long[] max = new long[mqs.size()];
        while (true) {
            long sum = 0;
            for (int i = 0; i < max.length; i++) {
                max[i] = consumer.maxOffset(mqs.get(i));
                sum += max[i];
            }
            if (sum == messages) {
                break;
            }
            if (sum > messages || System.currentTimeMillis() > until) {
                throw new IllegalStateException("the queues' max offsets sum to " + sum + ", not " + messages);
            }
            Thread.sleep(50);
        }
        StringBuilder offsets = new StringBuilder();
        for (long m : max) {
            offsets.append(offsets.length() == 0 ? "" : ",").append(m);
        }
        System.out.printf("DISPATCHED seconds=%.3f offsets=%s%n", (System.nanoTime() - t0) / 1e9, offsets);
        return max;
    }

    static void pull(DefaultMQPullConsumer consumer, List<MessageQueue> mqs, long[] max, Drained pulled)
        throws Exception {
        long until = System.currentTimeMillis() + deadlineMillis;
        List<Thread> pullers = new ArrayList<>();
        ready("pull");
        for (int i = 0; i < mqs.size(); i++) {
            MessageQueue mq = mqs.get(i);
            long end = max[i];
            Thread th = new Thread(() -> {
                try {
                    long offset = 0;
                    while (offset < end && pulled.failure.get() == null) {
                        PullResult r = consumer.pull(mq, "*", offset, PULL_BATCH);
                        if (r.getPullStatus() == PullStatus.FOUND) {
                            pulled.count(r.getMsgFoundList().size());
                            offset = r.getNextBeginOffset();
                        } else if (System.currentTimeMillis() > until) {
                            throw new IllegalStateException(mq + " at " + offset + " of " + end + ": "
                                + r.getPullStatus());
                        }
                    }
                } catch (Throwable e) {
                    pulled.fail(e);
                }
            });
            th.start();
            pullers.add(th);
        }
        pulled.await("pull");
        for (Thread th : pullers) {
            th.join();
        }
    }

    static void push() throws Exception {
        Drained pushed = new Drained();
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer("CG_drain_push", pushed,
            new AllocateMessageQueueAveragely());
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName("drain-push");
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            pushed.count(msgs.size());
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        ready("push");
        consumer.start();
        try {
            pushed.await("push");
        } finally {
            consumer.shutdown();
        }
    }
}
