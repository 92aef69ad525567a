// The Java 4.9.8 admin API (DefaultMQAdminExt) against one name server per case, for the name-server
// requests mqadmin has no command of its own for; one line per case.
//
//   rmq-java NsAdmin.java CASE...
//   CASE = name,namesrv,op[,arg...]
//   op   = kvget NAMESPACE KEY     getKVConfig (101): the value, or code=<response code>
//        | kvlist NAMESPACE        getKVListByNamespace (219): key=value;... sorted, or code=<response code>
//        | bycluster CLUSTER       fetchTopicsByCLuster (224): the topics, sorted, space-separated
//        | alltopics               fetchAllTopicList (206): the topics, sorted, space-separated
//        | route TOPIC             examineTopicRouteInfo (105): broker:read:write:perm,... sorted (and
//                                  order=<orderTopicConf> when the route has one), or code=<code>
//        | delete TOPIC CLUSTER    deleteTopicInNameServer (216) on this name server, then route TOPIC
//        | create BROKER TOPIC N   createAndUpdateTopicConfig (17) on the broker at BROKER: N read and write queues
//
// prints  CASE name <result>
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.protocol.route.QueueData;
import org.apache.rocketmq.common.protocol.route.TopicRouteData;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

public class NsAdmin {
    public static void main(String[] args) throws Exception {
        for (String arg : args) {
            String[] c = arg.split(",", -1);
            DefaultMQAdminExt admin = new DefaultMQAdminExt(5000);
            admin.setNamesrvAddr(c[1]);
            admin.setInstanceName("nsadmin-" + c[0]);
            admin.start();
            String result;
            try {
                result = run(admin, c);
            } catch (MQClientException e) {
                result = "code=" + e.getResponseCode();
            } finally {
                admin.shutdown();
            }
            System.out.println("CASE " + c[0] + " " + result);
        }
        System.exit(0);
    }

    static String sorted(Iterable<String> items, String sep) {
        List<String> list = new ArrayList<>();
        items.forEach(list::add);
        Collections.sort(list);
        return String.join(sep, list);
    }

    static String route(DefaultMQAdminExt admin, String topic) throws Exception {
        try {
            TopicRouteData route = admin.examineTopicRouteInfo(topic);
            List<String> out = new ArrayList<>();
            for (QueueData q : route.getQueueDatas()) {
                out.add(q.getBrokerName() + ":" + q.getReadQueueNums() + ":" + q.getWriteQueueNums() + ":" + q.getPerm());
            }
            return sorted(out, ",") + (route.getOrderTopicConf() == null ? "" : " order=" + route.getOrderTopicConf());
        } catch (MQClientException e) {
            return "code=" + e.getResponseCode();
        }
    }

    static String run(DefaultMQAdminExt admin, String[] c) throws Exception {
        switch (c[2]) {
            case "kvget":
                return admin.getKVConfig(c[3], c[4]);
            case "kvlist": {
                List<String> out = new ArrayList<>();
                for (Map.Entry<String, String> e : new TreeMap<>(admin.getKVListByNamespace(c[3]).getTable()).entrySet()) {
                    out.add(e.getKey() + "=" + e.getValue());
                }
                return String.join(";", out);
            }
            case "bycluster":
                return sorted(admin.fetchTopicsByCLuster(c[3]).getTopicList(), " ");
            case "alltopics":
                return sorted(admin.fetchAllTopicList().getTopicList(), " ");
            case "route":
                return route(admin, c[3]);
            case "create": {
                TopicConfig config = new TopicConfig(c[4], Integer.parseInt(c[5]), Integer.parseInt(c[5]), 6);
                admin.createAndUpdateTopicConfig(c[3], config);
                return "created";
            }
            case "delete":
                admin.deleteTopicInNameServer(Collections.singleton(c[1]), c[3], c[4]);
                return "deleted route=" + route(admin, c[3]);
            default:
                return "unknown op " + c[2];
        }
    }
}
