"""StoreCheckpoint and the abort file.

The checkpoint records, for the commitlog, the consume queues and the index, the store
timestamp of the last message known to be flushed.  After a crash, recovery starts from
the newest commitlog file whose first message is older than the smallest of them.
It is a 4096-byte file; only its first 24 bytes are used (layout ``CHECKPOINT``).  It is
written through a mapping, first a while after the store starts -- maybe once the disk is
full -- so its page is reserved when it is opened
(:func:`rmqstore.files.file_space.size_and_reserve`): a page without a block would be a SIGBUS.

The ``abort`` file exists while a store runs; finding it at start-up means the last run
did not shut down cleanly.
"""

from __future__ import annotations

import mmap
import os

from ..common.errors import StoreError
from ..format.layout import CHECKPOINT, CHECKPOINT_FILE_SIZE
from .file_space import disk_problem, size_and_reserve
from .store_dir import is_shape_error

__all__ = ["StoreCheckpoint", "read_checkpoint"]


def read_checkpoint(path: str):
    """Read a checkpoint file without writing to it; None when it does not exist."""
    try:
        with open(path, "rb") as f:
            data = f.read(CHECKPOINT.size)
    except FileNotFoundError:
        return None
    except OSError as exc:  # a directory, a loop, ...
        if not is_shape_error(exc):
            raise  # the system refused this run (EMFILE, EACCES...): nothing said about the checkpoint
        raise StoreError(f"{path}: cannot read the checkpoint: {exc.strerror or exc}") from None
    if len(data) < CHECKPOINT.size:
        raise StoreError(f"{path} holds {len(data)} bytes, a checkpoint needs {CHECKPOINT.size}")
    return CHECKPOINT.unpack_from(data)


class StoreCheckpoint:
    """The checkpoint file mapped for writing (RocketMQ's StoreCheckpoint)."""

    def __init__(self, path: str):
        self.path = path
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:  # (its page reserved: it is written through the mapping, maybe once the disk is full)
            size_and_reserve(self._fd, path, CHECKPOINT_FILE_SIZE)
        except OSError as exc:
            os.close(self._fd)
            raise StoreError(f"cannot open the checkpoint {path}: {disk_problem(path, exc)}") from exc
        self._map = mmap.mmap(self._fd, CHECKPOINT_FILE_SIZE)
        values = CHECKPOINT.unpack_from(self._map)
        self.physic_msg_timestamp = values.physic_msg_timestamp
        self.logics_msg_timestamp = values.logics_msg_timestamp
        self.index_msg_timestamp = values.index_msg_timestamp

    def flush(self) -> None:
        CHECKPOINT.pack_into(self._map, 0, self.physic_msg_timestamp, self.logics_msg_timestamp,
                             self.index_msg_timestamp)
        self._map.flush()

    def shutdown(self) -> None:
        self.flush()
        self._map.close()
        os.close(self._fd)

    def get_min_timestamp(self) -> int:
        m = min(self.physic_msg_timestamp, self.logics_msg_timestamp) - 3000
        return max(m, 0)

    def get_min_timestamp_index(self) -> int:
        return min(self.get_min_timestamp(), self.index_msg_timestamp)
