"""JSON as RocketMQ's fastjson writes it, and its config files written safely.

fastjson writes a map with integer keys with the keys *unquoted* -- ``{0:"127.0.0.1:10911"}``
in a route, ``{"T@g":{0:250,1:250}}`` in ``consumerOffset.json`` -- and a map whose keys are
objects with the objects as keys (``Map<MessageQueue, Long>``:
``{{"brokerName":"b","queueId":0,"topic":"T"}:5}``; a key with a ``to_json()`` is written so).
That is not strict JSON, but it is what every RocketMQ client and broker reads, so :func:`dumps`
writes it and :func:`loads` reads the integer keys in both forms.

:func:`write_config_file` follows RocketMQ's ``MixAll.string2File``: the new text goes to
``<file>.tmp`` first, the old file's text is kept as ``<file>.bak``, then the temporary
file replaces the file (one rename: a crash leaves the old or the new, never half).
:func:`read_config_file` falls back to the ``.bak`` when the file is missing, empty or
does not parse (``ConfigManager.load``/``loadBak``).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time

log = logging.getLogger(__name__)

__all__ = ["dumps", "loads", "write_config_file", "read_config_file", "ConfigTable"]


def _key(k) -> str:
    if hasattr(k, "to_json"):  # an object as map key (a MessageQueue): fastjson writes the object itself
        return _dump(k.to_json(), False, 0)
    if isinstance(k, bool) or not isinstance(k, int):
        return json.dumps(str(k), ensure_ascii=False)
    return str(k)


def _dump(obj, pretty: bool, indent: int) -> str:
    if isinstance(obj, dict):
        if not obj:
            return "{}"
        flat = not pretty or all(isinstance(k, int) for k in obj)
        items = [f"{_key(k)}:{_dump(v, pretty and not flat, indent + 1)}" for k, v in obj.items()]
        if flat:
            return "{" + ",".join(items) + "}"
        pad = "\t" * (indent + 1)
        return "{\n" + ",\n".join(pad + i for i in items) + "\n" + "\t" * indent + "}"
    if isinstance(obj, (list, tuple)):
        return "[" + ",".join(_dump(v, pretty, indent) for v in obj) + "]"
    return json.dumps(obj, ensure_ascii=False)


def dumps(obj, pretty: bool = False) -> str:
    """fastjson's text of ``obj`` (integer map keys unquoted; tabs when ``pretty``)."""
    return _dump(obj, pretty, 0)


def _quote_numeric_keys(text: str) -> str:
    out, i, n = [], 0, len(text)
    expect_key = False
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
            expect_key = False
            continue
        if c in "{,":
            expect_key = True
        elif expect_key and (c.isdigit() or c == "-"):
            j = i + 1
            while j < n and text[j].isdigit():
                j += 1
            k = j
            while k < n and text[k] in " \t\r\n":
                k += 1
            if k < n and text[k] == ":":
                out.append('"' + text[i:j] + '"')
                i = j
                expect_key = False
                continue
            expect_key = False
        elif not c.isspace():
            expect_key = False
        out.append(c)
        i += 1
    return "".join(out)


def loads(text: str):
    """Parse fastjson's text; object keys that were unquoted integers stay strings."""
    return json.loads(_quote_numeric_keys(text))


def write_config_file(path: str, text: str) -> None:
    """Write ``text`` to ``path`` atomically, the previous content kept in ``path.bak``."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    if os.path.exists(path):
        with open(path, "rb") as old, open(path + ".bak", "wb") as bak:
            bak.write(old.read())
    os.replace(tmp, path)


def read_config_file(path: str):
    """The parsed content of ``path`` (or of ``path.bak``), or None when neither is usable."""
    for candidate in (path, path + ".bak"):
        try:
            with open(candidate, encoding="utf-8") as f:
                text = f.read()
        except FileNotFoundError:
            continue
        if not text.strip():
            continue
        try:
            return loads(text)
        except ValueError:
            continue
    return None


class ConfigTable:
    """A broker table kept in one config file with a ``dataVersion`` (RocketMQ's ``ConfigManager``).

    Subclasses name the file's table key and turn one entry's JSON into an object with a
    ``to_json()``; loading skips (and logs) entries that do not parse.
    """

    table_key = ""

    def __init__(self, path: str):
        self.path = path
        self.table: dict = {}
        self.data_version = {"counter": 0, "timestamp": int(time.time() * 1000)}
        self._lock = threading.Lock()

    def entry_from_json(self, name: str, d: dict):
        raise NotImplementedError

    def load(self) -> None:
        data = read_config_file(self.path)
        if not isinstance(data, dict):
            return
        for name, d in (data.get(self.table_key) or {}).items():
            try:
                self.table[str(name)] = self.entry_from_json(str(name), d)
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                log.warning("%s: skipping %r: %s", self.path, name, exc)
        if isinstance(data.get("dataVersion"), dict):
            self.data_version = data["dataVersion"]

    def encode(self, pretty: bool = False) -> str:
        """The file's text (``ConfigManager.encode``): what is persisted (pretty) and what an admin asks for."""
        with self._lock:
            return dumps({"dataVersion": self.data_version,
                          self.table_key: {k: v.to_json() for k, v in sorted(self.table.items())}}, pretty=pretty)

    def persist(self) -> None:
        write_config_file(self.path, self.encode(pretty=True))

    def changed(self) -> None:
        """Count a change (``dataVersion.nextVersion``) and write the file."""
        self.data_version = {"counter": int(self.data_version.get("counter", 0)) + 1,
                             "timestamp": int(time.time() * 1000)}
        self.persist()
