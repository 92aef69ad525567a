// A producer and a push consumer of RocketMQ 4.9.8 per side (a name server each), driven from stdin,
// for the admin commands that look at clients (consumerConnection, producerConnection, consumerStatus,
// resetOffsetByTime). The same traffic goes to every side.
//
//   rmq-java AdminbClients.java TOPIC SIDE=NAMESRV...
//   producer group PG_adminb, consumer group CG_adminb subscribing TOPIC "TagA || TagB", from the first offset,
//   committing its offsets every second; each side's clients have the side's name as instance name.
//   stdin:  SEND <n>   n messages to TOPIC on every side, tags TagA and TagB in turn, bodies "m<i>"
//           QUIT       shut the clients down and exit
//   stdout: STARTED                                  once every client is started
//           SENT <side> <i> <queueId> <queueOffset>  per message sent
//           CONSUMED <side> <body> <queueId> <queueOffset> <reconsumeTimes>   per message consumed
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

public class AdminbClients {
    static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        String topic = args[0];
        List<String> sides = new ArrayList<>();
        List<DefaultMQProducer> producers = new ArrayList<>();
        List<DefaultMQPushConsumer> consumers = new ArrayList<>();
        for (int i = 1; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            String side = kv[0];
            DefaultMQProducer producer = new DefaultMQProducer("PG_adminb");
            producer.setNamesrvAddr(kv[1]);
            producer.setInstanceName(side);
            producer.setSendMsgTimeout(10000);
            producer.start();
            DefaultMQPushConsumer consumer = new DefaultMQPushConsumer("CG_adminb");
            consumer.setNamesrvAddr(kv[1]);
            consumer.setInstanceName(side);
            consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
            consumer.setPersistConsumerOffsetInterval(1000);
            consumer.subscribe(topic, "TagA || TagB");
            consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
                for (MessageExt m : msgs) {
                    say("CONSUMED " + side + " " + new String(m.getBody(), StandardCharsets.UTF_8) + " "
                        + m.getQueueId() + " " + m.getQueueOffset() + " " + m.getReconsumeTimes());
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            consumer.start();
            sides.add(side);
            producers.add(producer);
            consumers.add(consumer);
        }
        say("STARTED");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line = in.readLine(); line != null && !line.equals("QUIT"); line = in.readLine()) {
            String[] words = line.split(" ");
            if (words[0].equals("SEND")) {
                int n = Integer.parseInt(words[1]);
                for (int s = 0; s < sides.size(); s++) {
                    for (int i = 0; i < n; i++) {
                        Message msg = new Message(topic, i % 2 == 0 ? "TagA" : "TagB",
                            ("m" + i).getBytes(StandardCharsets.UTF_8));
                        SendResult r = producers.get(s).send(msg);
                        say("SENT " + sides.get(s) + " " + i + " " + r.getMessageQueue().getQueueId() + " "
                            + r.getQueueOffset());
                    }
                }
            }
        }
        for (DefaultMQPushConsumer consumer : consumers) {
            consumer.shutdown();
        }
        for (DefaultMQProducer producer : producers) {
            producer.shutdown();
        }
        System.exit(0);
    }
}
