"""The remoting layer: frame codecs, the fuzz property, opaque matching, errors and limits."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import socket
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker_support import run_async
from rmqstore.broker.headers import HeaderError
from rmqstore.remoting import (MAX_FRAME_LENGTH, FrameDecoder, Limits, RemotingClient, RemotingCommand,
                               RemotingFrameError, RemotingServer, ResponseCode, SerializeType, encode_frame,
                               frame_field_spans)

pytestmark = pytest.mark.timeout(60)

_text = st.text(max_size=20)
commands = st.builds(
    RemotingCommand,
    code=st.integers(-2**15, 2**15 - 1),
    ext_fields=st.dictionaries(_text, _text, max_size=5),
    body=st.binary(max_size=64),
    remark=st.none() | st.text(min_size=1, max_size=20),
    opaque=st.integers(0, 2**31 - 1),
    flag=st.integers(0, 3),
    language=st.sampled_from(["JAVA", "CPP", "GO", "PYTHON"]),
    version=st.integers(0, 2**15 - 1),
    serialize_type=st.sampled_from([SerializeType.JSON, SerializeType.ROCKETMQ]))


@given(commands)
def test_frames_round_trip_in_both_header_codecs(cmd):
    frame = encode_frame(cmd)
    (back,) = FrameDecoder().feed(frame)
    assert back == cmd
    spans = frame_field_spans(frame)
    assert [s[0] for s in spans] == ["length", "header_meta", "header", "body"]
    assert spans[-1][2] == len(frame) and frame[spans[-1][1]:] == cmd.body


@given(commands, st.lists(st.integers(1, 7), min_size=1, max_size=40))
def test_a_frame_cut_anywhere_is_reassembled(cmd, cuts):
    frame = encode_frame(cmd) * 2
    decoder, out, pos = FrameDecoder(), [], 0
    for n in cuts * 20:
        out += decoder.feed(frame[pos:pos + n])
        pos += n
    out += decoder.feed(frame[pos:])
    assert out == [cmd, cmd] and decoder.buffered == 0


@settings(max_examples=300)
@given(st.binary(max_size=300) | st.builds(lambda c, i, b: encode_frame(c)[:i] + b + encode_frame(c)[i + len(b):],
                                           commands, st.integers(0, 60), st.binary(min_size=1, max_size=8)))
def test_fuzz_only_our_error_escapes_the_decoder(data):
    try:
        FrameDecoder().feed(data)
    except RemotingFrameError:
        pass


def test_ext_field_values_arrive_as_strings_whatever_their_json_type():
    head = json.dumps({"code": 10, "opaque": 7, "flag": 0, "extFields": {"queueId": 3, "batch": True,
                                                                            "x": None, "t": "s"}}).encode()
    frame = struct.pack(">ii", 4 + len(head), len(head)) + head
    (cmd,) = FrameDecoder().feed(frame)
    assert cmd.ext_fields == {"queueId": "3", "batch": "true", "t": "s"} and cmd.opaque == 7


def test_an_absurd_length_is_refused_before_anything_is_buffered():
    decoder = FrameDecoder()
    with pytest.raises(RemotingFrameError, match="exceeds"):
        decoder.feed(struct.pack(">i", MAX_FRAME_LENGTH) + b"\0\0\0\0")
    with pytest.raises(RemotingFrameError, match="smaller"):
        FrameDecoder().feed(struct.pack(">i", -5))
    with pytest.raises(RemotingFrameError):
        encode_frame(RemotingCommand(10, body=b"x" * MAX_FRAME_LENGTH))


def test_frames_cut_before_bad_bytes_come_back_with_the_error():
    good = [RemotingCommand(1000, {"n": "1"}, opaque=1), RemotingCommand(1000, {"n": "2"}, b"body", opaque=2)]
    frames = b"".join(encode_frame(c) for c in good)
    with pytest.raises(RemotingFrameError, match="smaller") as bad_length:
        FrameDecoder().feed(frames + struct.pack(">i", -1))
    assert bad_length.value.commands == good
    head = b"{not json!"
    with pytest.raises(RemotingFrameError, match="does not parse") as bad_header:
        FrameDecoder().feed(frames + struct.pack(">ii", 4 + len(head), len(head)) + head)
    assert bad_header.value.commands == good
    decoder = FrameDecoder()  # a frame completed by the chunk that brings the garbage is handed back too
    assert decoder.feed(frames[:30]) == []
    with pytest.raises(RemotingFrameError) as split:
        decoder.feed(frames[30:] + struct.pack(">i", 2**31 - 1))
    assert split.value.commands == good
    with pytest.raises(RemotingFrameError) as nothing_before:
        FrameDecoder().feed(struct.pack(">i", -1))
    assert nothing_before.value.commands == []


# -- server and client ---------------------------------------------------------------------

def _run(coro):
    return run_async(coro, 30)


async def _server(limits=None) -> RemotingServer:
    server = RemotingServer("127.0.0.1", 0, limits)

    async def slow(conn, req):
        await asyncio.sleep(float(req.ext_fields.get("sleep", "0")))
        return req.response(ResponseCode.SUCCESS, ext_fields={"echo": req.ext_fields.get("n")})

    def boom(conn, req):
        raise ValueError("processor failed on purpose")

    async def ask_back(conn, req):  # the server asks the client something over the same connection
        answer = await conn.invoke(RemotingCommand(39, {"q": "state?"}))
        return req.response(ResponseCode.SUCCESS, ext_fields={"client_said": answer.ext_fields["a"]})

    server.register(1000, slow)
    server.register(1001, boom)
    server.register(1002, ask_back)
    server.oneways = []
    server.register(1003, lambda conn, req: server.oneways.append(req.ext_fields["n"]) or req.response(0))
    await server.start()
    return server


def test_responses_match_requests_by_opaque_not_by_order():
    async def main():
        server = await _server()
        client = await RemotingClient().connect("127.0.0.1", server.port)
        try:
            slow = asyncio.ensure_future(client.invoke(RemotingCommand(1000, {"sleep": "0.3", "n": "slow"})))
            await asyncio.sleep(0.05)
            fast = await client.invoke(RemotingCommand(1000, {"n": "fast"}))
            assert fast.ext_fields["echo"] == "fast" and not slow.done()
            assert (await slow).ext_fields["echo"] == "slow"
        finally:
            await client.close()
            await server.stop()
    _run(main())


def test_unknown_codes_and_failing_processors_get_error_responses_and_the_connection_lives():
    async def main():
        server = await _server()
        client = await RemotingClient().connect("127.0.0.1", server.port)
        try:
            r = await client.invoke(RemotingCommand(999))
            assert r.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED and r.remark == " request type 999 not supported"
            r = await client.invoke(RemotingCommand(1001), serialize_type=SerializeType.ROCKETMQ)
            assert r.code == ResponseCode.SYSTEM_ERROR and "processor failed on purpose" in r.remark
            assert r.serialize_type == SerializeType.ROCKETMQ  # the reply in the request's serialize type
            assert (await client.invoke(RemotingCommand(1000, {"n": "1"}))).ext_fields["echo"] == "1"
        finally:
            await client.close()
            await server.stop()
    _run(main())


def test_oneway_gets_no_response_and_the_server_can_ask_the_client():
    async def main():
        server = await _server()
        client = RemotingClient({39: lambda conn, req: req.response(0, ext_fields={"a": "COMMIT"})})
        await client.connect("127.0.0.1", server.port)
        try:
            await client.invoke_oneway(RemotingCommand(1003, {"n": "x"}))
            r = await client.invoke(RemotingCommand(1002))
            assert r.ext_fields["client_said"] == "COMMIT"
            assert server.oneways == ["x"] and not client.connection.pending
        finally:
            await client.close()
            await server.stop()
    _run(main())


def test_answers_ready_at_once_run_in_the_reader_and_leave_one_write_per_read():
    """A processor that answers at once (no awaitable) runs in the connection's own reader, no task per request,
    and the answers to the requests of one read leave in one write (issue 23: the Java client's threads share one
    connection, so a read often holds several sends)."""
    async def main():
        server = await _server()
        ran_in = []
        server.register(1004, lambda conn, req: ran_in.append(asyncio.current_task()) or req.response(
            ResponseCode.SUCCESS, ext_fields={"echo": req.ext_fields["n"]}))
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(encode_frame(RemotingCommand(1004, {"n": "first"}, opaque=1)))
            assert FrameDecoder().feed(await reader.read(65536))[0].ext_fields["echo"] == "first"
            (conn,) = server.connections
            writes = []
            write = conn.writer.write
            conn.writer.write = lambda data: writes.append(len(data)) or write(data)
            writer.write(b"".join(encode_frame(RemotingCommand(1004, {"n": str(i)}, opaque=100 + i))
                                  for i in range(20)))
            decoder, answers = FrameDecoder(), []
            while len(answers) < 20:
                answers += decoder.feed(await asyncio.wait_for(reader.read(65536), 10))
            assert sorted(a.opaque for a in answers) == list(range(100, 120))
            assert all(a.ext_fields["echo"] == str(a.opaque - 100) for a in answers)
            assert len(writes) < 20, f"{len(writes)} writes for 20 answers"
            assert len(set(ran_in)) == 1, "a task per request"
            writer.close()
        finally:
            await server.stop()
    _run(main())


def test_the_read_deadline_costs_no_timer_per_read():
    """The deadlines of a connection's reads (first frame, frame, idle) are kept by one watchdog timer, moved
    only when a deadline comes earlier -- not a timer (asyncio.timeout) or a task (wait_for) per read (issue 23:
    at one request in flight, every send is a read)."""
    async def main():
        server = await _server()
        server.register(1004, lambda conn, req: req.response(ResponseCode.SUCCESS))
        loop = asyncio.get_running_loop()
        timers = []
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            decoder = FrameDecoder()
            loop.call_at = lambda *a, _call_at=loop.call_at, **k: timers.append(a[0]) or _call_at(*a, **k)
            for i in range(20):
                writer.write(encode_frame(RemotingCommand(1004, opaque=i + 1)))
                (answer,) = decoder.feed(await reader.read(65536)) or [None]  # (the module timeout bounds it)
                assert answer is not None and answer.opaque == i + 1
            assert len(timers) <= 2, f"{len(timers)} timers for 20 reads"
            writer.close()
        finally:
            del loop.call_at
            await server.stop()
    _run(main())


async def _closed_by_server(reader: asyncio.StreamReader, within: float) -> bool:
    """True when the server closes (or resets) the connection within ``within`` seconds."""
    try:
        while await asyncio.wait_for(reader.read(65536), within):
            pass
        return True
    except ConnectionError:
        return True
    except asyncio.TimeoutError:
        return False


async def _until(condition, within: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not condition():
        assert loop.time() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


def test_at_the_cap_a_newcomer_evicts_a_silent_connection_then_the_longest_idle_and_idle_ones_close(caplog):
    caplog.set_level(logging.INFO, logger="rmqstore.remoting")

    async def main():
        server = await _server(Limits(max_connections=3, first_frame_timeout=60, idle_timeout=60))
        silent = [await asyncio.open_connection("127.0.0.1", server.port) for _ in range(2)]  # never send a frame
        await _until(lambda: len(server.connections) == 2)
        active = await RemotingClient().connect("127.0.0.1", server.port)
        clients = [active]
        try:
            assert (await active.invoke(RemotingCommand(1000, {"n": "a"}))).code == 0
            # at the cap: each newcomer is served; the silent connections go first, oldest first
            for n, gone in enumerate(silent):
                clients.append(await RemotingClient().connect("127.0.0.1", server.port))
                assert (await clients[-1].invoke(RemotingCommand(1000, {"n": str(n)}))).ext_fields["echo"] == str(n)
                assert await _closed_by_server(gone[0], 10)
                if n == 0:
                    assert not await _closed_by_server(silent[1][0], 0.3)  # the newer silent one stays
            # every connection has sent a frame: the longest idle one goes
            for busy in (active, clients[2]):  # clients[1] now idles longest
                assert (await busy.invoke(RemotingCommand(1000, {"n": "x"}))).code == 0
            clients.append(await RemotingClient().connect("127.0.0.1", server.port))
            assert (await clients[-1].invoke(RemotingCommand(1000, {"n": "new"}))).ext_fields["echo"] == "new"
            await asyncio.wait_for(clients[1].connection.closed.wait(), 10)
            assert not active.connection.closed.is_set() and len(server.connections) == 3
            assert (await active.invoke(RemotingCommand(1000, {"n": "a2"}))).ext_fields["echo"] == "a2"
        finally:
            for client in clients:
                await client.close()
            for _, writer in silent:
                writer.close()
            await server.stop()
        # an idle connection closes after idle_timeout
        server = await _server(Limits(idle_timeout=0.3))
        idle = await RemotingClient().connect("127.0.0.1", server.port)
        try:
            assert (await idle.invoke(RemotingCommand(1000, {"n": "1"}))).code == 0
            await asyncio.wait_for(idle.connection.closed.wait(), 10)
        finally:
            await idle.close()
            await server.stop()

    _run(main())
    evictions = [r for r in caplog.records if "evict" in r.getMessage()]
    assert len(evictions) == 3 and all(r.levelno == logging.INFO for r in evictions), evictions
    assert "never completed a frame" in evictions[0].getMessage()
    assert "idle for" in evictions[2].getMessage()


def test_a_connection_must_send_its_first_frame_soon_and_finish_each_frame_in_time():
    async def main():
        server = await _server(Limits(first_frame_timeout=0.5, frame_timeout=1.0, idle_timeout=60))
        frame = encode_frame(RemotingCommand(1000, {"n": "dribbled", "pad": "x" * 100}, opaque=5))
        try:
            silent_reader, silent = await asyncio.open_connection("127.0.0.1", server.port)
            assert await _closed_by_server(silent_reader, 10)  # no frame: closed long before idle_timeout
            silent.close()

            async def dribble(first: bytes) -> int:
                """Send ``first`` at once, then ``frame`` one byte per 0.1 s: the bytes sent before the close."""
                reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
                writer.write(first)
                if first:
                    (answer,) = FrameDecoder().feed(await asyncio.wait_for(reader.read(65536), 10))
                    assert answer.ext_fields["echo"] == "hello"
                sent = 0
                try:
                    for sent in range(len(frame)):
                        writer.write(frame[sent:sent + 1])
                        await writer.drain()
                        if await _closed_by_server(reader, 0.1):
                            return sent + 1
                    return len(frame)
                except ConnectionError:
                    return sent
                finally:
                    writer.close()

            # a first frame dribbled byte by byte is cut off by the first-frame deadline; a later frame by the
            # frame deadline, counted from its first byte although every byte comes well within idle_timeout
            assert await dribble(b"") < len(frame)
            hello = encode_frame(RemotingCommand(1000, {"n": "hello"}, opaque=4))
            assert await dribble(hello) < len(frame)
            prompt = await RemotingClient().connect("127.0.0.1", server.port)  # sends at once: served
            assert (await prompt.invoke(RemotingCommand(1000, {"n": "p"}))).ext_fields["echo"] == "p"
            await prompt.close()
        finally:
            await server.stop()
        # a client's own connection has no first-frame deadline: the server may stay silent
        server = await _server()
        try:
            quiet = await RemotingClient(limits=Limits(first_frame_timeout=0.2)).connect("127.0.0.1", server.port)
            await asyncio.sleep(0.6)
            assert not quiet.connection.closed.is_set()
            assert (await quiet.invoke(RemotingCommand(1000, {"n": "q"}))).ext_fields["echo"] == "q"
            await quiet.close()
        finally:
            await server.stop()

    _run(main())


async def _hog(port: int, requests: list[RemotingCommand]) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A client that sends ``requests`` in one write and never reads (a small receive buffer: the server's
    answers pile up on the server's side, not in the kernel)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    reader, writer = await asyncio.open_connection(sock=sock)
    writer.write(b"".join(encode_frame(r) for r in requests))
    return reader, writer


def test_unsent_budget_stale_reports_start_no_episode_and_the_heaviest_stop_until_half(caplog):
    from rmqstore.remoting.budget import KEEPING_UP, UnsentBudget
    from rmqstore.remoting.throttle import LogThrottle

    kib = 1024
    assert KEEPING_UP == 64 * kib
    caplog.set_level(logging.INFO, logger="rmqstore.remoting")

    async def main():
        budget = UnsentBudget(1000 * kib, LogThrottle(logging.getLogger("rmqstore.remoting.test")), refresh_every=0.01)

        class Holder:
            def __init__(self, name, size):
                self.remote_addr_text, self.size = name, size

            def account_unsent(self):
                budget.account(self, self.size)
                return self.size

        a, b, light = Holder("a", 600 * kib), Holder("b", 0), Holder("light", 10 * kib)
        for h in (a, b, light):
            h.account_unsent()
        a.size = 0  # a's peer read it all, unreported: the account is stale, too high
        b.size = 500 * kib
        b.account_unsent()  # 1,110 KiB accounted, over; measured again 510: no episode
        assert budget.total == 510 * kib and budget.over_since is None
        await asyncio.sleep(0.02)
        a.size = 600 * kib
        a.account_unsent()  # 1,110 KiB really: over
        assert budget.over_since is not None and budget.peak == 1110 * kib
        assert not budget.may_read(a) and not budget.may_read(b) and budget.may_read(light)  # the heaviest stop
        waiting = asyncio.ensure_future(budget.wait_for_room(b, 10))
        await asyncio.sleep(0.01)
        b.size = 60 * kib  # b's peer reads: b may read again while the episode goes on (670 KiB > 500)
        await asyncio.wait_for(waiting, 5)
        assert budget.may_read(b) and not budget.may_read(a) and budget.over_since is not None
        a.size = 300 * kib  # measured by the episode's refresher: 370 KiB, below half the budget
        await _until(lambda: budget.over_since is None, 10)
        assert budget.may_read(a) and budget.total == 370 * kib
        budget.close()

    _run(main())
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2, lines  # once when it begins, once when it ends
    assert "over the 1024000-byte budget: not reading from the 2 holding more than 65536 bytes" in lines[0]
    assert "the most: a, 614400 bytes" in lines[0] and "below 512000" in lines[1]


def test_clients_that_never_read_cannot_hold_more_than_the_unsent_budget(caplog):
    caplog.set_level(logging.INFO, logger="rmqstore.remoting")
    mib, answer = 1 << 20, 256 * 1024
    budget, hogs, per_hog = 4 * mib, 4, 200
    limits = Limits(unsent_budget=budget, connection_unsent_high=mib, max_in_flight=64)
    frame = len(encode_frame(RemotingCommand(0, body=b"r" * answer, opaque=2**31 - 1, flag=1)))
    # the bound rmqstore.remoting.budget states: past the budget each connection can add one more answer, and
    # one holding no more than the 64 KiB of a peer that keeps up can get there first (the good client counts)
    bound = budget + (hogs + 1) * (64 * 1024 + frame)

    async def main():
        server = await _server(limits)
        big = b"r" * answer
        server.register(1005, lambda conn, req: req.response(ResponseCode.SUCCESS, body=big))
        peak = 0

        async def sample():  # what the transports really hold, measured apart from the server's own account
            nonlocal peak
            while True:
                peak = max(peak, sum(c.writer.transport.get_write_buffer_size() for c in server.connections))
                await asyncio.sleep(0.002)

        async def served(n: int) -> None:
            r = await good.invoke(RemotingCommand(1005 if n % 2 else 1000, {"n": str(n)}), timeout=10)
            assert r.code == ResponseCode.SUCCESS and len(r.body) == (answer if n % 2 else 0)

        sampler = asyncio.ensure_future(sample())
        good = await RemotingClient().connect("127.0.0.1", server.port)
        requests = [RemotingCommand(1005, opaque=n + 1) for n in range(per_hog)]
        flood = [await _hog(server.port, requests)]
        try:
            # one client that never reads is held by its own high-water mark, far below the budget
            await _until(lambda: server.unsent_bytes > limits.connection_unsent_high, 20)
            await asyncio.sleep(0.3)
            assert limits.connection_unsent_high < peak <= limits.connection_unsent_high + 2 * frame, peak
            assert server.budget.over_since is None
            # more of them pass the budget: the server stops reading from them, the client that reads is served
            flood += [await _hog(server.port, requests) for _ in range(hogs - 1)]
            for n in range(10):
                await served(n)
            await _until(lambda: server.budget.over_since is not None, 20)
            for n in range(10):
                await served(n)
                await asyncio.sleep(0.02)
            assert server.budget.over_since is not None  # the hogs still read nothing: still over
            assert budget < peak <= bound, (peak, bound)
            assert server.unsent_bytes <= server.budget.peak <= bound  # the server's own account, never below
            assert server.budget.peak >= peak  # the truth (it measures when it writes)
        finally:
            sampler.cancel()
            for _, writer in flood:
                writer.transport.abort()
            await good.close()
            await server.stop()

    _run(main())
    over = [r for r in caplog.records if "budget" in r.getMessage() and r.levelno >= logging.WARNING]
    assert len(over) == 1, [r.getMessage() for r in caplog.records]
    assert re.search(r"not reading from the [45] holding more than 65536 bytes", over[0].getMessage())


def test_a_client_that_takes_none_of_its_answers_is_closed_after_the_idle_timeout(caplog):
    caplog.set_level(logging.INFO, logger="rmqstore.remoting")

    async def main():
        server = await _server(Limits(idle_timeout=1.0, connection_unsent_high=256 * 1024))
        big = b"r" * (128 * 1024)
        server.register(1005, lambda conn, req: req.response(ResponseCode.SUCCESS, body=big))
        reader, writer = await _hog(server.port, [RemotingCommand(1005, opaque=n + 1) for n in range(200)])
        try:
            await _until(lambda: server.unsent_bytes > 256 * 1024, 20)  # stopped by its own high-water mark
            await _until(lambda: not server.connections, 20)  # then closed: it read nothing for idle_timeout
            assert server.unsent_bytes == 0
        finally:
            writer.transport.abort()
            await server.stop()

    _run(main())
    assert any(re.search(r"took none of \d+ unsent bytes for 1 s", r.getMessage()) for r in caplog.records)


def test_both_ends_of_a_connection_send_small_frames_at_once_tcp_nodelay():
    """Nagle's algorithm holds a small write back until the peer acknowledges the last one, and the peer
    delays its acknowledgement up to 40 ms: a response written while another is in flight waited that
    long (a real client saw one ~42 ms send per producer).  RocketMQ's server sets TCP_NODELAY on its
    channels; so do both ends of ours."""
    import socket

    async def main():
        server = await _server()
        client = await RemotingClient().connect("127.0.0.1", server.port)
        try:
            await client.invoke(RemotingCommand(1000, {"n": "1"}))
            ends = [c.writer.get_extra_info("socket") for c in server.connections] + \
                [client.connection.writer.get_extra_info("socket")]
            assert len(ends) == 2
            assert [s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) for s in ends] == [1, 1]
        finally:
            await client.close()
            await server.stop()
    _run(main())


def test_an_rpc_hook_sees_every_request_first_and_its_refusal_is_the_answer():
    async def main():
        server = await _server()
        seen = []

        def hook(conn, req):
            seen.append(req.code)
            if req.ext_fields.get("n") == "no":
                return req.response(ResponseCode.NO_PERMISSION, "refused by the hook")
            return None

        server.rpc_hooks.append(hook)
        server.oneways = []
        client = await RemotingClient().connect("127.0.0.1", server.port)
        try:
            r = await client.invoke(RemotingCommand(1003, {"n": "no"}))
            assert (r.code, r.remark) == (ResponseCode.NO_PERMISSION, "refused by the hook")
            assert server.oneways == []  # the processor never ran
            assert (await client.invoke(RemotingCommand(1003, {"n": "yes"}))).code == 0
            assert server.oneways == ["yes"] and seen == [1003, 1003]
            r = await client.invoke(RemotingCommand(999, {"n": "no"}))  # hooks run before the unknown-code answer
            assert r.code == ResponseCode.NO_PERMISSION
        finally:
            await client.close()
            await server.stop()
    _run(main())


async def _read_to_eof(reader: asyncio.StreamReader, timeout: float = 20) -> list[RemotingCommand]:
    """Every frame the server sends until it closes the connection."""
    return FrameDecoder().feed(await asyncio.wait_for(reader.read(), timeout))


def test_a_request_followed_by_garbage_in_the_same_write_is_answered_then_the_connection_closed():
    async def main():
        server = await _server()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            requests = [RemotingCommand(1000, {"n": "a"}, opaque=11),
                        RemotingCommand(1000, {"n": "b", "sleep": "0.2"}, opaque=12),  # still working at the garbage
                        RemotingCommand(1003, {"n": "c"}, opaque=13, flag=2)]  # oneway: no answer, but it runs
            writer.write(b"".join(encode_frame(r) for r in requests) + struct.pack(">i", -1) + b"garbage")
            answers = await _read_to_eof(reader)
            assert sorted((a.opaque, a.ext_fields.get("echo")) for a in answers) == [(11, "a"), (12, "b")]
            assert server.oneways == ["c"]
            writer.close()
        finally:
            await server.stop()
    _run(main())


def _remoting_lines(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name.startswith("rmqstore.remoting")]


def _suppressed(records: list[logging.LogRecord], what: str) -> int:
    """How many lines about ``what`` the log's summaries say were left out."""
    return sum(int(m.group(1)) for r in records
               for m in [re.search(r"(\d+) more lines? (?:like this|of this kind)", r.getMessage())]
               if m and what in r.getMessage())


