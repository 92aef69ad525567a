"""Progress bars on the terminal: one rich bar class for every long command.

A bar is drawn only when its stream is a terminal (or when asked to); otherwise every
method does nothing, so callers never test whether a bar exists.  The command line
(``rmqstore dump|load|inspect|verify|spark ...``) and the site build (``rmqstore site``)
use it; notebooks use tqdm instead.
"""

from __future__ import annotations

__all__ = ["ProgressBar", "isatty"]


def isatty(stream) -> bool:
    """True when ``stream`` is an open terminal (False for anything without a working ``isatty``)."""
    check = getattr(stream, "isatty", None)
    try:
        return bool(check and check())
    except (ValueError, OSError):
        return False


class ProgressBar:
    """A rich progress bar on ``stream`` when it is a terminal (or ``enabled``); otherwise nothing.

    ``unit`` picks the count column: ``"bytes"`` (sizes), ``"steps"`` (done/total), or any
    other word shown after the count.  Without ``total`` there is no bar, only the count.
    A ``transient`` bar disappears when done.
    """

    def __init__(self, stream, description: str, total: int | None = None, unit: str = "bytes", *,
                 enabled: bool | None = None, transient: bool = True):
        self._bar = None
        self._task = None
        if not (isatty(stream) if enabled is None else enabled):
            return
        try:
            from rich.console import Console
            from rich.progress import (BarColumn, DownloadColumn, MofNCompleteColumn, Progress, SpinnerColumn,
                                       TextColumn, TimeElapsedColumn)
        except ImportError:  # pragma: no cover - rich is a dependency
            return
        columns = [SpinnerColumn(), TextColumn("[bold]{task.description}")]
        if total is not None:
            columns.append(BarColumn())
        if unit == "bytes":
            columns.append(DownloadColumn())
        elif unit == "steps":
            columns.append(MofNCompleteColumn())
        else:
            columns.append(TextColumn("{task.completed} " + unit))
        columns.append(TimeElapsedColumn())
        self._bar = Progress(*columns, console=Console(file=stream), transient=transient)
        self._task = self._bar.add_task(description, total=total)

    @property
    def shown(self) -> bool:
        """Is a bar drawn (a terminal, rich installed), or is every call a no-op?"""
        return self._bar is not None

    def __enter__(self):
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(self, *exc):
        if self._bar is not None:
            self._bar.stop()

    def update(self, completed: int, total: int | None = None) -> None:
        """Set the count (and the total, when it becomes known): the shape of a ``progress=`` callback."""
        if self._bar is not None:
            self._bar.update(self._task, completed=completed, total=total)

    def step(self, description: str, advance: int = 0) -> None:
        """Say what is being done now, and count ``advance`` more steps done."""
        if self._bar is not None:
            self._bar.update(self._task, description=description, advance=advance)

    def log(self, text: str) -> None:
        """Print a line above the bar (nothing without a bar)."""
        if self._bar is not None:
            self._bar.console.print(text, markup=False, highlight=False)
