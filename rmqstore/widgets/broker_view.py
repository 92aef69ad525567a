"""BrokerView: a running RocketMQ cluster, live -- brokers, queues and consumer lag -- linked down to the bytes.

What the RocketMQ Dashboard shows, in a notebook: ``BrokerView.connect("127.0.0.1:9876")`` asks the name server
for the cluster and every broker for its figures (:meth:`rmqstore.admin.AsyncAdmin.snapshot`: three rounds of
requests), and shows

* the brokers: role, version, messages put and got a second (from the broker's counters, between two snapshots)
  as sparklines over the view's history, the commitlog's min and max offset, disk use;
* the topics: per queue its min and max offset (what a consumer can read);
* the consumer groups: per queue the broker's offset, the group's committed offset and the lag between them, and
  each group's total lag over the history -- it rises while producers outrun a consumer and falls as it catches up.

It is Apache's admin protocol only, so it works the same against RocketMQ's Java brokers and ours.
``watch(interval)`` refreshes it from a background thread (:mod:`._live`), ``stop()`` ends that; every refresh
adds a sample to ``history`` (at most ``history_limit``), which the sparklines draw.

The whole state is in synced traits (plain lists and dicts; every 64-bit offset and timestamp a decimal string,
BigInt in JavaScript), so an exported page (:func:`rmqstore.widgets.to_html`) shows the last snapshot and the
history with no kernel.

From a queue to its bytes.  The view asks each broker once for its configuration (GET_BROKER_CONFIG); when the
broker runs on this machine (a loopback or local address) and its ``storePathRootDir`` is a store folder here, a
click on a queue, a consumer offset or a commitlog offset sends the kernel a custom message, and :meth:`open_store`
opens that store read-only in a :class:`~rmqstore.widgets.StoreInspector` (a fresh one each time: the broker keeps
writing) at the same place -- the queue's records from that queue offset, or the last records before that
commitlog offset -- shown in :attr:`inspector_area` (an ``ipywidgets.Output``; :meth:`panel` is the view with it
below).  In a static page the click says that a kernel is needed.
"""

from __future__ import annotations

import functools
import logging
import os
import socket
import time

import anywidget
import traitlets as t

from rmqstore.common.errors import AdminError
from rmqstore.files.store_paths import commitlog_dir

from ._assets import css, esm
from ._common import i64
from ._live import LiveView

__all__ = ["BrokerView", "view_state", "is_local_store", "HISTORY_LIMIT"]

log = logging.getLogger(__name__)

#: samples kept in ``history`` by default (two minutes at the default interval of one second)
HISTORY_LIMIT = 120


@functools.lru_cache(maxsize=1)
def _local_hosts() -> frozenset[str]:
    hosts = {"localhost", "::1"}
    try:
        name = socket.gethostname()
        hosts.add(name)
        hosts.update(str(info[4][0]) for info in socket.getaddrinfo(name, None))
    except OSError:
        pass
    return frozenset(hosts)


def is_local_store(address: str, root: str | None) -> bool:
    """Is the store of the broker at ``address`` (its ``storePathRootDir``: ``root``) readable here?  The broker's
    host is this machine (loopback, or one of its own names and addresses) and ``root`` holds a commitlog."""
    if not root:
        return False
    host = address.rsplit(":", 1)[0].strip("[]")
    if not (host.startswith("127.") or host in _local_hosts()):
        return False
    return os.path.isdir(commitlog_dir(root))


def _broker_rows(snapshot, roots: dict[str, str | None]) -> list[dict]:
    rows = []
    for b in snapshot.brokers:
        row = b.row()
        root = roots.get(b.address)
        row.update(commit_log_min_offset=i64(row["commit_log_min_offset"]) if b.runtime else None,
                   commit_log_max_offset=i64(row["commit_log_max_offset"]) if b.runtime else None,
                   store_root=root or "", local=is_local_store(b.address, root),
                   put_total=i64(b.runtime.msg_put_total_today_now) if b.runtime else None,
                   get_total=i64(b.runtime.msg_get_total_today_now) if b.runtime else None)
        rows.append(row)
    return rows


