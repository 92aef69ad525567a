"""The last few request frames of each code, bytes as received: a view of the wire.

Set ``server.frame_recorder`` (off by default) to a :class:`FrameRecorder` and every
connection's decoder hands it each request with its frame (length field included), for a
view such as the notebooks' FrameView.
"""

from __future__ import annotations

import collections

from .frame import RemotingCommand

__all__ = ["FrameRecorder"]


class FrameRecorder:
    """The last ``per_code`` request frames of each request code, as received (length field included).

    Called by a connection's decoder with each command and its frame; responses are not kept.
    ``last(code)`` is the newest frame of a code (``None`` when none came), ``frames(code)``
    all kept ones, oldest first.
    """

    def __init__(self, per_code: int = 8):
        if per_code < 1:
            raise ValueError(f"per_code must be at least 1, got {per_code}")
        self.per_code = per_code
        self._frames: dict[int, collections.deque] = {}

    def __call__(self, cmd: RemotingCommand, frame: bytes) -> None:
        if not cmd.is_response:
            self._frames.setdefault(cmd.code, collections.deque(maxlen=self.per_code)).append(bytes(frame))

    def frames(self, code: int) -> list[bytes]:
        return list(self._frames.get(int(code), ()))

    def last(self, code: int) -> bytes | None:
        kept = self._frames.get(int(code))
        return kept[-1] if kept else None

    @property
    def codes(self) -> list[int]:
        return sorted(self._frames)
