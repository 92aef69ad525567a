// RocketMQ 4.9.8's own StatsItem and StoreStatsService driven by a script, printing what they compute with the
// timestamps their samples took, so that tests/interop/test_admina_statsitem.py can replay the same samples
// through rmqstore.broker.stats and compare the text.
//
//   rmq-java StatsReplay.java OP...
//   OP = add:VALUE:TIMES    count into the item                    (StatsItem.getValue().add / getTimes().add)
//      | minute | hour | day   sample that window                 (samplingInSeconds / InMinutes / InHour)
//      | put:N  | found:N | miss:N | transfer:N    count into the store figures
//      | second                the store's one-second sampling (its private sampling(); the round's four
//                              samples then carry the put sample's timestamp, as ours do)
//      | sleep:MS
// After each sampling op it prints one line:
//   CASE <op index> <window> ts=<the sample's timestamp> <sum> <tps> <avgpt> <times>    (Double.toString)
//   CASE <op index> second ts=<timestamp> putTps=<...>|getFoundTps=<...>|getMissTps=<...>|getTotalTps=<...>|...
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.util.HashMap;
import java.util.LinkedList;
import org.apache.rocketmq.common.stats.StatsItem;
import org.apache.rocketmq.common.stats.StatsSnapshot;
import org.apache.rocketmq.store.StoreStatsService;

public class StatsReplay {
    public static void main(String[] args) throws Exception {
        StatsItem item = new StatsItem("TOPIC_PUT_NUMS", "T", null, null);
        StoreStatsService store = new StoreStatsService();
        Method sampling = StoreStatsService.class.getDeclaredMethod("sampling");
        sampling.setAccessible(true);
        for (int i = 0; i < args.length; i++) {
            String[] op = args[i].split(":");
            switch (op[0]) {
                case "add":
                    item.getValue().add(Long.parseLong(op[1]));
                    item.getTimes().add(Long.parseLong(op[2]));
                    break;
                case "minute":
                    item.samplingInSeconds();
                    print(i, "minute", item, "csListMinute", item.getStatsDataInMinute());
                    break;
                case "hour":
                    item.samplingInMinutes();
                    print(i, "hour", item, "csListHour", item.getStatsDataInHour());
                    break;
                case "day":
                    item.samplingInHour();
                    print(i, "day", item, "csListDay", item.getStatsDataInDay());
                    break;
                case "put":
                    store.getSinglePutMessageTopicTimesTotal("T").add(Long.parseLong(op[1]));
                    break;
                case "found":
                    store.getGetMessageTimesTotalFound().add(Long.parseLong(op[1]));
                    break;
                case "miss":
                    store.getGetMessageTimesTotalMiss().add(Long.parseLong(op[1]));
                    break;
                case "transfer":
                    store.getGetMessageTransferedMsgCount().add(Long.parseLong(op[1]));
                    break;
                case "second":
                    sampling.invoke(store);
                    alignRound(store);
                    HashMap<String, String> info = store.getRuntimeInfo();
                    System.out.println("CASE " + i + " second ts=" + lastStoreSample(store) + " putTps="
                        + info.get("putTps") + "|getFoundTps=" + info.get("getFoundTps") + "|getMissTps="
                        + info.get("getMissTps") + "|getTotalTps=" + info.get("getTotalTps") + "|getTransferedTps="
                        + info.get("getTransferedTps"));
                    break;
                case "sleep":
                    Thread.sleep(Long.parseLong(op[1]));
                    break;
                default:
                    throw new IllegalArgumentException(args[i]);
            }
        }
    }

    static void print(int i, String window, StatsItem item, String list, StatsSnapshot ss) throws Exception {
        Field f = StatsItem.class.getDeclaredField(list);
        f.setAccessible(true);
        Object last = ((LinkedList<?>) f.get(item)).getLast();
        Method ts = last.getClass().getDeclaredMethod("getTimestamp");
        ts.setAccessible(true);
        System.out.println("CASE " + i + " " + window + " ts=" + ts.invoke(last) + " " + ss.getSum() + " "
            + ss.getTps() + " " + ss.getAvgpt() + " " + ss.getTimes());
    }

    // sampling() reads the clock once per list, so a round's four samples can be a millisecond apart; ours take
    // one timestamp a round: the found, miss and transferred samples get the put sample's timestamp
    static void alignRound(StoreStatsService store) throws Exception {
        long ts = lastStoreSample(store);
        for (String list : new String[] {"getTimesFoundList", "getTimesMissList", "transferedMsgCountList"}) {
            Field f = StoreStatsService.class.getDeclaredField(list);
            f.setAccessible(true);
            Object last = ((LinkedList<?>) f.get(store)).getLast();
            Field t = last.getClass().getDeclaredField("timestamp");
            t.setAccessible(true);
            t.setLong(last, ts);
        }
    }

    static long lastStoreSample(StoreStatsService store) throws Exception {
        Field f = StoreStatsService.class.getDeclaredField("putTimesList");
        f.setAccessible(true);
        Object last = ((LinkedList<?>) f.get(store)).getLast();
        Field ts = last.getClass().getDeclaredField("timestamp");
        ts.setAccessible(true);
        return ts.getLong(last);
    }
}