def view_state(snapshot, roots: dict[str, str | None] | None = None) -> dict:
    """What the view shows of a :class:`~rmqstore.admin.ClusterSnapshot`: ``brokers``, ``queues``, ``progress``
    rows (offsets as decimal strings), ``errors`` and ``taken_at``; ``roots``: each broker's store folder by
    address (from its configuration), to say which stores are on this machine."""
    queues = [{"topic": q.topic, "broker_name": q.broker_name, "queue_id": q.queue_id,
               "min_offset": i64(q.min_offset), "max_offset": i64(q.max_offset),
               "last_update_timestamp": i64(q.last_update_timestamp)} for q in snapshot.queues]
    progress = [{"group": q.group, "topic": q.topic, "broker_name": q.broker_name, "queue_id": q.queue_id,
                 "broker_offset": i64(q.broker_offset), "consumer_offset": i64(q.consumer_offset),
                 "lag": i64(q.lag), "last_timestamp": i64(q.last_timestamp)} for q in snapshot.progress]
    return {"taken_at": i64(snapshot.taken_at), "brokers": _broker_rows(snapshot, roots or {}), "queues": queues,
            "progress": progress, "errors": list(snapshot.errors)}


def _rate(total: str | None, before: str | None, seconds: float) -> float | None:
    """Messages a second between two readings of a counter (None: no earlier reading, or the counter went back:
    the broker restarted)."""
    if total is None or before is None or seconds <= 0 or int(total) < int(before):
        return None
    return round((int(total) - int(before)) / seconds, 2)


def _sample(state: dict, previous: dict | None) -> dict:
    """One point of the history: per broker address its put and get rates and the counters they come from, per
    group its total lag.  A rate is the change of the broker's message counters (``msgPutTotalTodayNow``,
    ``msgGetTotalTodayNow``) since the previous sample -- it moves at the view's pace, where the broker's own
    ``putTps`` is a 10-second average (and empty for a broker up less than 10 s); the first sample, and one after a
    restart, take the broker's figures.  A broker that did not answer this time has no rates in the sample but its
    error in ``down`` (its sparkline shows a gap's worth of zeros, and a reader of the history can tell why)."""
    lag: dict[str, int] = {}
    for q in state["progress"]:
        lag[q["group"]] = lag.get(q["group"], 0) + int(q["lag"])
    before = (previous or {}).get("totals", {})
    seconds = (int(state["taken_at"]) - int((previous or {}).get("t", 0))) / 1000.0
    tps, totals, down = {}, {}, {}
    for b in state["brokers"]:
        if b["put_tps"] is None:
            down[b["address"]] = b["error"] or "no figures"
            continue
        was = before.get(b["address"], [None, None])
        put, get = _rate(b["put_total"], was[0], seconds), _rate(b["get_total"], was[1], seconds)
        tps[b["address"]] = [b["put_tps"] if put is None else put, b["get_tps"] if get is None else get]
        totals[b["address"]] = [b["put_total"], b["get_total"]]
    return {"t": state["taken_at"], "tps": tps, "totals": totals, "down": down,
            "lag": {g: i64(v) for g, v in lag.items()}}


