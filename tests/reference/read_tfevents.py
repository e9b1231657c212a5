#!/usr/bin/env python3
"""Reads a TensorBoard event file without TensorFlow: an independent check of
tessera::runlog::EventWriter (sw/include/tessera/tfevents.h, docs/training.md "Run folder").

Parses the TFRecord framing (uint64 length, masked CRC-32C of the length, data, masked CRC-32C
of the data, little-endian), checks both CRCs with its own CRC-32C, decodes the Event, Summary
and Summary.Value protobufs of tensorflow/core/util/event.proto and summary.proto with its own
decoder, and prints one `step,tag,value` line per scalar (value as %.9g). Standard library only.
Exit status 1, with the record's byte offset on stderr, when the file is damaged.

usage: read_tfevents.py FILE [--wall-time]   (--wall-time adds a fourth column)
"""
import struct
import sys


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc = _TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data):
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


class Damaged(Exception):
    pass


def varint(buf, pos):
    value = 0
    for shift in range(0, 70, 7):
        if pos >= len(buf):
            raise Damaged("varint runs past the end")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
    raise Damaged("varint longer than 10 bytes")


def fields(buf):
    """Yields (field number, wire type, value) of one protobuf message."""
    pos = 0
    while pos < len(buf):
        key, pos = varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = varint(buf, pos)
        elif wire == 1:
            if pos + 8 > len(buf):
                raise Damaged("fixed64 runs past the end")
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 5:
            if pos + 4 > len(buf):
                raise Damaged("fixed32 runs past the end")
            value, pos = buf[pos:pos + 4], pos + 4
        elif wire == 2:
            n, pos = varint(buf, pos)
            if pos + n > len(buf):
                raise Damaged("length-delimited field runs past the end")
            value, pos = buf[pos:pos + n], pos + n
        else:
            raise Damaged("unsupported wire type %d" % wire)
        yield number, wire, value


def decode_event(data):
    """Event: wall_time 1 (double), step 2 (int64), file_version 3 (string), summary 5."""
    event = {"wall_time": 0.0, "step": 0, "file_version": None, "values": []}
    for number, wire, value in fields(data):
        if number == 1 and wire == 1:
            event["wall_time"] = struct.unpack("<d", value)[0]
        elif number == 2 and wire == 0:
            event["step"] = value - (1 << 64) if value >= (1 << 63) else value
        elif number == 3 and wire == 2:
            event["file_version"] = value.decode("utf-8")
        elif number == 5 and wire == 2:
            # Summary: repeated Value value = 1; Value: tag 1 (string), simple_value 2 (float).
            for snum, swire, svalue in fields(value):
                if snum != 1 or swire != 2:
                    continue
                tag, simple = "", None
                for vnum, vwire, vvalue in fields(svalue):
                    if vnum == 1 and vwire == 2:
                        tag = vvalue.decode("utf-8")
                    elif vnum == 2 and vwire == 5:
                        simple = struct.unpack("<f", vvalue)[0]
                if simple is not None:
                    event["values"].append((tag, simple))
    return event


def read_events(path):
    with open(path, "rb") as f:
        buf = f.read()
    pos, index, events = 0, 0, []
    while pos < len(buf):
        where = "%s: record %d at byte %d: " % (path, index, pos)
        if len(buf) - pos < 12:
            raise Damaged(where + "truncated header")
        header = buf[pos:pos + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", buf[pos + 8:pos + 12])
        if length_crc != masked_crc32c(header):
            raise Damaged(where + "length CRC mismatch")
        if pos + 12 + length + 4 > len(buf):
            raise Damaged(where + "truncated: the record's data runs past the end")
        data = buf[pos + 12:pos + 12 + length]
        (data_crc,) = struct.unpack("<I", buf[pos + 12 + length:pos + 16 + length])
        if data_crc != masked_crc32c(data):
            raise Damaged(where + "data CRC mismatch")
        try:
            event = decode_event(data)
        except Damaged as e:
            raise Damaged(where + str(e))
        if index == 0 and not (event["file_version"] or "").startswith("brain.Event:"):
            raise Damaged(where + "the first event has no file_version brain.Event:*")
        events.append(event)
        pos += 16 + length
        index += 1
    return events


def main(argv):
    if len(argv) < 2 or argv[1].startswith("-"):
        sys.stderr.write(__doc__)
        return 2
    try:
        events = read_events(argv[1])
    except (Damaged, OSError, UnicodeDecodeError) as e:
        sys.stderr.write("read_tfevents.py: %s\n" % e)
        return 1
    wall = "--wall-time" in argv[2:]
    for event in events:
        for tag, value in event["values"]:
            line = "%d,%s,%.9g" % (event["step"], tag, value)
            if wall:
                line += ",%.17g" % event["wall_time"]
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
