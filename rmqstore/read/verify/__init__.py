"""Verify a store: every byte that can be checked against another, read-only.

``from rmqstore.read.verify import verify`` checks one store in this process and returns a
:class:`VerifyReport` of :class:`Problem` findings; ``rmqstore verify`` prints it.  The
package is split by job:

* :mod:`~rmqstore.read.verify.rules` (with :mod:`~rmqstore.read.verify.queue_rules` and
  :mod:`~rmqstore.read.verify.index_rules`) -- every check as a pure function from decoded facts
  to problems, each fault worded once; the design essay (what is checked, and why) is there;
* :mod:`~rmqstore.read.verify.report` -- :class:`Problem`, :class:`VerifyReport`, :data:`KINDS`;
* :mod:`~rmqstore.read.verify.files` -- reading: read-only maps, zero scans, decoded views;
* :mod:`~rmqstore.read.verify.local` and :mod:`~rmqstore.read.verify.logwalk` -- the local driver (its log walk runs on
  :func:`rmqstore.format.walk.walk_segment`); :mod:`~rmqstore.read.verify.bulk` -- its compiled bulk pass, which hands
  the rules only the records where something differs (the same report);
  :mod:`rmqstore.spark.verify` is the Spark driver of the same rules.
"""

from .local import Verifier, prepare, verify
from .report import DETAIL_CAP, ERROR, KINDS, WARNING, Problem, VerifyReport

__all__ = ["Problem", "VerifyReport", "verify", "KINDS", "ERROR", "WARNING", "DETAIL_CAP", "Verifier", "prepare"]
