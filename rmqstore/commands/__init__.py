"""The ``rmqstore`` subcommands, one module each (``COMMAND``: a :class:`~.terminal.Command`), and
:mod:`.terminal`, what they share.  :mod:`rmqstore.cli` puts them together; nothing here imports
it, so ``rmqstore spark`` (:mod:`rmqstore.spark.cli`) can use the same output and error handling
without an import cycle.
"""

__all__: list[str] = []
