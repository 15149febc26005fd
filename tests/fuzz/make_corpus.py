#!/usr/bin/env python3
"""Writes the seed corpus of the HTTP fuzzer (tests/fuzz/corpus/http): valid requests for every
route, and the hostile shapes kleaf must refuse (request smuggling, framing that never ends,
limits). Run it again after changing the list; the files are committed."""
import os

TOKEN = "fuzz-admin-token-0123456789"  # kToken in http_fuzz.cc
H = "Host: 127.0.0.1\r\n"
AUTH = f"Authorization: Bearer {TOKEN}\r\n"


def get(target, extra="", version="1.1", method="GET"):
    return f"{method} {target} HTTP/{version}\r\n{H}{extra}\r\n"


def put(target, body, extra=""):
    return f"PUT {target} HTTP/1.1\r\n{H}{AUTH}{extra}Content-Length: {len(body)}\r\n\r\n{body}"


def post(target, body):
    return f"POST {target} HTTP/1.1\r\n{H}Content-Length: {len(body)}\r\n\r\n{body}"


def chunked(target, chunks, trailer="", extra="", te="chunked"):
    out = f"PUT {target} HTTP/1.1\r\n{H}{AUTH}{extra}Transfer-Encoding: {te}\r\n\r\n"
    for c in chunks:
        out += f"{len(c):x}\r\n{c}\r\n"
    return out + "0\r\n" + trailer + "\r\n"


