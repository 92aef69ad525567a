"""The remoting frame codec, pure against compiled (issue 23): microseconds per frame.

    python bench/frame.py                  # 15 rounds, alternating the two paths
    python bench/frame.py --rounds 5 --quick

Cases, each timed on both paths in the same round (rmqstore.remoting.frame's pure_* functions against
rmqstore._native._cframe, the one a broker runs unless RMQSTORE_PURE is set), the median of the rounds:
* decode SEND_MESSAGE_V2        -- the bytes after the length field of a send as the Java 4.9.8 client writes it
                                   (its header as recorded in tests/fixtures/frames/java.frames -- a tag, a
                                   key, user properties -- and a 1 KiB body) into a RemotingCommand
* FrameDecoder.feed, one frame  -- the server's read path: the whole frame cut from a stream and decoded
* response() + encode_frame     -- the broker's answer to it as broker/send.py builds it (msgId, queueId,
                                   queueOffset, MSG_REGION, TRACE_ON) and its frame
* encode_frame of that answer   -- the frame alone
* decode binary header          -- the same send with a ROCKETMQ (binary) header
Prints a table and writes JSON (bench/results/frame.json by default).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from rmqstore.common import native  # noqa: E402
from rmqstore.remoting import frame  # noqa: E402
from rmqstore.remoting.codes import RequestCode, ResponseCode, SerializeType  # noqa: E402
from rmqstore.remoting.frame import FrameDecoder, RemotingCommand  # noqa: E402

RECORDED = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "frames", "java.frames")


BODY = bytes(range(256)) * 4


def send_frame() -> tuple[bytes, str]:
    """A whole SEND_MESSAGE_V2 frame (length field included) from the Java client, and where it came from."""
    if os.path.exists(RECORDED):
        with open(RECORDED, "rb") as f:
            stream, pos = f.read(), 0
        while pos < len(stream):
            length, meta = struct.unpack_from(">ii", stream, pos)
            header = stream[pos + 8:pos + 8 + (meta & 0xFFFFFF)]
            if frame.pure_decode_header(meta >> 24, header).code == RequestCode.SEND_MESSAGE_V2:
                return _frame(meta, header), "the Java client's header as recorded (tests/fixtures/frames/java.frames)"
            pos += 4 + length
    cmd = RemotingCommand(RequestCode.SEND_MESSAGE_V2, {
        "a": "JBENCH_PG", "b": "BenchT", "c": "TBW102", "d": "4", "e": "1", "f": "0", "g": "1795769365567",
        "h": "0", "i": "TAGS\x01TagA\x02KEYS\x01key-0-1\x02WAIT\x01true\x02", "j": "0", "k": "false", "m": "false"},
        b"", None, 1234, 0, "JAVA", 409)
    header = frame.pure_encode_header(cmd)  # fastjson's shape: members in name order, controls as \u00XX
    return _frame(len(header), header), "a header in fastjson's shape built here"


def _frame(meta: int, header: bytes) -> bytes:
    """The frame with that header and a 1 KiB body."""
    return struct.pack(">ii", 4 + len(header) + len(BODY), meta) + header + BODY


def per_call_us(fn, arg, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn(arg)
    return (time.perf_counter() - start) / n * 1e6


def cases(c) -> dict:
    """name -> (pure callable, compiled callable, argument)."""
    whole, _ = send_frame()
    data = whole[4:]
    request = frame.pure_decode_frame(data)
    ext = {"MSG_REGION": "DefaultRegion", "TRACE_ON": True, "msgId": "7F00000100002A9F00000000000A1B2C",
           "queueId": 1, "queueOffset": 123456}

    def respond(response, encode):
        return lambda req: encode(response(req, ResponseCode.SUCCESS, None, ext, b""))

    def feed(codec):
        def run(stream):
            decoder = FrameDecoder()
            decoder.codec = codec  # None: the pure path
            return decoder.feed(stream)
        return run

    answer = request.response(ResponseCode.SUCCESS, None, ext)
    binary = RemotingCommand(request.code, request.ext_fields, request.body, None, request.opaque, 0, "JAVA",
                             request.version, SerializeType.ROCKETMQ)
    binary_data = frame.pure_encode_frame(binary)[4:]
    return {
        "decode SEND_MESSAGE_V2": (frame.pure_decode_frame, c.decode_frame, data),
        "FrameDecoder.feed, one frame": (feed(None), feed(c), whole),
        "response() + encode_frame": (respond(frame.pure_response, frame.pure_encode_frame),
                                      respond(c.response, c.encode_frame), request),
        "encode_frame of that answer": (frame.pure_encode_frame, c.encode_frame, answer),
        "decode binary header": (frame.pure_decode_frame, c.decode_frame, binary_data),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=20000, help="calls per case, path and round")
    ap.add_argument("--quick", action="store_true", help="2,000 calls a round")
    ap.add_argument("--json", default=os.path.join(os.path.dirname(__file__), "results", "frame.json"))
    args = ap.parse_args()
    calls = 2000 if args.quick else args.calls
    c = frame.bind_compiled(native.compiled("_cframe"))
    if c is None:
        raise SystemExit(f"rmqstore._native._cframe is not built: {native.status()['_cframe']}")
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    table = cases(c)
    times: dict[str, dict[str, list[float]]] = {name: {"pure": [], "compiled": []} for name in table}
    for r in range(args.rounds):
        for name, (pure, compiled, arg) in table.items():
            order = [("pure", pure), ("compiled", compiled)]
            for path, fn in order if r % 2 == 0 else order[::-1]:  # alternate which goes first
                times[name][path].append(per_call_us(fn, arg, calls))
    load_after = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    rows = {}
    for name, t in times.items():
        pure, compiled = statistics.median(t["pure"]), statistics.median(t["compiled"])
        rows[name] = {"pure_us": round(pure, 3), "compiled_us": round(compiled, 3),
                      "speedup": round(pure / compiled, 2), "pure_min_us": round(min(t["pure"]), 3),
                      "compiled_min_us": round(min(t["compiled"]), 3), "rounds": t}
    print(f"frame codec, us per frame, median of {args.rounds} rounds x {calls} calls ({send_frame()[1]})")
    print(f"{'case':<32}{'pure':>10}{'compiled':>10}{'speedup':>9}{'fastest round':>22}")
    for name, row in rows.items():
        print(f"{name:<32}{row['pure_us']:>10.2f}{row['compiled_us']:>10.2f}{row['speedup']:>8.1f}x"
              f"{row['pure_min_us']:>12.2f} / {row['compiled_min_us']:.2f}")
    print(f"load before: {load}\nload after:  {load_after}")
    print(f"compiled counters: {c.counters()}")
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"when": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "python": sys.version.split()[0],
                   "rounds": args.rounds, "calls": calls, "frame": send_frame()[1], "load_before": load,
                   "load_after": load_after, "cases": rows}, f, indent=1)
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
