// Requests straight to one broker, each case on its own connection, with or without RocketMQ 4.9.8's
// AclClientRPCHook (the Java client's ACL signing), printing the code and remark of every answer.
//
//   rmq-java AclWire.java BROKER_ADDR CASE...
//   CASE = name,accessKey,secretKey,kind,topic,group     (accessKey "-": no hook, no credentials)
//   kind = send (SEND_MESSAGE_V2) | send1 (SEND_MESSAGE) | pull | heartbeat | offset (UPDATE_CONSUMER_OFFSET)
//        | consumers (GET_CONSUMER_LIST_BY_GROUP) | createtopic (UPDATE_AND_CREATE_TOPIC, an admin code)
//
// Prints one line per case:  CASE <name> code=<code> remark=<remark, newlines as \n>
import java.nio.charset.StandardCharsets;
import java.util.Collections;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.protocol.RequestCode;
import org.apache.rocketmq.common.protocol.header.CreateTopicRequestHeader;
import org.apache.rocketmq.common.protocol.header.GetConsumerListByGroupRequestHeader;
import org.apache.rocketmq.common.protocol.header.PullMessageRequestHeader;
import org.apache.rocketmq.common.protocol.header.SendMessageRequestHeader;
import org.apache.rocketmq.common.protocol.header.SendMessageRequestHeaderV2;
import org.apache.rocketmq.common.protocol.header.UpdateConsumerOffsetRequestHeader;
import org.apache.rocketmq.common.protocol.heartbeat.ConsumeType;
import org.apache.rocketmq.common.protocol.heartbeat.ConsumerData;
import org.apache.rocketmq.common.protocol.heartbeat.HeartbeatData;
import org.apache.rocketmq.common.protocol.heartbeat.MessageModel;
import org.apache.rocketmq.common.protocol.heartbeat.SubscriptionData;
import org.apache.rocketmq.remoting.netty.NettyClientConfig;
import org.apache.rocketmq.remoting.netty.NettyRemotingClient;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;

public class AclWire {
    public static void main(String[] args) throws Exception {
        String broker = args[0];
        for (int i = 1; i < args.length; i++) {
            String[] c = args[i].split(",", -1);
            NettyRemotingClient client = new NettyRemotingClient(new NettyClientConfig());
            if (!c[1].equals("-")) {
                client.registerRPCHook(new AclClientRPCHook(new SessionCredentials(c[1], c[2])));
            }
            client.start();
            try {
                RemotingCommand answer = client.invokeSync(broker, request(c[3], c[4], c[5]), 10000);
                String remark = answer.getRemark() == null ? "" : answer.getRemark().replace("\n", "\\n");
                System.out.println("CASE " + c[0] + " code=" + answer.getCode() + " remark=" + remark);
            } finally {
                client.shutdown();
            }
        }
    }

    static RemotingCommand request(String kind, String topic, String group) throws Exception {
        switch (kind) {
            case "send":
            case "send1": {
                SendMessageRequestHeader h = new SendMessageRequestHeader();
                h.setProducerGroup(group);
                h.setTopic(topic);
                h.setDefaultTopic("TBW102");
                h.setDefaultTopicQueueNums(4);
                h.setQueueId(0);
                h.setSysFlag(0);
                h.setBornTimestamp(System.currentTimeMillis());
                h.setFlag(0);
                h.setProperties("");
                h.setReconsumeTimes(0);
                RemotingCommand r = kind.equals("send")
                    ? RemotingCommand.createRequestCommand(RequestCode.SEND_MESSAGE_V2,
                        SendMessageRequestHeaderV2.createSendMessageRequestHeaderV2(h))
                    : RemotingCommand.createRequestCommand(RequestCode.SEND_MESSAGE, h);
                r.setBody(("body of " + topic).getBytes(StandardCharsets.UTF_8));
                return r;
            }
            case "pull": {
                PullMessageRequestHeader h = new PullMessageRequestHeader();
                h.setConsumerGroup(group);
                h.setTopic(topic);
                h.setQueueId(0);
                h.setQueueOffset(0L);
                h.setMaxMsgNums(1);
                h.setSysFlag(0);
                h.setCommitOffset(0L);
                h.setSuspendTimeoutMillis(0L);
                h.setSubscription("*");
                h.setSubVersion(0L);
                h.setExpressionType("TAG");
                return RemotingCommand.createRequestCommand(RequestCode.PULL_MESSAGE, h);
            }
            case "heartbeat": {
                HeartbeatData hb = new HeartbeatData();
                hb.setClientID("127.0.0.1@AclWire");
                ConsumerData cd = new ConsumerData();
                cd.setGroupName(group);
                cd.setConsumeType(ConsumeType.CONSUME_PASSIVELY);
                cd.setMessageModel(MessageModel.CLUSTERING);
                cd.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET);
                cd.getSubscriptionDataSet().add(new SubscriptionData(topic, "*"));
                hb.getConsumerDataSet().add(cd);
                RemotingCommand r = RemotingCommand.createRequestCommand(RequestCode.HEART_BEAT, null);
                r.setBody(hb.encode());
                return r;
            }
            case "offset": {
                UpdateConsumerOffsetRequestHeader h = new UpdateConsumerOffsetRequestHeader();
                h.setConsumerGroup(group);
                h.setTopic(topic);
                h.setQueueId(0);
                h.setCommitOffset(0L);
                return RemotingCommand.createRequestCommand(RequestCode.UPDATE_CONSUMER_OFFSET, h);
            }
            case "consumers": {
                GetConsumerListByGroupRequestHeader h = new GetConsumerListByGroupRequestHeader();
                h.setConsumerGroup(group);
                return RemotingCommand.createRequestCommand(RequestCode.GET_CONSUMER_LIST_BY_GROUP, h);
            }
            case "createtopic": {
                CreateTopicRequestHeader h = new CreateTopicRequestHeader();
                h.setTopic(topic);
                h.setDefaultTopic("TBW102");
                h.setReadQueueNums(4);
                h.setWriteQueueNums(4);
                h.setPerm(6);
                h.setTopicFilterType("SINGLE_TAG");
                h.setTopicSysFlag(0);
                h.setOrder(false);
                return RemotingCommand.createRequestCommand(RequestCode.UPDATE_AND_CREATE_TOPIC, h);
            }
            default:
                throw new IllegalArgumentException("unknown kind " + kind);
        }
    }
}
