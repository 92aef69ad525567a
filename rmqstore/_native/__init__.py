"""The compiled fast path: the C sources (built by setup.py) and the extension modules built from them,
_cwalk, _cput, _cdispatch, _cdecode and _cwait. Nothing imports them but
:mod:`rmqstore.common.native`, the one place that decides which path runs.
"""
