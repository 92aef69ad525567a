"""The broker's background loops (offset persisting, delay delivery, transaction checks) as one kind of task."""

from __future__ import annotations

import asyncio

__all__ = ["BackgroundTask"]


class BackgroundTask:
    """A coroutine running on the broker's loop until :meth:`stop` cancels it and waits for it."""

    def __init__(self):
        self._task: asyncio.Task | None = None

    def start(self, coro) -> None:
        self._task = asyncio.get_running_loop().create_task(coro)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
