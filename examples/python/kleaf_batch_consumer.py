#!/usr/bin/env python3
"""A reference consumer of kleaf's ID batches in Python (confluent-kafka), following
docs/ids-topic.md step by step: it joins a consumer group on the topic of one stream (TAG, MODE)
of an ids topic and prints each ID it is handed, one per line.

Usage: kleaf_batch_consumer.py BOOTSTRAP TOPIC GROUP TAG MODE(segment|snowflake|uuid7|ulid) COUNT
       [idle_timeout_ms] [librdkafka.property=value ...]

The same command line as examples/batch_consumer_example (C++). COUNT 0 means: until no ID arrives
for idle_timeout_ms (default 10000). SIGTERM or SIGINT stops it cleanly: it leaves the group and
prints its summary. Exit code 0 when COUNT IDs were printed (or, with COUNT 0, on the idle
timeout), and on SIGTERM/SIGINT; 1 on bad arguments, 2 on a timeout. The last line on stderr is
always the summary ("summary: printed=N ...").

It claims one record at a time: simple, not fast. A service would claim the next batch while it
hands out the current one (as kleaf::BatchConsumer does), still committing before using it.
A claim is two requests: the commit, then the partition's log start moved past the record
(DeleteRecords, the claim floor that outlives the group's committed offsets). Exit code 3 when the
claim cannot be made at all: a batch published for another group, or a right or a topic config
missing (the message says which).
"""

import json
import signal
import sys
import time
import uuid

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

MODES = ("segment", "snowflake", "uuid7", "ulid")
CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

# Defaults for fast failover and the contract's musts (docs/ids-topic.md). The musts cannot be
# overridden; the rest can, with property=value arguments.
DEFAULTS = {
    "session.timeout.ms": "6000",
    "heartbeat.interval.ms": "1000",
    "partition.assignment.strategy": "roundrobin",  # eager; the same name as BatchConsumer's
    # No commit (none yet, or expired): start at the log start, which every claim moved past the
    # batches it claimed (the claim floor), so everything readable there is unclaimed.
    "auto.offset.reset": "earliest",
}
MUSTS = {
    "enable.auto.commit": "false",  # a batch is claimed by our own synchronous commit only
    "isolation.level": "read_committed",  # batches of aborted transactions are never used
}
EAGER_ASSIGNORS = {"roundrobin", "range"}

# Commit errors that say the broker refused the commit (the member is not in the group's current
# generation): the batch is not ours, and nothing is in doubt.
REJECTED = {
    KafkaError.ILLEGAL_GENERATION,
    KafkaError.UNKNOWN_MEMBER_ID,
    KafkaError.REBALANCE_IN_PROGRESS,
    KafkaError.FENCED_INSTANCE_ID,
}

# Claim-floor errors that no retry mends: the principal lacks DELETE on the topic, or the topic
# is compacted (DeleteRecords is refused there).
REFUSED = {KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.POLICY_VIOLATION}
# The admin client's share of the consumer's properties: where the brokers are and how to reach them.
ADMIN_PREFIXES = ("bootstrap.", "security.", "sasl.", "ssl.", "socket.", "client.")

stop_signal = None


def on_stop_signal(signum, _frame):
    global stop_signal
    stop_signal = signum


def stream_topic(ids_topic, tag, mode):
    """The topic of stream (tag, mode): '<ids topic>.<mode>.<tag>', '_' -> '__', ':' -> '_c'."""
    return "%s.%s.%s" % (ids_topic, mode, tag.replace("_", "__").replace(":", "_c"))


def parse_id(value):
    """A non-negative 64-bit ID from a JSON string of decimal digits (or a JSON integer)."""
    if isinstance(value, str):
        if not value.isascii() or not value.isdigit():
            return None
        n = int(value)
    elif isinstance(value, int) and not isinstance(value, bool):
        n = value
    else:
        return None
    return n if 0 <= n < 2**63 else None


