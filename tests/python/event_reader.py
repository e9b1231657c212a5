"""An event-file reader written from the TFRecord and protobuf specifications, independent of
Tessera's writer: record framing with masked CRC-32C (computed here bit by bit), then the Event,
Summary, HistogramProto and GraphDef messages decoded field by field."""
import struct


def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def records(path):
    data = open(path, "rb").read()
    at = 0
    while at < len(data):
        header = data[at:at + 12]
        assert len(header) == 12, f"{path}: offset {at}: truncated header"
        (length,) = struct.unpack("<Q", header[:8])
        (length_crc,) = struct.unpack("<I", header[8:])
        assert length_crc == masked(crc32c(header[:8])), f"{path}: offset {at}: length CRC"
        body = data[at + 12:at + 12 + length]
        (data_crc,) = struct.unpack("<I", data[at + 12 + length:at + 16 + length])
        assert data_crc == masked(crc32c(body)), f"{path}: offset {at}: data CRC"
        yield body
        at += 16 + length


def varint(buf, at):
    value = shift = 0
    while True:
        b = buf[at]
        at += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, at


def fields(buf):
    """(field number, wire type, value) of a message: ints, doubles/floats as raw bytes, bytes."""
    at = 0
    while at < len(buf):
        key, at = varint(buf, at)
        num, wire = key >> 3, key & 7
        if wire == 0:
            v, at = varint(buf, at)
        elif wire == 1:
            v, at = buf[at:at + 8], at + 8
        elif wire == 2:
            n, at = varint(buf, at)
            v, at = buf[at:at + n], at + n
        elif wire == 5:
            v, at = buf[at:at + 4], at + 4
        else:
            raise ValueError(f"wire type {wire}")
        yield num, wire, v


def f64(b):
    return struct.unpack("<d", b)[0]


def packed_doubles(b):
    return list(struct.unpack(f"<{len(b) // 8}d", b))


def events(path):
    """Each event as a dict: wall_time, step, file_version, graph_def (bytes), scalars
    {tag: value}, histograms {tag: {min, max, num, sum, sum_squares, bucket_limit, bucket}}."""
    out = []
    for rec in records(path):
        e = {"step": 0, "scalars": {}, "histograms": {}}
        for num, wire, v in fields(rec):
            if num == 1:
                e["wall_time"] = f64(v)
            elif num == 2:
                e["step"] = v
            elif num == 3:
                e["file_version"] = v.decode()
            elif num == 4:
                e["graph_def"] = v
            elif num == 5:
                for n2, _, value in fields(v):
                    if n2 != 1:
                        continue
                    tag, simple, histo = None, None, None
                    for n3, w3, x in fields(value):
                        if n3 == 1:
                            tag = x.decode()
                        elif n3 == 2:
                            simple = struct.unpack("<f", x)[0]
                        elif n3 == 5:
                            histo = {"bucket_limit": [], "bucket": []}
                            for n4, w4, y in fields(x):
                                name = {1: "min", 2: "max", 3: "num", 4: "sum",
                                        5: "sum_squares"}.get(n4)
                                if name:
                                    histo[name] = f64(y)
                                elif n4 in (6, 7):
                                    key = "bucket_limit" if n4 == 6 else "bucket"
                                    histo[key] += packed_doubles(y) if w4 == 2 else [f64(y)]
                    if simple is not None:
                        e["scalars"][tag] = simple
                    if histo is not None:
                        e["histograms"][tag] = histo
        out.append(e)
    return out


def graph_nodes(graph_def):
    """GraphDef -> [{name, op, input: [...]}]."""
    nodes = []
    for num, _, v in fields(graph_def):
        if num != 1:
            continue
        node = {"input": []}
        for n2, _, x in fields(v):
            if n2 == 1:
                node["name"] = x.decode()
            elif n2 == 2:
                node["op"] = x.decode()
            elif n2 == 3:
                node["input"].append(x.decode())
        nodes.append(node)
    return nodes
