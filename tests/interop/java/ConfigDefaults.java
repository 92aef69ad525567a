// Prints the configuration keys a 4.9.8 broker's Configuration holds, with their defaults: one line per key,
// "CASE <key> <class> <value>", from the real config classes (MixAll.object2Properties, as the broker builds
// its Configuration; a field whose default is null is left out there, and here).
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;

import org.apache.rocketmq.common.BrokerConfig;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.remoting.netty.NettyClientConfig;
import org.apache.rocketmq.remoting.netty.NettyServerConfig;
import org.apache.rocketmq.store.config.MessageStoreConfig;

public class ConfigDefaults {
    public static void main(String[] args) {
        Object[] configs = {new BrokerConfig(), new NettyServerConfig(), new NettyClientConfig(),
            new MessageStoreConfig()};
        TreeMap<String, String> lines = new TreeMap<>();
        for (Object config : configs) {
            Properties properties = MixAll.object2Properties(config);
            for (Map.Entry<Object, Object> e : properties.entrySet()) {
                lines.put(e.getKey().toString(), config.getClass().getSimpleName() + " " + e.getValue());
            }
        }
        for (Map.Entry<String, String> e : lines.entrySet()) {
            System.out.println("CASE " + e.getKey() + " " + e.getValue());
        }
    }
}
