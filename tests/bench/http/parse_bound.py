#!/usr/bin/env python3
"""The worst case of the HTTP parse-buffer bound (docs/operations.md, "HTTP memory bound"),
measured on a running kleaf: N connections each hold a chunked request whose body is just under
http.body_limit_bytes and whose next chunk-size line (with an extension) stops just short of the
read buffer, so kleaf keeps every byte it may keep. Prints kleaf's RSS growth per connection.

  parse_bound.py PID PORT TOKEN [CONNECTIONS=1000] [--no-body]

Assumes the default limits (8192-byte headers, 65536-byte bodies) and http.max_connections above
CONNECTIONS. A manual measurement: it waits until the RSS stops moving."""
import re
import socket
import sys
import time

pid, port, token = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
args = [a for a in sys.argv[4:] if not a.startswith("--")]
n = int(args[0]) if args else 1000
with_body = "--no-body" not in sys.argv


def rss_kb(field="VmRSS"):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(field + r":\s+(\d+)", f.read()).group(1))


before = rss_kb()
request = (f"PUT /api/v1/tags/hold HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
           "Transfer-Encoding: chunked\r\n\r\n").encode()
if with_body:
    request += b"f000\r\n" + b"b" * 0xF000 + b"\r\n"  # 61440 body bytes, under 65536
request += b"1;" + b"a" * 8100  # a chunk-size line that never ends, under the 8192-byte buffer
held = []
for _ in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(request)
    held.append(s)
last = -1
for _ in range(100):
    time.sleep(0.2)
    now = rss_kb()
    if now == last:
        break
    last = now
growth = rss_kb() - before
print(f"{n} connections held: VmRSS {before} -> {rss_kb()} kB, growth {growth} kB, "
      f"{growth * 1024 // n} bytes per connection (bound 2 x 8192 + 65536 = 81920)")
