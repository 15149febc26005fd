#!/usr/bin/env python3
"""Reads kleaf's UUIDv7s and ULIDs with code that is not kleaf's (run by id128_e2e_test.cc).

UUIDs go through Python's standard `uuid` module (RFC 9562 / RFC 4122 parsing); ULIDs through the
Crockford base32 decoder below, written from the ULID specification. Checks, for each file of IDs
(one per line, in the order kleaf issued them): the text is canonical, version 7 and the RFC
variant (UUIDs), the 48-bit millisecond timestamp lies within --slack-ms of the window the test
requested them in, the IDs strictly increase (as 128-bit numbers and as text), and the worker id
sits where docs/architecture.md says (after the 12-bit counter, with the default layout).

usage: check_uuid7_ulid.py --uuid7 FILE --ulid FILE --from-ms T0 --to-ms T1 --worker W
Exit 0 when every check passes; 1 with the failures on stderr otherwise.
"""
import argparse
import sys
import uuid

CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def ulid_value(text):
    """The 128-bit integer of a ULID, or ValueError."""
    if len(text) != 26:
        raise ValueError("a ULID has 26 characters: %r" % text)
    value = 0
    for char in text:
        digit = CROCKFORD.find(char)
        if digit < 0:
            raise ValueError("not Crockford base32 (uppercase): %r" % text)
        value = value * 32 + digit
    if value >= 1 << 128:
        raise ValueError("more than 128 bits: %r" % text)
    return value


def uuid_value(text):
    """The 128-bit integer of a canonical UUIDv7, or ValueError."""
    parsed = uuid.UUID(text)
    if str(parsed) != text:
        raise ValueError("not canonical (lowercase 8-4-4-4-12): %r" % text)
    if parsed.version != 7:
        raise ValueError("version %s, not 7: %r" % (parsed.version, text))
    if parsed.variant != uuid.RFC_4122:  # RFC 9562 keeps RFC 4122's variant bits, 10
        raise ValueError("variant %s: %r" % (parsed.variant, text))
    return parsed.int


def check(name, lines, value_of, worker_shift, args, errors):
    previous = None
    for line in lines:
        try:
            value = value_of(line)
        except ValueError as error:
            errors.append("%s: %s" % (name, error))
            continue
        timestamp_ms = value >> 80
        if not args.from_ms - args.slack_ms <= timestamp_ms <= args.to_ms + args.slack_ms:
            errors.append("%s %s: timestamp %d outside [%d, %d] +- %d ms" %
                          (name, line, timestamp_ms, args.from_ms, args.to_ms, args.slack_ms))
        worker = (value >> worker_shift) & 0x3FF
        if worker != args.worker:
            errors.append("%s %s: worker id %d, expected %d" % (name, line, worker, args.worker))
        if previous is not None and not (previous[0] < value and previous[1] < line):
            errors.append("%s: %s does not follow %s" % (name, line, previous[1]))
        previous = (value, line)
    if not lines:
        errors.append("%s: no IDs" % name)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--uuid7", required=True)
    parser.add_argument("--ulid", required=True)
    parser.add_argument("--from-ms", type=int, required=True)
    parser.add_argument("--to-ms", type=int, required=True)
    parser.add_argument("--worker", type=int, required=True)
    parser.add_argument("--slack-ms", type=int, default=1000)
    args = parser.parse_args()
    errors = []
    with open(args.uuid7) as f:
        uuids = f.read().split()
    with open(args.ulid) as f:
        ulids = f.read().split()
    # UUIDv7: rand_b's top 10 bits (bits 61..52); ULID: the 10 bits after the 12-bit counter
    # (bits 67..58).
    check("uuid7", uuids, uuid_value, 52, args, errors)
    check("ulid", ulids, ulid_value, 58, args, errors)
    for error in errors[:20]:
        print(error, file=sys.stderr)
    print("checked %d UUIDv7s and %d ULIDs: %d problems" % (len(uuids), len(ulids), len(errors)))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