def parse_text_id(value, mode):
    """A 128-bit ID in its canonical text (docs/ids-topic.md): a UUIDv7 in lowercase
    8-4-4-4-12 hex with version 7 and the RFC 9562 variant, or a ULID in 26 uppercase Crockford
    base32 characters, the first at most '7'. The text itself, or None."""
    if not isinstance(value, str):
        return None
    if mode == "uuid7":
        try:
            parsed = uuid.UUID(value)
        except ValueError:
            return None
        ok = str(parsed) == value and parsed.version == 7 and parsed.variant == uuid.RFC_4122
        return value if ok else None
    ok = len(value) == 26 and value[0] <= "7" and all(c in CROCKFORD for c in value)
    return value if ok else None


def parse_batch(key, value, tag, mode):
    """(the IDs of a record of stream (tag, mode) in issue order (a range or a list), the group it
    is published for or None), or None when the record is malformed (docs/ids-topic.md, "Checks a
    consumer must make")."""
    if value is None:
        return None
    try:
        batch = json.loads(value)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(batch, dict) or batch.get("tag") != tag or batch.get("mode") != mode:
        return None
    if key is not None and key != tag.encode():
        return None
    group = batch.get("group")
    if group is not None and (not isinstance(group, str) or not group):
        return None
    ids = parse_ids(batch, mode)
    return None if ids is None else (ids, group)


def parse_ids(batch, mode):
    """The IDs of a decoded batch of `mode`, or None when they are malformed."""
    if mode == "segment" and "ids" not in batch:
        start, end = parse_id(batch.get("start")), parse_id(batch.get("end"))
        if start is None or end is None or end <= start:
            return None
        return range(start, end)
    if mode == "segment" and ("start" in batch or "end" in batch):
        return None  # a listed segment batch (an obfuscated tag, or more than one datacenter) has ids only
    ids = batch.get("ids")
    if not isinstance(ids, list) or not ids:
        return None
    if mode in ("uuid7", "ulid"):
        parsed = [parse_text_id(i, mode) for i in ids]
    else:
        parsed = [parse_id(i) for i in ids]
    return None if any(i is None for i in parsed) else parsed


