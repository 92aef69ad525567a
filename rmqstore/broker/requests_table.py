"""Which requests the broker and the name server answer, read from their processor tables.

One place decides what a server answers: the ``RemotingServer.processors`` dictionary its parts
register into (``part.register(server)``).  This module builds a broker and a name server without
starting them (no store is opened, no socket bound), reads those dictionaries, and writes the
table README.md and bench/README.md show between their ``<!-- requests:begin -->`` and
``<!-- requests:end -->`` marks -- RocketMQ's request-code names, the number, and the class whose
method answers it.  ``tests/broker/test_requests_table.py`` checks both documents against it, so a
processor added or removed changes the documents in the same commit.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass

from ..remoting import RequestCode

__all__ = ["AnsweredRequest", "answered_requests", "requests_markdown", "BEGIN_MARK", "END_MARK",
           "replace_marked"]

BEGIN_MARK = "<!-- requests:begin -->"
END_MARK = "<!-- requests:end -->"


@dataclass(frozen=True)
class AnsweredRequest:
    code: int
    name: str  # RocketMQ's RequestCode name
    server: str  # "broker" or "name server"
    answered_by: str  # the class whose method is the processor


def _answered_by(processor) -> str:
    owner = getattr(processor, "__self__", None)
    if owner is not None:
        return type(owner).__name__
    return getattr(processor, "__qualname__", repr(processor)).split(".")[0]  # a closure: its class


def _rows(server: str, processors: dict) -> list[AnsweredRequest]:
    out = []
    for code, processor in processors.items():
        try:
            name = RequestCode(code).name
        except ValueError:
            name = f"code {code}"
        out.append(AnsweredRequest(int(code), name, server, _answered_by(processor)))
    return out


def answered_requests() -> list[AnsweredRequest]:
    """Every request code the broker (with ACL off, the default) and the name server (embedded or standalone:
    one class) answer, by number."""
    from .broker import Broker
    from .config import BrokerConfig
    from .namesrv import NameServer

    with tempfile.TemporaryDirectory() as root:  # the broker's constructor only names its store's files
        broker = Broker(root, BrokerConfig(broker_name="broker-a"))
        rows = _rows("broker", broker.server.processors)
    rows += _rows("name server", NameServer("127.0.0.1", 0).server.processors)
    return sorted(rows, key=lambda r: (r.server != "broker", r.code))


def requests_markdown() -> str:
    """The table the documents show: one row per request code, the broker's first."""
    lines = ["| server | request | code | answered by |", "|---|---|---:|---|"]
    lines += [f"| {r.server} | `{r.name}` | {r.code} | `{r.answered_by}` |" for r in answered_requests()]
    return "\n".join(lines) + "\n"


def replace_marked(text: str, table: str) -> str:
    """``text`` with what lies between the marks replaced by ``table`` (ValueError when a mark is missing)."""
    start, end = text.find(BEGIN_MARK), text.find(END_MARK)
    if start < 0 or end < start:
        raise ValueError(f"the document has no {BEGIN_MARK} ... {END_MARK} section")
    return text[:start + len(BEGIN_MARK)] + "\n" + table + text[end:]