def test_log_throttle_shows_the_first_lines_of_a_kind_per_window_then_counts_the_rest(caplog):
    from rmqstore.remoting.throttle import LogThrottle

    now = [100.0]
    logger = logging.getLogger("rmqstore.remoting.test_throttle")
    throttle = LogThrottle(logger, burst=2, window=10.0, clock=lambda: now[0])
    caplog.set_level(logging.INFO, logger=logger.name)
    shown = [throttle("bad", logging.WARNING, "bad %d", n) for n in range(5)]
    assert shown == [True, True, False, False, False]
    assert throttle("other", logging.INFO, "other kind")  # kinds are counted apart
    now[0] += 10.5
    assert throttle("other", logging.INFO, "the next window")  # the window is over: the summary comes first
    messages = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert messages == [(logging.WARNING, "bad 0"), (logging.WARNING, "bad 1"), (logging.INFO, "other kind"),
                        (logging.WARNING, "3 more lines of this kind (bad) left out in the last 10 s"),
                        (logging.INFO, "the next window")]
    throttle.flush()  # nothing left out of "other": no summary
    assert len(caplog.records) == 5
    with pytest.raises(ValueError):
        LogThrottle(logger, burst=0)


def test_bad_input_costs_a_bounded_number_of_log_lines_and_no_traceback(caplog):
    caplog.set_level(logging.INFO, logger="rmqstore.remoting")
    bad_requests, bad_connections = 2000, 60

    async def main():
        server = await _server()

        def needs_topic(conn, req):
            raise HeaderError("the custom field <topic> is null")

        server.register(1004, needs_topic)
        client = await RemotingClient().connect("127.0.0.1", server.port)
        try:
            answers = []
            for _ in range(bad_requests // 200):
                answers += await asyncio.gather(*(client.invoke(RemotingCommand(1004)) for _ in range(200)))
            for _ in range(bad_connections):  # each connection closed for a bad length
                reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
                writer.write(struct.pack(">i", -1))
                assert await _read_to_eof(reader) == []
                writer.close()
            assert (await client.invoke(RemotingCommand(1000, {"n": "still"}))).ext_fields["echo"] == "still"
            return answers
        finally:
            await client.close()
            await server.stop()

    answers = _run(main())
    # the answer is as before: SYSTEM_ERROR naming the missing field
    assert {(a.code, a.remark) for a in answers} == {
        (ResponseCode.SYSTEM_ERROR, "HeaderError: the custom field <topic> is null")}
    lines = _remoting_lines(caplog)
    assert not [r for r in lines if r.exc_info], "bad input is no bug of ours: no traceback"
    assert len(lines) <= 40, [r.getMessage() for r in lines]  # was one traceback per request
    header_lines = [r for r in lines if "<topic> is null" in r.getMessage()]
    closed_lines = [r for r in lines if "smaller than the 4-byte" in r.getMessage()]
    assert header_lines and closed_lines
    # nothing is hidden: the summaries count what they left out
    assert len(header_lines) + _suppressed(lines, "answered SYSTEM_ERROR") == bad_requests
    assert len(closed_lines) + _suppressed(lines, "closing") == bad_connections


def test_a_processor_bug_still_logs_its_traceback_rate_limited(caplog):
    caplog.set_level(logging.INFO, logger="rmqstore.remoting")

    async def main():
        server = await _server()
        client = await RemotingClient().connect("127.0.0.1", server.port)
        try:
            answers = await asyncio.gather(*(client.invoke(RemotingCommand(1001)) for _ in range(300)))
            assert {a.code for a in answers} == {ResponseCode.SYSTEM_ERROR}
            assert "processor failed on purpose" in answers[0].remark
        finally:
            await client.close()
            await server.stop()

    _run(main())
    lines = _remoting_lines(caplog)
    bugs = [r for r in lines if r.exc_info]
    assert bugs and all(r.levelno >= logging.ERROR and r.exc_info[0] is ValueError for r in bugs)
    assert "boom" in "".join(logging.Formatter().formatException(bugs[0].exc_info))  # the frame that raised
    assert len(lines) <= 20
    assert len(bugs) + _suppressed(lines, "failed") == 300


@settings(max_examples=25, deadline=None)
@given(st.lists(st.binary(min_size=1, max_size=200) | commands.map(lambda c: encode_frame(c)[:-1]),
                min_size=1, max_size=4))
def test_fuzz_the_server_survives_garbage_and_keeps_serving(chunks):
    async def main():
        server = await _server()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            for chunk in chunks:
                writer.write(chunk)
            await writer.drain()
            writer.close()
            client = await RemotingClient().connect("127.0.0.1", server.port)
            r = await client.invoke(RemotingCommand(1000, {"n": "alive"}))
            assert r.ext_fields["echo"] == "alive"
            await client.close()
        finally:
            await server.stop()
    _run(main())


def test_frame_recorder_keeps_the_last_request_frames_per_code_as_received():
    from rmqstore.remoting import FrameRecorder, decode_frame, header_field_spans

    async def main():
        server = await _server()
        assert server.frame_recorder is None  # off by default
        recorder = server.frame_recorder = FrameRecorder(per_code=2)
        client = await RemotingClient().connect("127.0.0.1", server.port)
        try:
            for n in range(3):
                await client.invoke(RemotingCommand(1000, {"n": str(n)}, b"body%d" % n),
                                    serialize_type=SerializeType.ROCKETMQ if n == 2 else SerializeType.JSON)
            await client.invoke(RemotingCommand(1002, {}))  # the server's own request and the client's answer
        finally:
            await client.close()
            await server.stop()
        return recorder

    recorder = _run(main())
    assert recorder.codes == [1000, 1002]  # the client's response to the server's request is not kept
    kept = recorder.frames(1000)
    assert [decode_frame(f[4:]).ext_fields["n"] for f in kept] == ["1", "2"] and recorder.last(1000) == kept[-1]
    assert all(struct.unpack(">i", f[:4])[0] == len(f) - 4 for f in kept)  # whole frames, length field included
    assert recorder.last(999) is None
    with pytest.raises(ValueError):
        FrameRecorder(per_code=0)
    # header spans: one per member, inside the header, in order
    for frame in kept:
        meta = struct.unpack(">i", frame[4:8])[0]
        spans = header_field_spans(meta >> 24, frame[8:8 + (meta & 0xFFFFFF)], 8)
        names = [n for n, *_ in spans]
        assert {"code", "opaque", "flag", "extFields", "extFields.n"} <= set(names)
        assert all(8 <= a < b <= 8 + (meta & 0xFFFFFF) for _, a, b, _ in spans)
    with pytest.raises(RemotingFrameError):
        header_field_spans(SerializeType.JSON, b'{"code": 1, "extFields": [}')