SMUGGLED = get("/api/v1/segment/smuggled")
SEEDS = {
    # Valid: every route, HEAD, pipelining, keep-alive and close, HTTP/1.0.
    "leaf_segment": get("/api/segment/get/order"),
    "leaf_snowflake": get("/api/snowflake/get/order"),
    "v1_segment_batch": get("/api/v1/segment/order?count=5"),
    "v1_snowflake_batch": get("/api/v1/snowflake/order?count=100"),
    "decode": get("/api/v1/snowflake/decode/1256557484213448722"),
    "health_metrics_ready": get("/healthz") + get("/metrics") + get("/readyz"),
    "status_and_page": get("/api/v1/status") + get("/"),
    "tags_list": get("/api/v1/tags", AUTH),
    "tag_get": get("/api/v1/tags/order", AUTH),
    "tag_put": put("/api/v1/tags/new", '{"step":100,"max_id":5,"description":"d"}'),
    "tag_delete": get("/api/v1/tags/order", AUTH, method="DELETE"),
    "workers": get("/api/v1/workers", AUTH),
    "space_put_and_seqs": put("/api/v1/spaces/inbox", '{"section_size":100,"step":10}')
    + get("/api/v1/seq/inbox/42") + get("/api/v1/seq/inbox/42/current") + get("/api/v1/seq/inbox")
    + post("/api/v1/seq/inbox", '{"keys":["1","2","1"]}'),
    "spaces_list_and_delete": get("/api/v1/spaces", AUTH) + get("/api/v1/spaces/inbox", AUTH, method="DELETE"),
    "bad_seq_keys": get("/api/v1/seq/inbox/-1") + get("/api/v1/seq/inbox/18446744073709551616")
    + post("/api/v1/seq/inbox", '{"keys":[-1]}'),
    # Found by the fuzzer: a key that is not UTF-8 was quoted into the error, whose JSON threw.
    "seq_key_not_utf8": get("/api/v1/seq/inbox/\xff\xfe") + get("/api/v1/seq/inbox/" + "1" * 39 + "\xc3\xa9"),
    "head_pipelined": get("/api/v1/segment/order", method="HEAD") + get("/healthz", method="HEAD")
    + get("/api/segment/get/order"),
    "head_405": get("/api/v1/tags/order", method="HEAD"),
    "pipelined_close": get("/healthz") + get("/api/v1/snowflake/order?count=2", "Connection: close\r\n")
    + get("/healthz"),
    "http10": get("/healthz", version="1.0") + get("/healthz", "Connection: keep-alive\r\n", "1.0"),
    "chunked_valid": chunked("/api/v1/tags/chunky", ['{"st', 'ep":', "100}"]),
    "chunked_ext_trailer": f"PUT /api/v1/tags/t HTTP/1.1\r\n{H}{AUTH}Transfer-Encoding: chunked\r\n\r\n"
    "5;name=value;q=\"x\"\r\n{\"ste\r\n7\r\np\":100}\r\n0\r\nX-Trailer: 1\r\n\r\n" + get("/healthz"),
    "wrong_method": get("/api/v1/segment/order", method="POST") + get("/healthz", method="DELETE"),
    "bad_count": get("/api/v1/segment/order?count=0") + get("/api/v1/snowflake/order?count=1e3"),
    "bad_tag": get("/api/v1/segment/bad$tag") + get("/api/segment/get/" + "t" * 129),
    "bad_auth": get("/api/v1/tags", "Authorization: Bearer wrong\r\n"),
    "bad_json": put("/api/v1/tags/x", '{"step":"many"}') + put("/api/v1/tags/y", "[1,2"),
    # Smuggling: a body whose length is ambiguous, then a request hidden in it.
    "te_gzip": chunked("/api/v1/tags/victim", [SMUGGLED], te="gzip"),
    "te_identity": chunked("/api/v1/tags/victim", [], te="identity") + SMUGGLED,
    "te_xchunked": chunked("/api/v1/tags/victim", [], te="xchunked") + SMUGGLED,
    "te_empty": chunked("/api/v1/tags/victim", [], te="") + SMUGGLED,
    "te_chunked_identity": chunked("/api/v1/tags/victim", [], te="chunked, identity") + SMUGGLED,
    "te_twice": chunked("/api/v1/tags/victim", [], extra="Transfer-Encoding: chunked\r\n") + SMUGGLED,
    "te_and_cl": chunked("/api/v1/tags/victim", [], extra="Content-Length: 5\r\n") + SMUGGLED,
    "te_http10": f"PUT /api/v1/tags/v HTTP/1.0\r\n{H}Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + SMUGGLED,
    "cl_twice": f"PUT /api/v1/tags/v HTTP/1.1\r\n{H}Content-Length: 2\r\nContent-Length: 40\r\n\r\nab" + SMUGGLED,
    # Framing that never ends, limits.
    "endless_extension": f"PUT /x HTTP/1.1\r\n{H}Transfer-Encoding: chunked\r\n\r\n1;" + "a" * 1500,
    "endless_whitespace": f"PUT /x HTTP/1.1\r\n{H}Transfer-Encoding: chunked\r\n\r\n1" + " " * 1500,
    "endless_trailer": f"PUT /x HTTP/1.1\r\n{H}Transfer-Encoding: chunked\r\n\r\n0\r\n" + "X-T: 1\r\n" * 200,
    "stuffed_chunks": f"PUT /x HTTP/1.1\r\n{H}Transfer-Encoding: chunked\r\n\r\n"
    + ("1;" + "e" * 200 + "\r\nX\r\n") * 20 + "0\r\n\r\n",
    "big_header": f"GET / HTTP/1.1\r\nX-Big: {'b' * 1100}\r\n\r\n",
    "big_body": put("/api/v1/tags/big", '{"description":"' + "d" * 1100 + '"}'),
    "big_chunk": f"PUT /x HTTP/1.1\r\n{H}Transfer-Encoding: chunked\r\n\r\n401\r\n",
    # Garbage.
    "tls_hello": "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n",
    "no_colon": "GET / HTTP/1.1\r\nHost 127.0.0.1\r\n\r\n",
    "bad_chunk_size": f"PUT /x HTTP/1.1\r\n{H}Transfer-Encoding: chunked\r\n\r\nzz\r\n\r\n",
    "nul_in_target": "GET /api/v1/\0segment HTTP/1.1\r\n\r\n",
    "http2_preface": "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
    "obs_fold": f"PUT /x HTTP/1.1\r\n{H}Transfer-Encoding: chunked\r\n identity\r\n\r\n0\r\n\r\n",
}

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "http")
os.makedirs(out, exist_ok=True)
for name, text in SEEDS.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(text.encode("latin-1"))
print(f"{len(SEEDS)} seeds in {out}")
