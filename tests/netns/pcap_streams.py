#!/usr/bin/env python3
"""The TCP payloads of a pcap file, each connection's two directions reassembled in sequence
order (so that a secret split across segments is still found whole), written one after the
other to stdout. Reads the link types tcpdump -i any writes (LINUX_SLL, LINUX_SLL2) and
Ethernet; IPv4 and IPv6. Standard library only.

    pcap_streams.py CAPTURE.pcap > streams.bin
"""
import struct
import sys

HEADERS = {1: (14, 12), 113: (16, 14), 276: (20, 0)}  # link type: (header size, protocol at)


def packets(path):
    with open(path, "rb") as f:
        data = f.read()
    magic = struct.unpack("<I", data[:4])[0]
    endian = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
    linktype = struct.unpack(endian + "I", data[20:24])[0]
    size, proto_at = HEADERS[linktype]
    at = 24
    while at + 16 <= len(data):
        incl = struct.unpack(endian + "I", data[at + 8:at + 12])[0]
        frame = data[at + 16:at + 16 + incl]
        at += 16 + incl
        proto = struct.unpack(">H", frame[proto_at:proto_at + 2])[0]
        yield proto, frame[size:]


def segments(path):
    for proto, ip in packets(path):
        if proto == 0x0800 and len(ip) >= 20 and ip[9] == 6:
            start, src, dst = (ip[0] & 15) * 4, ip[12:16], ip[16:20]
            end = struct.unpack(">H", ip[2:4])[0]
        elif proto == 0x86DD and len(ip) >= 40 and ip[6] == 6:
            start, src, dst = 40, ip[8:24], ip[24:40]
            end = 40 + struct.unpack(">H", ip[4:6])[0]
        else:
            continue
        tcp = ip[start:end]
        if len(tcp) < 20:
            continue
        sport, dport, seq = struct.unpack(">HHI", tcp[:8])
        payload = tcp[(tcp[12] >> 4) * 4:]
        if payload:
            yield (src, sport, dst, dport), seq, payload


def main():
    flows = {}
    for key, seq, payload in segments(sys.argv[1]):
        flows.setdefault(key, {})[seq] = payload
    out = sys.stdout.buffer
    for parts in flows.values():
        stream = bytearray()
        first = min(parts)
        for seq in sorted(parts, key=lambda s: (s - first) % (1 << 32)):
            offset, payload = (seq - first) % (1 << 32), parts[seq]
            # A retransmission overlaps what is there: only its new bytes count; a segment
            # after a gap (not captured) is kept in order.
            stream += payload[max(0, len(stream) - offset):]
        out.write(bytes(stream) + b"\n--\n")


if __name__ == "__main__":
    main()
