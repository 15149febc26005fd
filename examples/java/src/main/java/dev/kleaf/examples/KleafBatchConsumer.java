// A reference consumer of kleaf's ID batches in Java (Apache kafka-clients), following
// docs/ids-topic.md step by step: it joins a consumer group on the topic of one stream (TAG, MODE)
// of an ids topic and prints each ID it is handed, one per line.
//
// Usage: KleafBatchConsumer BOOTSTRAP TOPIC GROUP TAG MODE(segment|snowflake|uuid7|ulid) COUNT
//        [idle_timeout_ms] [consumer.property=value ...]
//
// The same command line as examples/batch_consumer_example (C++) and the Python consumer. COUNT 0
// means: until no ID arrives for idle_timeout_ms (default 10000). SIGTERM or SIGINT stops it
// cleanly: it leaves the group and prints its summary. Exit code 0 when COUNT IDs were printed (or,
// with COUNT 0, on the idle timeout), and on SIGTERM/SIGINT; 1 on bad arguments, 2 on a timeout.
// The last line on stderr is always the summary ("summary: printed=N ...").
//
// It claims one record at a time (max.poll.records 1): simple, not fast. A claim is two requests:
// the commit, then the partition's log start moved past the record (Admin.deleteRecords, the
// claim floor that outlives the group's committed offsets). Exit code 3 when no claim can be made:
// a batch published for another group, or a right or a topic config missing (the log says which).
package dev.kleaf.examples;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedWriter;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.FencedInstanceIdException;
import org.apache.kafka.common.errors.PolicyViolationException;
import org.apache.kafka.common.errors.TopicAuthorizationException;
import org.apache.kafka.common.errors.RebalanceInProgressException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public final class KleafBatchConsumer {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static volatile boolean stopRequested = false;
  private static volatile int exitCode = 1;
  private static final CountDownLatch finished = new CountDownLatch(1);

  /** The topic of stream (tag, mode): "<ids topic>.<mode>.<tag>", '_' -> "__", ':' -> "_c". */
  static String streamTopic(String idsTopic, String tag, String mode) {
    return idsTopic + "." + mode + "." + tag.replace("_", "__").replace(":", "_c");
  }

  /** A non-negative 64-bit ID from a JSON string of decimal digits (or a JSON integer); -1 if not. */
  static long parseId(JsonNode v) {
    if (v == null) return -1;
    if (v.isTextual()) {
      String s = v.asText();
      if (s.isEmpty() || !s.chars().allMatch(c -> c >= '0' && c <= '9')) return -1;
      try {
        return Long.parseLong(s);
      } catch (NumberFormatException e) {
        return -1;  // above 2^63 - 1
      }
    }
    if (v.isIntegralNumber() && v.canConvertToLong()) return v.asLong() >= 0 ? v.asLong() : -1;
    return -1;
  }

  private static final String CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

  /**
   * A 128-bit ID in its canonical text (docs/ids-topic.md): a UUIDv7 in lowercase 8-4-4-4-12 hex
   * with version 7 and the RFC 9562 variant, or a ULID in 26 uppercase Crockford base32
   * characters, the first at most '7'. The text itself, or null.
   */
  static String parseTextId(JsonNode v, String mode) {
    if (v == null || !v.isTextual()) return null;
    String s = v.asText();
    if (mode.equals("uuid7")) {
      UUID u;
      try {
        u = UUID.fromString(s);
      } catch (IllegalArgumentException e) {
        return null;
      }
      return u.toString().equals(s) && u.version() == 7 && u.variant() == 2 ? s : null;
    }
    if (s.length() != 26 || s.charAt(0) > '7') return null;
    return s.chars().allMatch(c -> CROCKFORD.indexOf(c) >= 0) ? s : null;
  }

  /**
   * The IDs of a record of stream (tag, mode), in issue order, as they are printed (decimal for
   * 64-bit IDs, the canonical text for 128-bit ones), or null when the record is malformed
   * (docs/ids-topic.md, "Checks a consumer must make").
   */
  static Batch parseBatch(byte[] key, byte[] value, String tag, String mode) {
    if (value == null) return null;
    if (key != null && !tag.equals(new String(key, StandardCharsets.UTF_8))) return null;
    JsonNode b;
    try {
      b = JSON.readTree(value);
    } catch (IOException e) {
      return null;
    }
    if (b == null || !b.isObject()) return null;
    if (!b.path("tag").isTextual() || !tag.equals(b.get("tag").asText())) return null;
    if (!b.path("mode").isTextual() || !mode.equals(b.get("mode").asText())) return null;
    String group = null;
    if (b.has("group")) {
      if (!b.get("group").isTextual() || b.get("group").asText().isEmpty()) return null;
      group = b.get("group").asText();
    }
    String[] ids = parseIds(b, mode);
    return ids == null ? null : new Batch(ids, group);
  }

  /** A well-formed batch: its IDs as printed, and the group it is published for (null: none named). */
  record Batch(String[] ids, String group) {}

  /** The IDs of a parsed batch of `mode`, as parseBatch prints them, or null when malformed. */
  static String[] parseIds(JsonNode b, String mode) {
    if (mode.equals("segment") && !b.has("ids")) {
      long start = parseId(b.get("start"));
      long end = parseId(b.get("end"));
      if (start < 0 || end < 0 || end <= start || end - start > Integer.MAX_VALUE) return null;
      String[] ids = new String[(int) (end - start)];
      for (int i = 0; i < ids.length; ++i) ids[i] = Long.toString(start + i);
      return ids;
    }
    // A listed segment batch (an obfuscated tag, or more than one datacenter) has ids only.
    if (mode.equals("segment") && (b.has("start") || b.has("end"))) return null;
    JsonNode list = b.get("ids");
    if (list == null || !list.isArray() || list.isEmpty()) return null;
    boolean text = mode.equals("uuid7") || mode.equals("ulid");
    String[] ids = new String[list.size()];
    for (int i = 0; i < ids.length; ++i) {
      if (text) {
        ids[i] = parseTextId(list.get(i), mode);
      } else {
        long id = parseId(list.get(i));
        ids[i] = id < 0 ? null : Long.toString(id);
      }
      if (ids[i] == null) return null;
    }
    return ids;
  }

  /** One membership of the group: a KafkaConsumer subscribed to the stream's topic. */
  static final class Member implements ConsumerRebalanceListener {
    final KafkaConsumer<byte[], byte[]> consumer;
    final Admin admin;
    final Set<Integer> held = new HashSet<>();
    final Map<Integer, Long> floor = new HashMap<>();  // lowest offset we may still claim
    final Set<Integer> floorChecked = new HashSet<>();  // the broker allows their claim floor

    Member(Properties config, String topic) {
      // The admin client's share of the consumer's properties: the brokers and how to reach them.
      Properties adminConfig = new Properties();
      for (String name : AdminClientConfig.configNames()) {
        if (config.containsKey(name)) adminConfig.put(name, config.get(name));
      }
      admin = Admin.create(adminConfig);
      consumer = new KafkaConsumer<>(config);
      consumer.subscribe(List.of(topic), this);
    }

    @Override
    public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
      for (TopicPartition tp : partitions) held.add(tp.partition());
      floor.clear();  // read from the group at the first record of each partition
      floorChecked.clear();
      log("assigned: " + sorted(partitions));
    }

    @Override
    public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
      // One record per poll, claimed or dropped before the next: nothing fetched is left unclaimed,
      // so only the floors go; the next owner starts at the committed offset.
      for (TopicPartition tp : partitions) {
        held.remove(tp.partition());
        floor.remove(tp.partition());
      }
      log("revoked: " + sorted(partitions));
    }

    @Override
    public void onPartitionsLost(Collection<TopicPartition> partitions) {
      onPartitionsRevoked(partitions);
    }

    /** The group's committed offset of `tp`, read once per assignment. */
    long floorOf(TopicPartition tp) {
      return floor.computeIfAbsent(tp.partition(), p -> {
        OffsetAndMetadata c = consumer.committed(Set.of(tp), Duration.ofSeconds(10)).get(tp);
        return c == null ? 0L : c.offset();
      });
    }

    enum Claim { OK, REJECTED, UNKNOWN, UNFLOORED }

    enum Floor { OK, REFUSED, UNAVAILABLE }

    /** Deletes the partition's records before `offset` (its log start moves up to it, never down). */
    Floor deleteBefore(TopicPartition tp, long offset) {
      try {
        admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(offset)))
            .all().get(10, TimeUnit.SECONDS);
        return Floor.OK;
      } catch (ExecutionException e) {
        log("deleting " + tp + " before " + offset + " failed: " + e.getCause());
        return e.getCause() instanceof TopicAuthorizationException
                || e.getCause() instanceof PolicyViolationException
            ? Floor.REFUSED
            : Floor.UNAVAILABLE;
      } catch (Exception e) {
        log("deleting " + tp + " before " + offset + " failed: " + e);
        return Floor.UNAVAILABLE;
      }
    }

    /**
     * Before the first claim of `tp` since it was assigned: a deletion before offset 0 deletes
     * nothing, but the broker checks it as any other (the DELETE right, cleanup.policy=delete).
     */
    Floor floorAllowed(TopicPartition tp) {
      if (floorChecked.contains(tp.partition())) return Floor.OK;
      Floor f = deleteBefore(tp, 0);
      if (f == Floor.OK) floorChecked.add(tp.partition());
      if (f == Floor.REFUSED) {
        log("the principal needs the DELETE right on topic " + tp.topic()
            + ", and the topic cleanup.policy=delete (docs/ids-topic.md)");
      }
      return f;
    }

    /**
     * Commits offset + 1 synchronously, then moves the partition's log start to offset + 1 (the
     * claim floor). UNFLOORED: claimed, but the floor did not move: drop it unused.
     */
    Claim claim(TopicPartition tp, long offset) {
      try {
        consumer.commitSync(Map.of(tp, new OffsetAndMetadata(offset + 1)), Duration.ofSeconds(10));
      } catch (CommitFailedException | RebalanceInProgressException | FencedInstanceIdException e) {
        // The broker refused it: the member is not in the group's current generation.
        log("commit of " + tp + "@" + offset + " rejected: " + e.getMessage());
        return Claim.REJECTED;
      } catch (KafkaException e) {
        // A timeout or anything else: the commit may still land.
        log("commit of " + tp + "@" + offset + " failed: " + e);
        return Claim.UNKNOWN;
      }
      floor.put(tp.partition(), offset + 1);
      // Claimed in the group. Then the floor: once the log starts past the record, no reader can
      // fetch it again, whatever becomes of the group's committed offsets (Kafka deletes them
      // offsets.retention.minutes after the group emptied). Only then may it be used.
      return deleteBefore(tp, offset + 1) == Floor.OK ? Claim.OK : Claim.UNFLOORED;
    }

    void close() {
      consumer.close(Duration.ofSeconds(10));  // leaves the group: its partitions move at once
      admin.close(Duration.ofSeconds(5));
    }
  }

  static String sorted(Collection<TopicPartition> partitions) {
    List<Integer> p = new ArrayList<>();
    for (TopicPartition tp : partitions) p.add(tp.partition());
    p.sort(null);
    return p.toString();
  }

  static synchronized void log(String line) {
    System.err.println(line);
    System.err.flush();
  }

  public static void main(String[] argv) throws Exception {
    int code = run(argv);
    exitCode = code;
    finished.countDown();
    // Stopped by a signal: the shutdown hook ends the JVM (System.exit would wait for it forever).
    if (!stopRequested) System.exit(code);
  }

  static int run(String[] argv) throws Exception {
    if (argv.length < 6) {
      log("usage: KleafBatchConsumer BOOTSTRAP TOPIC GROUP TAG segment|snowflake|uuid7|ulid COUNT "
          + "[idle_timeout_ms] [property=value ...]");
      return 1;
    }
    String bootstrap = argv[0], idsTopic = argv[1], group = argv[2], tag = argv[3], mode = argv[4];
    if (!List.of("segment", "snowflake", "uuid7", "ulid").contains(mode)) {
      log("mode must be segment, snowflake, uuid7 or ulid, not " + mode);
      return 1;
    }
    long count;
    long idleMs;
    try {
      count = Long.parseLong(argv[5]);
      idleMs = argv.length > 6 ? Long.parseLong(argv[6]) : 10000;
    } catch (NumberFormatException e) {
      log("COUNT and idle_timeout_ms must be integers");
      return 1;
    }
    // Defaults for fast failover (overridable), then the contract's musts (not overridable).
    Properties config = new Properties();
    config.put("session.timeout.ms", "6000");
    config.put("heartbeat.interval.ms", "1000");
    // Eager, and named "roundrobin" like librdkafka's: C++ and Python members share the group.
    config.put("partition.assignment.strategy",
        "org.apache.kafka.clients.consumer.RoundRobinAssignor");
    // No commit (none yet, or expired): start at the log start, which every claim moved past the
    // batches it claimed (the claim floor), so everything readable there is unclaimed.
    config.put("auto.offset.reset", "earliest");
    config.put("max.poll.records", "1");
    Map<String, String> musts = Map.of(
        "enable.auto.commit", "false",          // claimed by our own synchronous commit only
        "isolation.level", "read_committed",    // Java's default is read_uncommitted
        "group.protocol", "classic");           // KIP-848's protocol is incremental
    for (int i = 7; i < argv.length; ++i) {
      int eq = argv[i].indexOf('=');
      if (eq <= 0) {
        log("expected property=value, not " + argv[i]);
        return 1;
      }
      String name = argv[i].substring(0, eq), value = argv[i].substring(eq + 1);
      if (musts.containsKey(name) && !musts.get(name).equals(value)) {
        log(name + "=" + value + " would break the claim rule (docs/ids-topic.md)");
        return 1;
      }
      config.put(name, value);
    }
    for (String a : config.getProperty("partition.assignment.strategy").split(",")) {
      String n = a.trim();
      if (!n.equals("org.apache.kafka.clients.consumer.RoundRobinAssignor")
          && !n.equals("org.apache.kafka.clients.consumer.RangeAssignor")) {
        log("only the eager assignors RoundRobinAssignor and RangeAssignor are safe "
            + "(docs/ids-topic.md), not " + n);
        return 1;
      }
    }
    config.putAll(musts);
    config.put("bootstrap.servers", bootstrap);
    config.put("group.id", group);
    config.put("key.deserializer", ByteArrayDeserializer.class.getName());
    config.put("value.deserializer", ByteArrayDeserializer.class.getName());

    // SIGTERM/SIGINT: the loop sees the flag within a poll (200 ms), closes and prints; the hook
    // waits for that, then ends the JVM with the loop's exit code (0), not the signal's.
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      stopRequested = true;
      try {
        if (finished.await(30, TimeUnit.SECONDS)) Runtime.getRuntime().halt(exitCode);
      } catch (InterruptedException ignored) {
        // exit with the signal's code
      }
    }));

    String topic = streamTopic(idsTopic, tag, mode);
    long claimed = 0, malformed = 0, stale = 0, rejected = 0, rejoins = 0, unfloored = 0,
        printed = 0;
    BufferedWriter out = new BufferedWriter(
        new OutputStreamWriter(new FileOutputStream(FileDescriptor.out), StandardCharsets.US_ASCII),
        1 << 16);
    Member member = new Member(config, topic);
    log("joined group " + group + " on " + topic);
    String why = "count";
    int code = 0;
    long lastIdAt = System.nanoTime();
    while (count == 0 || printed < count) {
      if (stopRequested) {
        why = "signal";
        break;
      }
      if (System.nanoTime() - lastIdAt >= idleMs * 1_000_000L) {
        log("no ID of " + tag + "/" + mode + " within " + idleMs + " ms");
        why = "idle";
        code = count == 0 ? 0 : 2;
        break;
      }
      ConsumerRecords<byte[], byte[]> records = member.consumer.poll(Duration.ofMillis(200));
      boolean refused = false;
      for (ConsumerRecord<byte[], byte[]> r : records) {
        TopicPartition tp = new TopicPartition(r.topic(), r.partition());
        if (!r.topic().equals(topic) || !member.held.contains(r.partition())) continue;
        if (r.offset() < member.floorOf(tp)) {
          ++stale;  // below the group's committed offset: claimed already
          continue;
        }
        Batch batch = parseBatch(r.key(), r.value(), tag, mode);
        if (batch == null) {
          ++malformed;  // skipped; the next claim's commit moves past it
          log("malformed record at " + tp + "@" + r.offset());
          continue;
        }
        if (batch.group() != null && !batch.group().equals(group)) {
          // Another group's batch: two groups on one stream would each claim every batch.
          log("refused: the batches of " + topic + " are published for consumer group "
              + batch.group() + " (the producer's producer.group), and this consumer is in group "
              + group + ": none is claimed here (docs/ids-topic.md, \"One group per stream\")");
          why = "foreign_group";
          refused = true;
          break;
        }
        String[] ids = batch.ids();
        Member.Floor allowed = member.floorAllowed(tp);
        if (allowed == Member.Floor.REFUSED) {
          why = "claim_refused";
          refused = true;
          break;
        }
        if (allowed != Member.Floor.OK) {
          // Nothing claimed: read the record again after a pause.
          member.consumer.seek(tp, r.offset());
          Thread.sleep(500);
          break;
        }
        Member.Claim outcome = member.claim(tp, r.offset());
        if (outcome == Member.Claim.UNFLOORED) {
          ++unfloored;  // claimed, never used: a gap
          continue;
        }
        if (outcome == Member.Claim.REJECTED) {
          ++rejected;  // the group moved on: not ours, drop it
          continue;
        }
        if (outcome == Member.Claim.UNKNOWN) {
          // The commit may still land: no other commit on this membership. Leave and join again;
          // the rebalance's new generation fences the old request.
          ++rejected;
          ++rejoins;
          member.close();
          member = new Member(config, topic);
          break;
        }
        ++claimed;
        // Claimed: the IDs are ours. Those not printed (COUNT reached) are a gap.
        int take = count == 0 ? ids.length : (int) Math.min(ids.length, count - printed);
        StringBuilder lines = new StringBuilder(take * 37);
        for (int i = 0; i < take; ++i) lines.append(ids[i]).append('\n');
        out.write(lines.toString());
        out.flush();
        printed += take;
        lastIdAt = System.nanoTime();
      }
      if (refused) {
        code = 3;
        break;
      }
    }
    long began = System.nanoTime();
    member.close();
    log(String.format(
        "summary: printed=%d claimed=%d malformed=%d stale=%d rejected=%d rejoins=%d unfloored=%d "
            + "close_ms=%d stopped_by=%s",
        printed, claimed, malformed, stale, rejected, rejoins, unfloored,
        (System.nanoTime() - began) / 1_000_000, why));
    return code;
  }

  private KleafBatchConsumer() {}
}
