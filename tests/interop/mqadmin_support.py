"""Comparing what RocketMQ's own ``mqadmin`` prints about a Java 4.9.8 broker and about ours, on the same traffic.

A test gets two :class:`Side` s -- the Java broker and ours, each with the name server mqadmin is pointed at --
runs the same traffic against both (:func:`run_traffic`), runs one mqadmin command against each
(:meth:`Side.mqadmin`) and compares the two outputs through an explicit :class:`Mask` (:func:`assert_same`):
only what a mask names may differ, and a masked value must still have the form its rule gives, on both sides.

    java, ours = Side("java", java_namesrv, java_broker), Side("ours", our_namesrv, our_broker)
    run_traffic(rmq_java, "AdminTraffic.java", java, ours)
    mask = TIMES + addresses(java, ours)
    assert_same(java.mqadmin(rmq_java, "topicStatus", "-t", "T"), ours.mqadmin(rmq_java, "topicStatus", "-t", "T"),
                mask)

Masks: :data:`TIMES` (the two ways mqadmin prints a time), :data:`RATES` (rates of a sampling window),
:func:`addresses` (the sides' broker and name-server
addresses, also inside offset msgIds), :data:`IDS` (32+ hex digits: msgIds, unique keys), :func:`value_of`
(the value of a ``key : value`` line, as ``brokerStatus`` prints, checked against a pattern) and
:func:`column` (a value in a table row).  Outputs are compared with runs of spaces made one (a masked value's
width is not the test's business).  :func:`answers` tells whether a server answers a request code at all, for
a test that needs a request another part of the project provides (it skips, naming the request, until it is
there).  One Java broker per test module, one traffic program per side and :func:`mqadmin_batch` (several mqadmin
commands in one JVM) keep JVM starts few.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Callable

from rmqstore.remoting import RemotingClient, RemotingCommand, ResponseCode

from broker_support import run_async

from .rmqjava import JavaDist, case_lines

__all__ = ["Side", "Mask", "MaskError", "TIMES", "RATES", "IDS", "addresses", "value_of", "column", "assert_same",
           "normalize", "run_traffic", "answers", "mqadmin_batch", "on_both"]


@dataclass(frozen=True)
class Side:
    """One broker under test, as mqadmin reaches it: a name (``java``, ``ours``), the name server (``-n``) and the
    broker's address (``{broker}`` in a command's arguments)."""

    name: str
    namesrv: str
    broker: str

    def argv(self, *args: str) -> list[str]:
        """``ARGS -n namesrv``, ``{broker}`` in ``args`` replaced by the broker's address."""
        return [a.replace("{broker}", self.broker) for a in args] + ["-n", self.namesrv]

    def mqadmin(self, rmq_java: JavaDist, *args: str, timeout: float = 180) -> str:
        """What ``mqadmin ARGS -n namesrv`` prints (stdout; a non-zero exit fails the test)."""
        return rmq_java.mqadmin(*self.argv(*args), timeout=timeout).stdout


class MaskError(AssertionError):
    """A masked value does not have the form its rule says."""


Rule = tuple["re.Pattern[str]", Callable[["re.Match[str]"], str]]


class Mask:
    """Rules applied in order, each a pattern and what a match becomes; ``a + b`` applies a's, then b's."""

    def __init__(self, *rules: Rule):
        self.rules = rules

    def __add__(self, other: "Mask") -> "Mask":
        return Mask(*self.rules, *other.rules)

    def apply(self, text: str) -> str:
        for pattern, replace in self.rules:
            text = pattern.sub(replace, text)
        return text


def _literal(old: str, new: str) -> Rule:
    return re.compile(re.escape(old)), lambda m: new


def _offset_msgid_prefix(address: str) -> str:
    """The first 16 hex digits of an offset msgId of a broker at ``address`` (IPv4 and port)."""
    host, _, port = address.rpartition(":")
    return "".join(f"{int(p):02X}" for p in host.split(".")) + f"{int(port):08X}"


