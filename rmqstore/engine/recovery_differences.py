"""Where rmqstore's recovery deliberately differs from Apache RocketMQ 4.9.8: one table, each entry a reason.

:mod:`rmqstore.engine.recovery`'s essay says *how* recovery works and, in short, where it departs
from RocketMQ; this module holds the full account, keyed by a short name that tests and docs
cite (``DIFFERENCES["index_after_end"]``).  Each entry says what we do, what RocketMQ 4.9.8
does, and why the difference matters to a store that both must open.  It is data only:
:mod:`rmqstore.engine.recovery` re-exports it as ``recovery.DIFFERENCES``.
"""

from __future__ import annotations

__all__ = ["DIFFERENCES"]

#: where our recovery deliberately differs from Apache RocketMQ 4.9.8
DIFFERENCES = {
    "physical_offset": "A record whose stored PHYSICALOFFSET is not its position in the log is invalid "
                       "(ends the log). RocketMQ does not look at it. Our put path once copied the record into "
                       "the file and then patched its queue offset, physical offset and store time there, field "
                       "by field: a kill in between left a record with a valid body CRC and offsets 0 (or a store "
                       "time of 0). It now patches before copying, as RocketMQ's encoder does; the check stays, "
                       "for files written by the old code.",
    "v2_records": "A V2 record (RocketMQ 5.x magic 0xDAA320AB) is validated and kept; 4.9.8 only knows V1 "
                  "and would end the log at it.",
    "record_checks": "Record validation uses our decoder, which rejects a few layouts no writer produces "
                     "(a negative body length with otherwise consistent lengths) that RocketMQ's arithmetic "
                     "lets through. Like RocketMQ it checks the CRC of non-empty bodies only and recognises a "
                     "blank by its magic alone, whatever size the blank declares.",
    "cq_stale_units": "Units that a consume queue loses when it is cut at the end of the log are zeroed on "
                      "disk. RocketMQ only moves the positions; the old units stay in the file, and a later "
                      "clean restart reads them back in (as long as they point below the end of the log "
                      "by then) -- units of the wrong messages.",
    "index_after_end": "After the log is cut, index files whose first entry lies at or after the end are "
                       "deleted (IndexService.delete_files_after), and entries at or after the end inside a "
                       "file that also holds earlier entries are dropped (its slots fall back along their "
                       "chains, the entries are zeroed). RocketMQ keeps both: after a power cut a key lookup "
                       "can then return whatever later record is stored at such an offset.",
    "interrupted_allocation": "After an abnormal stop, a trailing commitlog/consume-queue file whose size is "
                              "wrong and whose bytes are all zero (a kill between creating and sizing it) is "
                              "deleted before loading; so is such an index file on every writable load, and "
                              "read-only opens skip it with a warning. RocketMQ refuses to load such a store. "
                              "An index file with no entry whose header was never written (a kill right after "
                              "sizing it) continues the previous file instead of taking entries of old records "
                              "from offset 0 on. Our own temp files of an interrupted creation "
                              "(<name>.<pid>.creating) are deleted on every writable load.",
    "index_after_crash": "After an abnormal stop, the records between the last entry of the index files that "
                         "survive the load and the start of the re-dispatch walk are indexed again (index only), "
                         "so every record the log keeps is findable by each of its keys. RocketMQ 4.9.8 deletes "
                         "the index files newer than the index checkpoint and re-dispatches only from the "
                         "checkpoint's commitlog file (3 s before the last flush; messageIndexSafe off, its "
                         "default), so the keys of the records in between are lost for good.",
    "index_first_entry_time": "The first entry of an index file gets time difference 0 (the file's begin time "
                              "becomes that entry's store time). RocketMQ counts it from the begin time a new "
                              "file inherits (the previous file's end), so a key put long after the file was "
                              "opened -- the first put after a restart -- carries a time seconds off and a "
                              "lookup by time range misses it.",
    "torn_writes": "After an abnormal stop every consume queue is cut at the start of the re-dispatch walk and "
                   "its units from there on are written again from the log. RocketMQ keeps them: a kill inside "
                   "a unit's write leaves its offset and size with a zero tags code (the copy of 20 bytes is two "
                   "stores), a unit recovery takes for whole and a tag filter then skips. Likewise an index "
                   "file's header is written in one piece, and an entry-less index file whose header a kill "
                   "tore is given the header its creation writes.",
    "lock_first": "A writable store takes <root>/lock in load(), before recovery truncates or deletes "
                  "anything; RocketMQ takes it in start(), after recovery, so two writers could both recover.",
    "store_file_names": "Only names of exactly 20 ASCII digits are segments (17 for index files); any other "
                        "entry of a store folder is reported and left alone, never loaded or deleted. RocketMQ "
                        "loads every file of the folder and parses its name with Long.parseLong, which also "
                        "takes Unicode decimal digits: a stray copy of a segment under such a name is loaded as a "
                        "segment of the log. An entry named like a segment that cannot "
                        "be one (a dangling symlink, a symlink loop, a directory, a file over 2**31-1 bytes, a "
                        "name past 2**63-1 or off the file-size grid) makes the load refuse the store, naming "
                        "it; RocketMQ fails on some of these and logs and loads the off-grid ones.",
}
