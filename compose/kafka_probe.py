#!/usr/bin/env python3
"""Kafka protocol probes for compose/kafka.sh: a few requests over a plain socket, answered in
milliseconds (a JVM admin tool takes seconds per call on a 2-core machine), nothing to install.

  kafka_probe.py ready PORT NODE [BROKERS]   exit 0 when a Metadata request to 127.0.0.1:PORT lists
                                             broker NODE at 127.0.0.1:PORT (and, with BROKERS, that
                                             many brokers in all)
  kafka_probe.py brokers PORT...             the broker ids of the first metadata answer
  kafka_probe.py leader TOPIC PARTITION PORT...
                                             the id of the broker leading TOPIC/PARTITION (-1: none)
                                             as the first broker that answers sees it
  kafka_probe.py controller CPORT...         the id of the active KRaft controller: DescribeQuorum
                                             on the controller listeners, the answer of the highest
                                             leader epoch
Exit 1 when no broker answered (or, for ready, the answer did not show what was asked).
"""
import socket
import struct
import sys

CLIENT = b"kleaf-probe"
TIMEOUT_S = 2


def roundtrip(port, request):
    """Sends one size-prefixed request to 127.0.0.1:port; the response without its size."""
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as s:
        s.settimeout(TIMEOUT_S)
        s.sendall(struct.pack(">i", len(request)) + request)

        def read(n):
            buf = b""
            while len(buf) < n:
                chunk = s.recv(n - len(buf))
                if not chunk:
                    raise OSError("connection closed")
                buf += chunk
            return buf

        (size,) = struct.unpack(">i", read(4))
        return read(size)


class Reader:
    def __init__(self, data):
        self.data, self.off = data, 0

    def take(self, fmt):
        values = struct.unpack_from(fmt, self.data, self.off)
        self.off += struct.calcsize(fmt)
        return values if len(values) > 1 else values[0]

    def string(self):  # int16 length, -1 for null
        n = self.take(">h")
        if n < 0:
            return None
        s = self.data[self.off:self.off + n].decode()
        self.off += n
        return s

    def uvarint(self):
        shift = value = 0
        while True:
            b = self.data[self.off]
            self.off += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7

    def compact_string(self):
        n = self.uvarint() - 1
        s = self.data[self.off:self.off + max(n, 0)].decode()
        self.off += max(n, 0)
        return s

    def skip_int32_array(self):
        n = self.take(">i")
        self.off += 4 * max(n, 0)

    def skip_tags(self):
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            size = self.uvarint()
            self.off += size


def metadata(port, topics):
    """Metadata v1: (brokers {id: (host, port)}, controller_id, {(topic, partition): leader})."""
    body = struct.pack(">i", len(topics))
    for t in topics:
        body += struct.pack(">h", len(t)) + t.encode()
    req = struct.pack(">hhih", 3, 1, 7, len(CLIENT)) + CLIENT + body
    r = Reader(roundtrip(port, req))
    if r.take(">i") != 7:
        raise OSError("wrong correlation id")
    brokers = {}
    for _ in range(r.take(">i")):
        node = r.take(">i")
        host = r.string()
        bport = r.take(">i")
        r.string()  # rack
        brokers[node] = (host, bport)
    controller = r.take(">i")
    leaders = {}
    for _ in range(r.take(">i")):
        error = r.take(">h")
        name = r.string()
        r.take(">b")  # is_internal
        for _ in range(r.take(">i")):
            perror, index, leader = r.take(">hii")
            r.skip_int32_array()  # replicas
            r.skip_int32_array()  # isr
            if error == 0:
                leaders[(name, index)] = leader if perror in (0, 9) else -1  # 9: replica missing
    return brokers, controller, leaders


def describe_quorum(cport):
    """DescribeQuorum v0 (flexible) for __cluster_metadata-0: (leader_id, leader_epoch)."""
    topic = b"__cluster_metadata"
    # Request header v2: key 55, version 0, correlation id, client id (int16 string), no tags.
    header = struct.pack(">hhih", 55, 0, 9, len(CLIENT)) + CLIENT + b"\x00"
    # topics: compact array of 1 (varint 2), name, partitions: compact array of 1 { index 0 }.
    body = b"\x02" + bytes([len(topic) + 1]) + topic + b"\x02" + struct.pack(">i", 0)
    body += b"\x00" + b"\x00" + b"\x00"  # partition tags, topic tags, request tags
    r = Reader(roundtrip(cport, header + body))
    if r.take(">i") != 9:
        raise OSError("wrong correlation id")
    r.skip_tags()  # response header v1
    if r.take(">h") != 0:
        raise OSError("DescribeQuorum error")
    if r.uvarint() - 1 < 1:
        raise OSError("no topic")
    r.compact_string()
    if r.uvarint() - 1 < 1:
        raise OSError("no partition")
    _index, error, leader, epoch = r.take(">ihii")
    if error != 0:
        raise OSError("partition error %d" % error)
    return leader, epoch


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    what, args = argv[1], argv[2:]
    try:
        if what == "ready":
            port, node = int(args[0]), int(args[1])
            want = int(args[2]) if len(args) > 2 else None
            try:
                brokers, _, _ = metadata(port, [])
            except (OSError, struct.error, UnicodeDecodeError, IndexError):
                return 1
            if brokers.get(node) != ("127.0.0.1", port):
                return 1
            return 0 if want is None or len(brokers) == want else 1
        if what == "brokers":
            for port in map(int, args):
                try:
                    brokers, _, _ = metadata(port, [])
                except (OSError, struct.error, UnicodeDecodeError, IndexError):
                    continue
                print(" ".join(str(b) for b in sorted(brokers)))
                return 0
            return 1
        if what == "leader":
            topic, partition = args[0], int(args[1])
            for port in map(int, args[2:]):
                try:
                    _, _, leaders = metadata(port, [topic])
                except (OSError, struct.error, UnicodeDecodeError, IndexError):
                    continue
                if (topic, partition) in leaders:
                    print(leaders[(topic, partition)])
                    return 0
            return 1
        if what == "controller":
            best = None
            for cport in map(int, args):
                try:
                    leader, epoch = describe_quorum(cport)
                except (OSError, struct.error, UnicodeDecodeError, IndexError):
                    continue
                if leader >= 0 and (best is None or epoch > best[1]):
                    best = (leader, epoch)
            if best is None:
                return 1
            print(best[0])
            return 0
    except (ValueError, IndexError):
        pass
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
