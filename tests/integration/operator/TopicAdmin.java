// The operator's hand on the broker for the operator-mistakes suite, through Kafka's own Admin API
// (the broker's jars carry no kafka-tools, so no kafka-topics.sh / TopicCommand here). Run as a
// single-file program: java -cp "$(compose/kafka.sh libs)/*" TopicAdmin.java BOOTSTRAP COMMAND ...
//   partitions TOPIC N          adds partitions until TOPIC has N
//   delete TOPIC                deletes TOPIC and waits until the broker no longer lists it
//   create TOPIC N [KEY=VALUE]  creates TOPIC with N partitions (replication 1) and the configs
//   describe TOPIC              prints "TOPIC partitions=N id=TOPIC_ID"
// Exit 0 on success, 1 with the error on stderr.
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;

public class TopicAdmin {
  private static final long TIMEOUT_S = 30;

  public static void main(String[] args) throws Exception {
    if (args.length < 3) {
      System.err.println("usage: TopicAdmin BOOTSTRAP partitions|delete|create|describe TOPIC ...");
      System.exit(2);
    }
    Properties props = new Properties();
    props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
    String topic = args[2];
    try (Admin admin = Admin.create(props)) {
      switch (args[1]) {
        case "partitions":
          admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(Integer.parseInt(args[3]))))
              .all().get(TIMEOUT_S, TimeUnit.SECONDS);
          break;
        case "delete":
          admin.deleteTopics(List.of(topic)).all().get(TIMEOUT_S, TimeUnit.SECONDS);
          long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(TIMEOUT_S);
          while (admin.listTopics().names().get(TIMEOUT_S, TimeUnit.SECONDS).contains(topic)) {
            if (System.nanoTime() > deadline) throw new IllegalStateException(topic + " still listed");
            Thread.sleep(100);  // poll interval of a deadline-bounded wait
          }
          break;
        case "create": {
          Map<String, String> configs = new HashMap<>();
          for (int i = 4; i < args.length; ++i) {
            String[] kv = args[i].split("=", 2);
            configs.put(kv[0], kv[1]);
          }
          NewTopic t = new NewTopic(topic, Integer.parseInt(args[3]), (short) 1).configs(configs);
          admin.createTopics(List.of(t)).all().get(TIMEOUT_S, TimeUnit.SECONDS);
          break;
        }
        case "describe": {
          TopicDescription d = admin.describeTopics(Set.of(topic)).allTopicNames()
              .get(TIMEOUT_S, TimeUnit.SECONDS).get(topic);
          System.out.println(topic + " partitions=" + d.partitions().size() + " id=" + d.topicId());
          break;
        }
        default:
          System.err.println("unknown command " + args[1]);
          System.exit(2);
      }
    } catch (Exception e) {
      System.err.println("TopicAdmin " + args[1] + " " + topic + ": " + e);
      System.exit(1);
    }
  }
}