class Member:
    """One membership of the group: a confluent-kafka Consumer subscribed to the stream's topic."""

    def __init__(self, config, topic, log):
        self.topic = topic
        self.log = log
        self.held = set()  # partitions assigned now
        self.floor = {}  # partition -> lowest offset we may still claim
        self.floor_checked = set()  # partitions whose claim floor the broker allows (this assignment)
        self.admin = AdminClient({k: v for k, v in config.items() if k.startswith(ADMIN_PREFIXES)})
        self.consumer = Consumer(config)
        self.consumer.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke)

    def _on_assign(self, _consumer, partitions):
        self.held = {p.partition for p in partitions}
        self.floor = {}  # read from the group at the first record of each partition
        self.floor_checked = set()
        self.log("assigned: %s" % sorted(self.held))

    def _on_revoke(self, _consumer, partitions):
        # Nothing fetched stays unclaimed across a poll (one record at a time), so there is
        # nothing to drop but the floors: the next owner starts at the committed offset.
        for p in partitions:
            self.held.discard(p.partition)
            self.floor.pop(p.partition, None)
        self.log("revoked: %s" % sorted(p.partition for p in partitions))

    def floor_of(self, partition):
        """The group's committed offset of `partition`, read once per assignment."""
        if partition not in self.floor:
            tp = self.consumer.committed([TopicPartition(self.topic, partition)], timeout=10)[0]
            self.floor[partition] = max(tp.offset, 0)  # OFFSET_INVALID (-1001): none yet
        return self.floor[partition]

    def delete_before(self, partition, offset):
        """Deletes the partition's records before `offset` (its log start moves up to it, never
        down): None, or the KafkaError."""
        try:
            before = TopicPartition(self.topic, partition, offset)
            futures = self.admin.delete_records([before], request_timeout=10, operation_timeout=10)
            for future in futures.values():
                future.result()
        except KafkaException as e:
            return e.args[0]
        return None

    def floor_allowed(self, partition):
        """Before the first claim of `partition` since it was assigned: a deletion before offset
        0 deletes nothing, but the broker checks it as any other (the DELETE right, a topic with
        cleanup.policy=delete). 'ok', 'refused' (no claim could ever move the floor) or
        'unavailable' (ask again later)."""
        if partition in self.floor_checked:
            return "ok"
        error = self.delete_before(partition, 0)
        if error is None:
            self.floor_checked.add(partition)
            return "ok"
        self.log("claim floor check of %s/%d failed: %s" % (self.topic, partition, error))
        if error.code() in REFUSED:
            self.log("the principal needs the DELETE right on topic %s, and the topic "
                     "cleanup.policy=delete (docs/ids-topic.md)" % self.topic)
            return "refused"
        return "unavailable"

    def claim(self, partition, offset):
        """Commits offset + 1 synchronously, then moves the partition's log start to offset + 1
        (the claim floor): 'ok', 'rejected' (not ours), 'unknown' (the commit may still land) or
        'unfloored' (claimed, but the floor did not move: drop it unused)."""
        try:
            result = self.consumer.commit(
                offsets=[TopicPartition(self.topic, partition, offset + 1)], asynchronous=False
            )
        except KafkaException as e:
            error = e.args[0]
            self.log("commit of %s/%d@%d failed: %s" % (self.topic, partition, offset, error))
            return "rejected" if error.code() in REJECTED else "unknown"
        for tp in result or []:
            if tp.error is not None:
                self.log("commit of %s/%d@%d failed: %s" % (self.topic, partition, offset, tp.error))
                return "rejected" if tp.error.code() in REJECTED else "unknown"
        self.floor[partition] = offset + 1
        # Claimed in the group. Then the floor: once the log starts past the record, no reader
        # can fetch it again, whatever becomes of the group's committed offsets (Kafka deletes
        # them offsets.retention.minutes after the group emptied). Only then may it be used.
        error = self.delete_before(partition, offset + 1)
        if error is not None:
            self.log("claim floor of %s/%d@%d failed: %s" % (self.topic, partition, offset, error))
            return "unfloored"
        return "ok"

    def close(self):
        self.consumer.close()  # leaves the group: its partitions move at once