class BrokerView(LiveView, anywidget.AnyWidget):
    """A RocketMQ cluster live: brokers, queues, consumer lag (see :mod:`rmqstore.widgets.broker_view`)."""

    _esm = esm("broker_view.js")
    _css = css("broker_view.css")

    title = t.Unicode("").tag(sync=True)
    namesrv = t.Unicode("").tag(sync=True)
    taken_at = t.Unicode("0").tag(sync=True)
    brokers = t.List().tag(sync=True)
    queues = t.List().tag(sync=True)
    progress = t.List().tag(sync=True)
    errors = t.List().tag(sync=True)
    history = t.List().tag(sync=True)
    history_limit = t.Int(HISTORY_LIMIT).tag(sync=True)
    interval = t.Float(1.0).tag(sync=True)
    live = t.Bool(False).tag(sync=True)
    updates = t.Int(0).tag(sync=True)
    opened = t.Dict().tag(sync=True)  # the last click's answer: where, and what was found (or why not)

    inspector = None  # the StoreInspector a click opened last
    _area = None

    def __init__(self, admin=None, *, topics=None, groups=None, system: bool = False, owns_admin: bool = False,
                 **kwargs):
        super().__init__(**kwargs)
        self.admin = admin
        self._owns_admin = owns_admin
        self._query = (None if topics is None else list(topics), None if groups is None else list(groups), system)
        self._roots: dict[str, str | None] = {}
        self.on_msg(self._on_msg)

    # -- construction ----------------------------------------------------------------------------------------
    @classmethod
    def connect(cls, namesrv: str, *, topics=None, groups=None, system: bool = False, timeout: float = 5.0,
                title: str = "", history_limit: int = HISTORY_LIMIT) -> "BrokerView":
        """A view of the cluster whose name server is ``namesrv`` (``"host:port"``, several ``;``-separated),
        with its first snapshot.  ``topics``/``groups`` narrow what is shown (default: every user topic and
        every group with offsets; ``system`` adds the system topics)."""
        from rmqstore.admin import Admin

        admin = Admin(namesrv, timeout=timeout)
        try:
            view = cls(admin, topics=topics, groups=groups, system=system, owns_admin=True, namesrv=namesrv,
                       title=title or f"cluster at {namesrv}", history_limit=history_limit)
            view.refresh()
        except BaseException:
            admin.close()
            raise
        return view

    @classmethod
    def from_snapshot(cls, snapshot, *, roots: dict | None = None, title: str = "") -> "BrokerView":
        """A view of one :class:`~rmqstore.admin.ClusterSnapshot` (no admin: nothing to refresh)."""
        view = cls(title=title or "cluster")
        view._roots = dict(roots or {})
        view.show(snapshot)
        return view

    # -- snapshots -------------------------------------------------------------------------------------------
    def _store_roots(self, snapshot) -> dict[str, str | None]:
        """Each broker's ``storePathRootDir``, asked once per address (None when it would not say)."""
        for b in snapshot.brokers:
            if b.address in self._roots or b.runtime is None:
                continue
            try:
                self._roots[b.address] = self.admin.get_broker_config(b.address).store_path_root_dir
            except Exception as exc:  # noqa: BLE001 - a broker that will not tell only loses the link to its bytes
                log.debug("no configuration from %s: %s", b.address, exc)
                self._roots[b.address] = None
        return self._roots

    def show(self, snapshot) -> None:
        """Show ``snapshot`` and add it to the history."""
        state = view_state(snapshot, self._roots)
        previous = self.history[-1] if self.history else None
        history = (list(self.history) + [_sample(state, previous)])[-max(1, self.history_limit):]
        with self.hold_sync():
            self.brokers = state["brokers"]
            self.queues = state["queues"]
            self.progress = state["progress"]
            self.errors = state["errors"]
            self.taken_at = state["taken_at"]
            self.history = history
            self.updates = self.updates + 1

    def refresh(self) -> "BrokerView":
        """A new snapshot of the cluster (the name server and every broker asked again)."""
        if self.admin is None:
            raise ValueError("this view has no admin to ask: make it with BrokerView.connect(namesrv)")
        topics, groups, system = self._query
        try:
            snapshot = self.admin.snapshot(topics, groups=groups, system=system)
        except AdminError as exc:  # the name server is down or silent: said, the last snapshot kept
            self.errors = [f"snapshot failed: {exc}"]
            raise
        self._store_roots(snapshot)
        self.show(snapshot)
        return self

    # -- live ------------------------------------------------------------------------------------------------
    def watch(self, interval: float = 1.0) -> "BrokerView":
        """Refresh every ``interval`` seconds (at least 0.05) from a background thread until :meth:`stop`."""
        self.stop()
        self.interval = max(0.05, float(interval))
        self._start_live(self.refresh, self.interval, "BrokerView.watch")
        return self

    def close(self) -> None:
        super().close()  # stops watching first (LiveView)
        self._close_inspector()
        if self._owns_admin and self.admin is not None:
            self.admin.close()
            self._owns_admin = False

    # -- from a queue to its bytes ---------------------------------------------------------------------------
    @property
    def inspector_area(self):
        """An ``ipywidgets.Output`` where a click's :class:`StoreInspector` is shown (display it under the view)."""
        if self._area is None:
            import ipywidgets

            self._area = ipywidgets.Output()
        return self._area

    def panel(self):
        """The view with :attr:`inspector_area` below it, in a ``VBox``."""
        import ipywidgets

        return ipywidgets.VBox([self, self.inspector_area])

    def store_root(self, broker_name: str) -> str:
        """The store folder of ``broker_name``'s master, if it is on this machine (else a ValueError saying why)."""
        row = next((b for b in self.brokers if b["broker_name"] == broker_name and b["broker_id"] == 0), None)
        if row is None:
            raise ValueError(f"no master of {broker_name!r} in the last snapshot")
        if not row.get("local"):
            where = row.get("store_root") or "a folder it did not name"
            raise ValueError(f"the store of {broker_name} ({row['address']}, {where}) is not on this machine")
        return row["store_root"]

    def open_store(self, broker_name: str, topic: str | None = None, queue_id: int | None = None,
                   queue_offset: int | None = None, commit_log_offset: int | None = None, *, show: bool = True):
        """Open ``broker_name``'s store (read-only) in a :class:`StoreInspector` at a queue (from ``queue_offset``;
        default its first) or at the records just before ``commit_log_offset``; returns the inspector, also shown
        in :attr:`inspector_area` unless ``show`` is False (a cell that displays it itself)."""
        from .store_inspector import StoreInspector

        root = self.store_root(broker_name)
        self._close_inspector()
        inspector = StoreInspector.from_path(root, title=f"{broker_name}: {root}")
        self.inspector = inspector
        browser = inspector.browser
        if topic is not None and queue_id is not None:
            page = browser.queue_page(topic, int(queue_id), int(queue_offset or 0), inspector.page_size)
            page = dict(page, mode="queue", topic=topic, queue_id=int(queue_id))
        elif commit_log_offset is not None:
            page = dict(browser.page_before(int(commit_log_offset), inspector.page_size), mode="log")
        else:
            page = None
        if page is not None:
            with inspector.hold_sync():
                inspector.page = page
                if page["rows"]:
                    inspector.selected = page["rows"][0]["offset"]
        if show:
            self.inspector_area.clear_output()
            self.inspector_area.append_display_data(inspector)
        return inspector

    def _close_inspector(self) -> None:
        inspector, self.inspector = self.inspector, None
        if inspector is not None:
            inspector.close()

    def _on_msg(self, _widget, content, _buffers) -> None:
        if not isinstance(content, dict) or content.get("kind") != "open":
            return
        where = {k: content.get(k) for k in ("broker_name", "topic", "queue_id", "queue_offset", "commit_log_offset")}
        try:
            ints = {k: (int(v) if v not in (None, "") else None)
                    for k, v in where.items() if k in ("queue_id", "queue_offset", "commit_log_offset")}
            inspector = self.open_store(str(where["broker_name"]), where["topic"], **ints)
            rows = inspector.page.get("rows", [])
            answer = {"ok": True, "root": inspector.root,
                      "message": f"opened {inspector.root}: {len(rows)} record(s) from there"}
        except Exception as exc:  # noqa: BLE001 - the browser shows why it could not open
            log.debug("open failed", exc_info=True)
            answer = {"ok": False, "message": f"{type(exc).__name__}: {exc}"}
        self.opened = dict(where, **answer, at=i64(int(time.time() * 1000)))
        self.send(dict(self.opened, kind="opened", id=content.get("id")))
