#!/usr/bin/env python3
"""Reads a TensorBoard event file without TensorFlow: an independent check of
tessera::runlog::EventWriter (sw/include/tessera/tfevents.h, docs/training.md "Run folder").

Parses the TFRecord framing (uint64 length, masked CRC-32C of the length, data, masked CRC-32C
of the data, little-endian), checks both CRCs with its own CRC-32C, decodes the Event, Summary,
Summary.Value and HistogramProto protobufs of tensorflow/core/util/event.proto and summary.proto
and a GraphDef's NodeDefs (graph.proto, node_def.proto) with its own decoder, and prints one
`step,tag,value` line per scalar (value as %.9g). Standard library only. Exit status 1, with the
record's byte offset on stderr, when the file is damaged. The Python tests import it
(read_events, graph_nodes; records, fields and masked_crc32c for TFRecord files).

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


def decode_histogram(data):
    """HistogramProto: min 1, max 2, num 3, sum 4, sum_squares 5 (doubles), bucket_limit 6 and
    bucket 7 (repeated doubles, packed or not)."""
    h = {"bucket_limit": [], "bucket": []}
    names = {1: "min", 2: "max", 3: "num", 4: "sum", 5: "sum_squares"}
    for number, wire, value in fields(data):
        if number in names and wire == 1:
            h[names[number]] = struct.unpack("<d", value)[0]
        elif number in (6, 7):
            key = "bucket_limit" if number == 6 else "bucket"
            if wire == 2:
                h[key] += list(struct.unpack("<%dd" % (len(value) // 8), value))
            elif wire == 1:
                h[key].append(struct.unpack("<d", value)[0])
    return h


def decode_event(data):
    """Event: wall_time 1 (double), step 2 (int64), file_version 3 (string), graph_def 4
    (bytes), summary 5."""
    event = {"wall_time": 0.0, "step": 0, "file_version": None, "values": [], "histograms": {},
             "graph_def": None}
    for number, wire, value in fields(data):
        if number == 1 and wire == 1:
            event["wall_time"] = struct.unpack("<d", value)[0]
        elif number == 2 and wire == 0:
            event["step"] = value - (1 << 64) if value >= (1 << 63) else value
        elif number == 3 and wire == 2:
            event["file_version"] = value.decode("utf-8")
        elif number == 4 and wire == 2:
            event["graph_def"] = value
        elif number == 5 and wire == 2:
            # Summary: repeated Value value = 1; Value: tag 1 (string), simple_value 2 (float),
            # histo 5 (HistogramProto).
            for snum, swire, svalue in fields(value):
                if snum != 1 or swire != 2:
                    continue
                tag, simple, histo = "", None, None
                for vnum, vwire, vvalue in fields(svalue):
                    if vnum == 1 and vwire == 2:
                        tag = vvalue.decode("utf-8")
                    elif vnum == 2 and vwire == 5:
                        simple = struct.unpack("<f", vvalue)[0]
                    elif vnum == 5 and vwire == 2:
                        histo = decode_histogram(vvalue)
                if simple is not None:
                    event["values"].append((tag, simple))
                if histo is not None:
                    event["histograms"][tag] = histo
    return event


def graph_nodes(graph_def):
    """GraphDef: node 1 (NodeDef: name 1, op 2, input 3) -> [{name, op, input: [...]}]."""
    nodes = []
    for number, wire, value in fields(graph_def):
        if number != 1 or wire != 2:
            continue
        node = {"name": "", "op": "", "input": []}
        for nnum, nwire, nvalue in fields(value):
            if nnum == 1 and nwire == 2:
                node["name"] = nvalue.decode("utf-8")
            elif nnum == 2 and nwire == 2:
                node["op"] = nvalue.decode("utf-8")
            elif nnum == 3 and nwire == 2:
                node["input"].append(nvalue.decode("utf-8"))
        nodes.append(node)
    return nodes


def records(path):
    """Yields (byte offset, data) of every TFRecord in the file, both CRCs checked."""
    with open(path, "rb") as f:
        buf = f.read()
    pos, index = 0, 0
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
        yield pos, data
        pos += 16 + length
        index += 1


def read_events(path):
    events = []
    for index, (pos, data) in enumerate(records(path)):
        where = "%s: record %d at byte %d: " % (path, index, pos)
        try:
            event = decode_event(data)
        except Damaged as e:
            raise Damaged(where + str(e))
        if index == 0 and not (event["file_version"] or "").startswith("brain.Event:"):
            raise Damaged(where + "the first event has no file_version brain.Event:*")
        events.append(event)
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
