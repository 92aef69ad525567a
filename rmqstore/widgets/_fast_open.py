"""The widgets' way in to the core's fast read-only open (:mod:`rmqstore.fast_open`); no logic here."""

from rmqstore.fast_open import FastOpenInfo, boundary_hint, cq_last_before, open_fast

__all__ = ["open_fast", "FastOpenInfo", "boundary_hint", "cq_last_before"]