#: mqadmin's times: UtilAll.timeMillisToHumanString2 (with milliseconds) and formatDate yyyy-MM-dd HH:mm:ss
TIMES = Mask((re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(,\d{3})?"), lambda m: "<time>"))
#: a positive number with two decimals -- a rate column, "Consume TPS: 0.25": how many sampling rounds a minute's
#: window holds depends on where the broker's rounds fell, so only its being there is compared; 0.00 stays 0.00
RATES = Mask((re.compile(r"(?<![\d.])(?!0\.00(?!\d))\d+\.\d\d(?![\d.])"), lambda m: "<rate>"))
#: msgIds, unique keys and the like (32 or more upper-case hex digits)
IDS = Mask((re.compile(r"\b[0-9A-F]{32,}\b"), lambda m: "<id>"))


def addresses(*sides: Side) -> Mask:
    """Each side's broker and name-server address, and its broker address inside offset msgIds."""
    rules = []
    for side in sides:
        rules += [_literal(side.broker, "<broker>"), _literal(side.namesrv, "<namesrv>"),
                  (re.compile(_offset_msgid_prefix(side.broker) + r"[0-9A-F]{16}\b"), lambda m: "<msgId>")]
    return Mask(*rules)


def value_of(key: str, form: str, name: str | None = None) -> Mask:
    """The value of each ``key : value`` line whose key matches ``key`` (a pattern) becomes ``<name>``; it must
    match ``form`` (a pattern) in full, or :class:`MaskError`."""
    pattern = re.compile(rf"^(?P<key>{key})(?P<sep> *: )(?P<value>.*)$", re.M)
    form_re = re.compile(form)

    def replace(m: "re.Match[str]") -> str:
        if not form_re.fullmatch(m["value"]):
            raise MaskError(f"{m['key']} = {m['value']!r} is not of the form {form!r}")
        return f"{m['key']}{m['sep']}<{name or m['key']}>"
    return Mask((pattern, replace))


def column(row: str, index: int, form: str, name: str) -> Mask:
    """In the rows matching ``row`` (a pattern), the ``index``-th whitespace-separated value becomes ``<name>``;
    it must match ``form`` in full, or :class:`MaskError`."""
    if " " in name:
        raise ValueError(f"a column's placeholder is one word: {name!r}")
    pattern = re.compile(rf"^(?:{row}).*$", re.M)
    form_re = re.compile(form)

    def replace(m: "re.Match[str]") -> str:
        values = m[0].split()
        if len(values) <= index or not form_re.fullmatch(values[index]):
            raise MaskError(f"column {index} of {m[0]!r} is not of the form {form!r}")
        values[index] = f"<{name}>"
        return " ".join(values)
    return Mask((pattern, replace))


def normalize(text: str) -> str:
    """Runs of spaces made one, trailing spaces dropped."""
    return "\n".join(re.sub(r" +", " ", line).rstrip() for line in text.splitlines())


def assert_same(java: str, ours: str, mask: Mask, names: tuple[str, str] = ("java", "ours")) -> str:
    """The two outputs, masked and normalized, must be equal; returns the masked text.  ``names`` say what the
    two are, in the message (by default mqadmin's output about the Java broker and about ours)."""
    a, b = normalize(mask.apply(java)), normalize(mask.apply(ours))
    if a != b:
        diff = "\n".join(difflib.unified_diff(a.splitlines(), b.splitlines(), *names, lineterm=""))
        raise AssertionError(f"printed differently (masked):\n{diff}\n--- {names[0]}, raw\n{java}\n"
                             f"--- {names[1]}, raw\n{ours}")
    return a


def run_traffic(rmq_java: JavaDist, program: str, *sides: Side, timeout: float = 300) -> dict[str, str]:
    """Run a traffic program (tests/interop/java/) once per side with the side's name server as its argument;
    ``{side name: the rest of its CASE line}``."""
    out = {}
    for side in sides:
        lines = case_lines(rmq_java.run_java(program, side.namesrv, timeout=timeout))
        out[side.name] = lines[side.namesrv]
    return out


def mqadmin_batch(rmq_java: JavaDist, *commands: list[str], timeout: float = 600) -> list[str]:
    """What each mqadmin command printed (stdout and stderr), run one after the other in one JVM
    (``MqadminBatch.java``: MQAdminStartup.main0 per command, what bin/mqadmin runs)."""
    args: list[str] = []
    for command in commands:
        args += ([";"] if args else []) + list(command)
    out = rmq_java.run_java("MqadminBatch.java", *args, timeout=timeout)
    found = re.findall(r"^@@BEGIN (\d+)\n(.*?)\n^@@END \1$", out, re.M | re.S)
    assert [int(n) for n, _ in found] == list(range(len(commands))), out
    return [text for _, text in found]


def on_both(rmq_java: JavaDist, java: Side, ours: Side, *args: str) -> tuple[str, str]:
    """What ``mqadmin ARGS`` prints against each side, both run in one JVM (:func:`mqadmin_batch`)."""
    java_text, ours_text = mqadmin_batch(rmq_java, java.argv(*args), ours.argv(*args))
    return java_text, ours_text


def answers(address: str, code: int, timeout: float = 10) -> bool:
    """Whether the server at ``address`` answers request ``code`` with anything but REQUEST_CODE_NOT_SUPPORTED."""
    async def ask() -> int:
        host, _, port = address.rpartition(":")
        client = await RemotingClient().connect(host, int(port))
        try:
            return (await client.invoke(RemotingCommand(code, {}), timeout)).code
        finally:
            await client.close()
    return run_async(ask()) != ResponseCode.REQUEST_CODE_NOT_SUPPORTED
