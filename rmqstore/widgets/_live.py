"""Live views: a background thread that refreshes a view's snapshot until stopped.

A live view (``SegmentView.attach``, ``ReplicationView.watch``) calls its own
``refresh()`` every few hundred milliseconds from a daemon thread; the refresh sends new
trait values only when a number moved, and ipywidgets carries them to the front end from
any thread.  Stopping joins the thread and takes one last snapshot, so the view ends
showing the final state.  A refresh that fails (a store closing under the view) is
logged at debug level and, once ``gone()`` says the source is gone, ends the thread.
"""

from __future__ import annotations

import logging
import threading

__all__ = ["LiveThread", "LiveView"]

log = logging.getLogger(__name__)


class LiveThread:
    """Calls ``refresh()`` every ``interval`` seconds from a daemon thread until :meth:`stop`."""

    def __init__(self, refresh, interval: float, name: str, gone=lambda: False):
        self.refresh = refresh
        self.interval = interval
        self.gone = gone
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> "LiveThread":
        self._thread.start()
        return self

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.refresh()
            except Exception:  # noqa: BLE001 - a source closing under us ends the thread quietly
                if self._stop.is_set():
                    break
                log.debug("%s: snapshot failed", self._thread.name, exc_info=True)
                if self.gone():
                    break

    def stop(self, timeout: float = 5.0) -> None:
        """End the thread, then take one last snapshot (if the source still answers)."""
        self._stop.set()
        if self._thread is threading.current_thread():
            return
        self._thread.join(timeout)
        try:
            self.refresh()
        except Exception:  # noqa: BLE001 - the source may be gone already
            log.debug("%s: last snapshot failed", self._thread.name, exc_info=True)


class LiveView:
    """Mixin for a view with a synced ``live`` trait: one :class:`LiveThread` at a time."""

    _live_thread: LiveThread | None = None

    def _start_live(self, refresh, interval: float, name: str, gone=lambda: False) -> None:
        self._stop_live()
        self._live_thread = LiveThread(refresh, interval, name, gone).start()
        self.live = True

    def _stop_live(self, timeout: float = 5.0) -> None:
        thread, self._live_thread = self._live_thread, None
        if thread is not None:
            thread.stop(timeout)
        if self.live:
            self.live = False

    @property
    def _live_running(self) -> bool:
        return self._live_thread is not None and self._live_thread.alive

    @property
    def watching(self) -> bool:
        """Is a background thread refreshing the view (``watch()``)?"""
        return self._live_running

    def stop(self, timeout: float = 5.0) -> None:
        """Stop watching, then take one last snapshot."""
        self._stop_live(timeout)

    def close(self) -> None:
        self._stop_live()
        super().close()
