"""Jupyter views of the store (anywidget). Imported as ``rmqstore.widgets``.

Views
-----
:class:`SegmentView`
    one bar per commitlog segment (optionally a topic's consume-queue files): wrote,
    committed and flushed positions with their values, the blank tail, file names.
    ``SegmentView.from_store(store)``; ``view.attach(store, interval_ms=200)`` follows a
    store live from a background thread (``detach()``/``close()`` stop it).
:class:`RecordView`
    one record's bytes as a hex/ASCII grid coloured by field (colours from
    ``rmqstore.format.layout.MESSAGE_FIELDS``), hover/click highlighting both ways, decoded values.
    ``RecordView.from_bytes(buf, offset=0)``, ``RecordView.from_store(store, physical_offset)``.
:class:`PutPathPlayer`
    step-through animation of a recorded put path.  ``PutPathPlayer.record(config_kwargs,
    messages)``, ``PutPathPlayer.from_events(events)``, ``PutPathPlayer.compare(...)`` (SYNC_FLUSH,
    ASYNC_FLUSH and the transient store pool side by side in an ``ipywidgets.HBox``).
:class:`StoreInspector`
    one view over a store directory: segments, topics/queues, a paged record browser that
    never reads the whole store, lookup by msgId, key or offset.
    ``StoreInspector.from_path(path)`` opens the store read-only without a full scan (the
    end of the log comes from the consume queues); ``StoreInspector.from_store(store)``
    inspects an open (even running) store.
:class:`ReplicationView`
    a master and its slave side by side (:mod:`rmqstore.engine.ha`): each commitlog's wrote,
    readable, flushed and dispatched offsets on one scale, per slave the requested, pushed
    and acknowledged offsets, the SYNC_MASTER waits (waiting now, answers per status, the
    last outcome and its wait), the slave's HA client.  ``ReplicationView.from_stores(master,
    slave)``; ``refresh()``; ``watch(interval)`` follows the pair live (``stop()``/``close()``).
:class:`FrameView`
    one remoting frame (what a client sends a broker) as the same coloured byte grid: length,
    serialize type and header length, the header member by member (``extFields.<key>`` per
    custom-header entry, SEND_MESSAGE_V2's ``a`` ... ``n`` named), the body.
    ``FrameView.from_bytes(frame)``; a broker keeps real frames with
    ``broker.server.frame_recorder = rmqstore.remoting.FrameRecorder()``.
:class:`BrokerView`
    a running RocketMQ cluster (Apache's brokers or ours) through the admin protocol: brokers
    (role, version, put/get TPS sparklines, commitlog offsets, disk), per queue min/max offsets,
    per group and queue the lag, each group's lag over the history.  ``BrokerView.connect(namesrv)``;
    ``refresh()``; ``watch(interval)``/``stop()``.  A click on a queue or an offset of a broker
    whose store is on this machine opens it there in a ``StoreInspector`` (``inspector_area``).
:func:`to_html`, :func:`export_notebook_html`
    standalone HTML with no kernel and no CDN: the views' own ESM and CSS inline, their
    state embedded, rendered by a small shim of anywidget's model API.

Every view keeps its whole state in synced traits (bulk bytes in ``Bytes`` traits, sent as
binary buffers), so it renders the same live and in a static page.  64-bit values
(physical offsets, queue offsets, timestamps) travel as decimal strings and are handled as
``BigInt`` in JavaScript; positions inside one file (< 2**31) are plain numbers.

DOM contract
------------
Browser tests rely on these attributes; they are kept exactly.

SegmentView
    root ``data-testid="segment-view"``; one element per bar ``data-testid="segment"`` with
    ``data-file`` (20-digit file name), ``data-wrote``, ``data-committed``, ``data-flushed``
    (plain decimal positions relative to the file start, as ``MappedFile`` holds them;
    without a write buffer RocketMQ leaves ``committed`` at 0), plus ``data-size``,
    ``data-blank`` (start of the blank tail; -1 none, -2 not computed), ``data-group``.
    Every bar is in the DOM up to 300 rows; above that only the rows scrolled into view
    (plus a margin) are -- scroll ``.rmq-seg-list`` to reach the others.
RecordView
    root ``data-testid="record-view"``; one hex cell per byte ``data-testid="byte"`` with
    ``data-field="<span name>"`` (a name of ``rmqstore.format.record.record_field_spans``: the
    ``MESSAGE_FIELDS`` names plus ``body_length``/``topic_length``/``properties_length``;
    for a blank record ``total_size``, ``magic_code``, ``blank_fill``), class ``hl`` while
    that field is highlighted (hover a byte or a row; click pins); decoded rows
    ``data-testid="field"`` with the same ``data-field`` names (one row per span, so the
    two sets are equal).  Also ``data-testid="record-kind"`` (``data-kind`` message/blank/
    corrupt), ``"record-offset"`` (``data-offset``), ``"msg-id"``, ``"crc-status"``
    (shown when the body CRC checks out; a bad CRC row has ``data-status="bad"``).
    Records above 8 KiB render only the visible grid lines.
FrameView
    root ``data-testid="frame-view"``; hex cells ``data-testid="byte"`` and decoded rows
    ``data-testid="field"`` with ``data-field`` = a name of ``frame_field_spans(frame,
    expand_header=True)`` (``length``, ``header_meta``, ``code`` ... ``extFields``,
    ``extFields.<key>``, ``body``; JSON punctuation ``""``), class ``hl`` as in RecordView;
    ``data-testid="record-kind"`` says ``frame: <code> <NAME>``.
PutPathPlayer
    root ``data-testid="put-path-player"``; buttons ``"play"``, ``"pause"``,
    ``"step-forward"``, ``"step-back"``; range input ``"scrub"`` (0 .. steps-1); select
    ``"speed"`` (steps per second: 0.5 1 2 4 8 16 32); text ``"step-index"`` (0-based
    current step), ``"stage"`` (the stage name, e.g. ``append.record``), ``"pos-wrote"``,
    ``"pos-committed"``, ``"pos-flushed"`` (plain decimal positions, relative to the file
    start, of the file the step is about -- or the last one written -- after the step;
    ``data-testid="positions"`` carries that file's name in ``data-file``).  Diagram boxes
    ``data-testid="stage-box"`` with ``data-box`` (class ``active`` on the current one).
StoreInspector
    root ``data-testid="store-inspector"``; the segments section is a SegmentView (same
    ``segment-view``/``segment`` elements; clicking a bar pages to that segment's start);
    record rows ``data-testid="record-row"`` (``data-offset``, ``data-kind`` message/blank/
    corrupt, ``data-msg-id``); lookup input ``data-testid="lookup"`` and button
    ``"lookup-go"`` (Enter works too; a msgId, a physical offset, ``key`` or ``topic#key``);
    ``data-testid="lookup-result"`` says what a lookup (or a page request) found or why not
    (``data-found``: number of records); paging buttons ``"page-first"``, ``"page-prev"``,
    ``"page-next"``, ``"page-last"`` and the label ``"page-label"``; topics table rows
    ``data-testid="queue-row"`` (``data-topic``, ``data-queue``; a click browses that queue,
    live only); the selected record is a RecordView (``record-view``, ``byte``, ``field``,
    ``record-offset`` ...).  ``data-testid="store-summary"`` is the one-line summary.  In a
    static page, paging and lookups answer from the embedded first pages.
ReplicationView
    root ``data-testid="replication-view"``; each store ``data-testid="ha-side"`` with
    ``data-side`` (``master``/``slave``), ``data-role``, ``data-running``; in it one
    ``data-testid="pos"`` per position with ``data-pos`` (``wrote``, ``max_offset``,
    ``flushed``, ``dispatched``) and ``data-value`` (exact decimal offset).  Per slave
    connection of the master ``data-testid="ha-connection"`` (``data-slave``,
    ``data-requested``, ``data-pushed``, ``data-acked``); ``data-testid="push2-slave-max"``
    (``data-value``); ``data-testid="replica-waits"`` (``data-waiting``,
    ``data-last-status``, ``data-last-waited-ms``, ``data-last-next-offset``); one
    ``data-testid="replica-outcome"`` per status (``data-status``, ``data-count``); the
    slave's client ``data-testid="ha-client"`` (``data-connected``, ``data-reported``,
    ``data-master``, ``data-connects``).
BrokerView
    root ``data-testid="broker-view"`` (``data-updates``, ``data-taken-at``); per broker
    ``data-testid="broker-row"`` (``data-broker-name``, ``data-broker-id``, ``data-address``,
    ``data-role``, ``data-version``, ``data-min-offset``, ``data-max-offset``, ``data-local``);
    sparklines ``data-testid="sparkline"`` (``data-series`` ``put:<address>``, ``get:<address>``,
    ``lag:<group>``; ``data-points``, ``data-last``), beside each rate ``data-testid="rate"``
    (``data-series``: its last value shown); per queue ``data-testid="queue-row"``
    (``data-topic``, ``data-broker-name``, ``data-queue``, ``data-min``, ``data-max``); per group
    ``data-testid="group"`` (``data-group``, ``data-lag``) and per group and queue
    ``data-testid="lag-row"`` (``data-group``, ``data-topic``, ``data-broker-name``, ``data-queue``,
    ``data-broker-offset``, ``data-consumer-offset``, ``data-lag``); clickable places
    ``data-testid="open"``; ``data-testid="open-result"`` (``data-ok``) says what a click did.
"""

from .broker_view import BrokerView
from .frame_view import FrameView
from .put_path_player import PutPathPlayer
from .record_view import RecordView
from .replication_view import ReplicationView
from .segment_view import SegmentView
from .static_html import export_notebook_html, to_html
from .store_inspector import StoreInspector

__all__ = ["BrokerView", "FrameView", "PutPathPlayer", "RecordView", "ReplicationView", "SegmentView", "StoreInspector", "to_html",
           "export_notebook_html"]