def main(argv):
    if len(argv) < 7:
        sys.stderr.write(
            "usage: %s BOOTSTRAP TOPIC GROUP TAG segment|snowflake|uuid7|ulid COUNT "
            "[idle_timeout_ms] "
            "[property=value ...]\n" % argv[0]
        )
        return 1
    bootstrap, ids_topic, group, tag, mode = argv[1:6]
    if mode not in MODES:
        sys.stderr.write("mode must be segment, snowflake, uuid7 or ulid, not %s\n" % mode)
        return 1
    try:
        count = int(argv[6])
        idle = int(argv[7]) / 1000.0 if len(argv) > 7 else 10.0
    except ValueError:
        sys.stderr.write("COUNT and idle_timeout_ms must be integers\n")
        return 1
    config = dict(DEFAULTS)
    for kv in argv[8:]:
        name, eq, value = kv.partition("=")
        if not eq or not name:
            sys.stderr.write("expected property=value, not %s\n" % kv)
            return 1
        if name in MUSTS and value != MUSTS[name]:
            sys.stderr.write("%s=%s would break the claim rule (docs/ids-topic.md)\n" % (name, value))
            return 1
        config[name] = value
    assignors = set(config["partition.assignment.strategy"].replace(" ", "").split(","))
    if not assignors <= EAGER_ASSIGNORS or config.get("group.protocol", "classic") != "classic":
        sys.stderr.write("only the eager assignors roundrobin and range are safe (docs/ids-topic.md)\n")
        return 1
    config.update(MUSTS)
    config.update({"bootstrap.servers": bootstrap, "group.id": group})

    def log(line):
        sys.stderr.write(line + "\n")
        sys.stderr.flush()

    signal.signal(signal.SIGTERM, on_stop_signal)
    signal.signal(signal.SIGINT, on_stop_signal)
    topic = stream_topic(ids_topic, tag, mode)
    stats = {"claimed": 0, "malformed": 0, "stale": 0, "rejected": 0, "rejoins": 0, "unfloored": 0}
    member = Member(config, topic, log)
    log("joined group %s on %s" % (group, topic))
    printed = 0
    why, code = "count", 0
    last_id_at = time.monotonic()
    while count == 0 or printed < count:
        if stop_signal is not None:
            why = "SIGTERM" if stop_signal == signal.SIGTERM else "SIGINT"
            break
        if time.monotonic() - last_id_at >= idle:
            log("no ID of %s/%s within %d ms" % (tag, mode, idle * 1000))
            why, code = "idle", 0 if count == 0 else 2
            break
        record = member.consumer.poll(0.2)  # short, so that a stop signal is seen soon
        if record is None:
            continue
        if record.error() is not None:
            if not record.error().fatal():
                log("consumer: %s" % record.error())
                continue
            raise KafkaException(record.error())
        partition, offset = record.partition(), record.offset()
        if record.topic() != topic or partition not in member.held:
            continue  # not a partition we hold now: never claim
        if offset < member.floor_of(partition):
            stats["stale"] += 1  # below the group's committed offset: claimed already
            continue
        parsed = parse_batch(record.key(), record.value(), tag, mode)
        if parsed is None:
            stats["malformed"] += 1  # skipped; the next claim's commit moves past it
            log("malformed record at %s/%d@%d: %r" % (topic, partition, offset, record.value()))
            continue
        ids, published_for = parsed
        if published_for is not None and published_for != group:
            # Another group's batch: two groups on one stream would each claim every batch.
            log("refused: the batches of %s are published for consumer group %s (the producer's "
                "producer.group), and this consumer is in group %s: none is claimed here "
                "(docs/ids-topic.md, \"One group per stream\")" % (topic, published_for, group))
            why, code = "foreign_group", 3
            break
        allowed = member.floor_allowed(partition)
        if allowed == "refused":
            why, code = "claim_refused", 3
            break
        if allowed != "ok":
            # Nothing claimed: read the record again after a pause.
            member.consumer.seek(TopicPartition(topic, partition, offset))
            time.sleep(0.5)
            continue
        outcome = member.claim(partition, offset)
        if outcome == "unfloored":
            stats["unfloored"] += 1  # claimed, never used: a gap
            continue
        if outcome == "rejected":
            stats["rejected"] += 1  # the group moved on: not ours, drop it
            continue
        if outcome == "unknown":
            # The commit may still land: make no other commit on this membership. Leave the
            # group and join again; the rebalance's new generation fences the old request.
            stats["rejected"] += 1
            stats["rejoins"] += 1
            member.close()
            member = Member(config, topic, log)
            continue
        stats["claimed"] += 1
        # Claimed: the IDs are ours. Those not printed (COUNT reached) are a gap.
        take = ids if count == 0 else ids[: count - printed]
        sys.stdout.write("".join("%s\n" % i for i in take))
        sys.stdout.flush()
        printed += len(take)
        last_id_at = time.monotonic()
    began = time.monotonic()
    member.close()
    log(
        "summary: printed=%d claimed=%d malformed=%d stale=%d rejected=%d rejoins=%d "
        "unfloored=%d close_ms=%d stopped_by=%s"
        % (printed, stats["claimed"], stats["malformed"], stats["stale"], stats["rejected"],
           stats["rejoins"], stats["unfloored"], (time.monotonic() - began) * 1000, why)
    )
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
