"""Tools over a store, read-only: the dump scan, the inspection report, the consistency check (verify),
loading a dump back, paging through the log, opening a store without walking it.
"""
