"""RecordView: one commitlog record's bytes, coloured field by field, and what they decode to.

The hex/ASCII grid colours each byte by the layout field it belongs to (spans from
:func:`rmqstore.format.record.record_field_spans`, colours from :data:`rmqstore.format.layout.MESSAGE_FIELDS`
by way of :data:`widgets._common.FIELD_TABLE`).  Hovering a byte highlights its field's bytes
and its decoded row; hovering a row highlights its bytes; clicking pins the field
(``selected``, synced both ways).  Decoded values: timestamps as UTC dates, hosts as
``ip:port`` (``[v6]:port``), properties split in stored order, the body CRC checked (ok/bad),
V1/V2 magic, blank END_OF_FILE records (header and the first filler bytes).

State: ``data`` (Bytes: the record), ``offset`` (its physical offset, a decimal string),
``spans`` (``[[name, start, end]]`` relative to the record), ``rows`` (decoded values, one per
span), ``field_table``, ``kind``/``version``/``msg_id``/``summary``/``error``, ``selected``.
"""

from __future__ import annotations

import anywidget
import traitlets as t

from rmqstore.engine.reading import NoRecordAt, held_record_bytes
from rmqstore.files.store_paths import offset_to_file_name

from ._assets import css, esm
from ._common import FIELD_TABLE, record_details

__all__ = ["RecordView", "FieldBytesView", "store_record_details"]


def store_record_details(store, physical_offset: int) -> dict:
    """:func:`~widgets._common.record_details` of the record at ``physical_offset`` of ``store``.

    Reads the mapped file in place while holding it (nothing is copied but the record's
    own bytes) and only up to its read position.  Raises ``ValueError`` when no file holds
    a readable byte at that offset.
    """
    try:
        with held_record_bytes(store, physical_offset) as (buf, pos, readable):
            return record_details(buf, pos, physical_offset, limit=readable)
    except NoRecordAt as exc:
        if exc.file_from_offset is None:
            raise ValueError(f"no commitlog file holds offset {physical_offset:,}") from None
        name = offset_to_file_name(exc.file_from_offset)
        if exc.why == "past_end":
            raise ValueError(f"offset {physical_offset:,} is past the readable end of {name} "
                             f"({exc.readable:,} bytes readable)") from None
        raise ValueError(f"{name} is being closed") from None


class FieldBytesView(anywidget.AnyWidget):
    """What a coloured byte grid with decoded rows needs (RecordView, FrameView): bytes, spans, rows, colours."""

    title = t.Unicode("").tag(sync=True)
    data = t.Bytes(b"").tag(sync=True)
    summary = t.Unicode("").tag(sync=True)
    error = t.Unicode("").tag(sync=True)
    spans = t.List().tag(sync=True)
    rows = t.List().tag(sync=True)
    field_table = t.List().tag(sync=True)
    selected = t.Unicode("").tag(sync=True)

    def span_map(self) -> dict[str, tuple[int, int]]:
        return {name: (start, stop) for name, start, stop in self.spans}


class RecordView(FieldBytesView):
    """A record's bytes as a hex/ASCII grid coloured by field, with its decoded values."""

    _esm = esm("record_view.js")
    _css = css("record_view.css")

    offset = t.Unicode("0").tag(sync=True)
    total_size = t.Int(0).tag(sync=True)
    kind = t.Unicode("").tag(sync=True)
    version = t.Unicode("").tag(sync=True)
    msg_id = t.Unicode("").tag(sync=True)

    def __init__(self, **kwargs):
        kwargs.setdefault("field_table", FIELD_TABLE)
        super().__init__(**kwargs)

    @classmethod
    def from_details(cls, details: dict, title: str = "") -> "RecordView":
        return cls(title=title, data=details["data"], offset=details["offset"], total_size=details["total_size"],
                   kind=details["kind"], version=details.get("version", ""), msg_id=details.get("msg_id", ""),
                   summary=details.get("summary", ""), error=details.get("error", ""), spans=details["spans"],
                   rows=details["rows"])

    @classmethod
    def from_bytes(cls, buf, offset: int = 0, *, pos: int = 0, title: str = "") -> "RecordView":
        """The record at ``buf[pos:]``, which sits at commitlog offset ``offset``."""
        return cls.from_details(record_details(buf, pos, offset), title=title)

    @classmethod
    def from_store(cls, store, physical_offset: int, *, title: str = "") -> "RecordView":
        """The record at ``physical_offset`` of ``store`` (a message or a blank)."""
        return cls.from_details(store_record_details(store, physical_offset), title=title)

    def show(self, details: dict) -> None:
        """Replace the record shown (used by the StoreInspector and live code)."""
        with self.hold_sync():
            for key in ("data", "offset", "total_size", "kind", "version", "msg_id", "summary", "spans", "rows"):
                setattr(self, key, details.get(key, type(getattr(self, key))()))
            self.error = details.get("error", "")
            self.selected = ""

    @property
    def physical_offset(self) -> int:
        return int(self.offset)

