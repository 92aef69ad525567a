"""Widget state at scale: SegmentView over 2,000 segments, StoreInspector over 1,000,000 messages.

    python bench/widgets.py            # full run (first run builds the 1M-message store: a few minutes)
    python bench/widgets.py --quick    # 200,000 messages, no browser

1. SegmentView, 2,000 segments -- (a) from ``store.positions()``-style rows of 1 GiB
   segments (offsets past 2**40), (b) ``SegmentView.from_store`` over a real store of 2,000
   4 KiB segments (blank tails found through the consume queues): build time and the size of
   the widget state as it is sent/embedded (JSON with base64 buffers).  With Chromium and
   Playwright present, also the time to render the static page and to scroll through every
   row (the list is virtualised: only the rows in view are in the DOM).
2. StoreInspector over a store of 1,000,000 messages written by the engine (batch puts,
   small bodies; kept in ``/tmp/rmqstore-bench-widgets-<n>`` and reused): opening it
   (``StoreInspector.from_path``: end of log from the consume queues, segments, queues, the
   first pages), how many records that read, then next page / last page / lookups by msgId,
   offset and key -- beside ``open_store`` (a full recovery scan) for scale.

Prints a table and writes ``bench/results/widgets.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from rmqstore import BatchItem, MessageBatch, MessageStore, StoreConfig, open_store  # noqa: E402

import rmqstore.widgets as W  # noqa: E402
from rmqstore.widgets.static_html import widget_state  # noqa: E402

RESULTS = os.path.join(os.path.dirname(__file__), "results", "widgets.json")


def timed(fn, repeat: int = 3):
    times, value = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), value


def state_json_size(view) -> int:
    return len(json.dumps(widget_state(view)["state"][view.model_id], separators=(",", ":")))


# -- 1. SegmentView --------------------------------------------------------------------------------

def synthetic_positions(n: int = 2000, size: int = 1 << 30) -> list[dict]:
    return [{"fileFromOffset": i * size, "wrotePosition": size if i < n - 1 else size // 3,
             "committedPosition": 0, "flushedPosition": size if i < n - 2 else 0, "size": size,
             "blankAt": size - 100 - i % 997} for i in range(n)]


def build_segment_store(root: str, segments: int = 2000) -> MessageStore:
    cfg = StoreConfig(mapped_file_size_commit_log=4096, mapped_file_size_consume_queue=20 * 30_000,
                      pre_fault_mapped_file=False, message_index_enable=False,
                      flush_interval_commit_log=50, flush_commit_log_least_pages=0)
    store = MessageStore(root, cfg)
    store.start()
    body = b"x" * 100
    while len(store.commit_log.mapped_file_queue.mapped_files) <= segments:
        store.put_messages(MessageBatch("Seg", [BatchItem(body, "") for _ in range(8)], queue_id=0))
    store.wait_dispatched(60)
    return store


def browser_timings(html_path: str, rows: int) -> dict | None:
    """Load the page in Chromium; time to first rows and a scroll through the whole list."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    chromium = os.environ.get("RMQ_CHROMIUM", "/usr/bin/chromium")
    if not os.path.exists(chromium):
        return None
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox", "--headless=new"])
        page = b.new_page(viewport={"width": 1280, "height": 900})
        t0 = time.perf_counter()
        page.goto("file://" + os.path.abspath(html_path))
        page.wait_for_selector("[data-testid=segment]")
        loaded = time.perf_counter() - t0
        result = page.evaluate("""async (rows) => {
            const list = document.querySelector('.rmq-seg-list');
            const frame = () => new Promise(r => requestAnimationFrame(r));
            const t0 = performance.now();
            let frames = 0, worst = 0, last = performance.now();
            for (let top = 0; top <= list.scrollHeight; top += list.clientHeight) {
                list.scrollTop = top;
                await frame();
                const now = performance.now();
                worst = Math.max(worst, now - last);
                last = now;
                frames++;
            }
            const bars = document.querySelectorAll('[data-testid=segment]');
            return {scroll_ms: performance.now() - t0, frames, worst_frame_ms: worst,
                    dom_rows: bars.length, last_file: bars[bars.length - 1].dataset.file};
        }""", rows)
        b.close()
    result["load_s"] = loaded
    return result


def bench_segments(with_browser: bool) -> list[dict]:
    out = []
    t_build, view = timed(lambda: W.SegmentView.from_positions(synthetic_positions()))
    t_state, size = timed(lambda: state_json_size(view))
    row = {"case": "SegmentView 2,000 x 1 GiB (positions)", "rows": view.rows, "build_s": t_build,
           "state_s": t_state, "state_json_bytes": size}
    if with_browser:
        d = tempfile.mkdtemp(prefix="rmqbench-segpage-")
        try:
            W.to_html(view, os.path.join(d, "seg.html"), title="2,000 segments")
            row["browser"] = browser_timings(os.path.join(d, "seg.html"), view.rows)
        finally:
            shutil.rmtree(d, ignore_errors=True)
    out.append(row)

    root = tempfile.mkdtemp(prefix="rmqbench-segstore-")
    try:
        t0 = time.perf_counter()
        store = build_segment_store(root)
        built = time.perf_counter() - t0
        try:
            first_s, view = timed(lambda: W.SegmentView.from_store(store), repeat=1)  # blank tails found now
            again_s, view = timed(lambda: W.SegmentView.from_store(store))  # cached per file
            size = state_json_size(view)
            unknown = sum(1 for r in view.segments() if r["isFull"] and r["blankAt"] == -2)
            out.append({"case": "SegmentView.from_store, 2,000 x 4 KiB", "rows": view.rows,
                        "build_s": first_s, "rebuild_s": again_s, "state_json_bytes": size,
                        "blank_tails_unknown": unknown, "store_build_s": built})
        finally:
            store.shutdown()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return out


# -- 2. StoreInspector -----------------------------------------------------------------------------

def build_big_store(root: str, count: int) -> float:
    cfg = StoreConfig(mapped_file_size_commit_log=16 * 1024 * 1024, pre_fault_mapped_file=False,
                      flush_interval_commit_log=200)
    t0 = time.perf_counter()
    with MessageStore(root, cfg) as store:
        n = 0
        batch = 64
        while n < count:
            k = min(batch, count - n)
            items = [BatchItem(b"m%09d" % (n + j), f"KEYS\x01key-{(n + j) // 100}" if (n + j) % 100 == 0 else "")
                     for j in range(k)]
            r = store.put_messages(MessageBatch(f"Topic{(n // batch) % 4}", items, queue_id=(n // batch) % 8 % 2))
            assert r.ok, r
            n += k
        store.wait_dispatched(600)
    lock = os.path.join(root, "lock")
    if os.path.exists(lock):
        os.remove(lock)
    with open(os.path.join(root, "BENCH_COMPLETE"), "w") as f:
        f.write(str(count))
    return time.perf_counter() - t0


def bench_inspector(count: int, full_open: bool) -> list[dict]:
    root = f"/tmp/rmqstore-bench-widgets-{count}"
    built = None
    marker = os.path.join(root, "BENCH_COMPLETE")
    if not (os.path.exists(marker) and open(marker).read().strip() == str(count)):
        shutil.rmtree(root, ignore_errors=True)
        print(f"building a store of {count:,} messages in {root} (reused by later runs) ...", flush=True)
        built = build_big_store(root, count)
        print(f"  built in {built:.1f} s", flush=True)
    rows = []
    open_s, insp = timed(lambda: W.StoreInspector.from_path(root), repeat=1)
    try:
        b = insp.browser
        read_at_open = b.records_read
        rows.append({"case": f"StoreInspector.from_path ({count:,} messages)", "seconds": open_s,
                     "records_read": read_at_open, "end": b.end, "segments": insp.summary["segments"],
                     "messages_in_queues": int(insp.summary["messages_in_queues"]),
                     "open_source": insp.open_info.get("source"), "walked_records": insp.open_info.get("walked_records"),
                     "state_json_bytes": state_json_size(insp), "store_build_s": built})
        first = insp.page
        n_key = (count // 2) // 100 * 100  # every 100th message carries KEYS key-<n/100>
        key_query = f"Topic{(n_key // 64) % 4}#key-{n_key // 100}"
        cases = [
            ("next page", lambda: b.page(int(first["next"]), 50)),
            ("last page (page_before end)", lambda: b.page_before(None, 50)),
            ("page in the middle (segment start)", lambda: b.page(b.files[len(b.files) // 2].file_from_offset, 50)),
            ("lookup by offset (middle of the log)", lambda: b.lookup(str(b.end // 2))),
            ("lookup by msgId", lambda: b.lookup(first["rows"][7]["msg_id"])),
            ("lookup by key (index)", lambda: b.lookup(key_query)),
            ("record bytes + decoded rows", lambda: insp.record(int(first["rows"][3]["offset"]))),
        ]
        for name, fn in cases:
            before = b.records_read
            t, value = timed(fn)
            rows.append({"case": name, "seconds": t, "records_read": (b.records_read - before) // 3,
                         "results": len(value.get("rows", [])) if isinstance(value, dict) else None})
    finally:
        insp.close()
    if full_open:
        t0 = time.perf_counter()
        store = open_store(root)
        try:
            rows.append({"case": "open_store (full recovery scan), for scale", "seconds": time.perf_counter() - t0,
                         "records_read": None, "end": store.get_max_phy_offset()})
        finally:
            store.close()
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="200,000 messages, no browser, no full open")
    ap.add_argument("--messages", type=int, default=None)
    ap.add_argument("--no-browser", action="store_true")
    ap.add_argument("--json", default=RESULTS)
    args = ap.parse_args(argv)
    count = args.messages or (200_000 if args.quick else 1_000_000)

    seg = bench_segments(with_browser=not (args.quick or args.no_browser))
    print(f"\n{'SegmentView':44s} {'rows':>6s} {'build s':>8s} {'again s':>8s} {'state JSON':>11s}")
    for r in seg:
        print(f"{r['case']:44s} {r['rows']:6,d} {r['build_s']:8.3f} {r.get('rebuild_s', r.get('state_s', 0)):8.3f} "
              f"{r['state_json_bytes']:11,d}")
        if r.get("browser"):
            br = r["browser"]
            print(f"    Chromium: page loaded in {br['load_s']:.2f} s; scrolled all rows in {br['scroll_ms']:.0f} ms "
                  f"({br['frames']} frames, worst {br['worst_frame_ms']:.0f} ms), {br['dom_rows']} rows in the DOM, "
                  f"last {br['last_file']}")

    insp = bench_inspector(count, full_open=not args.quick)
    print(f"\n{'StoreInspector':44s} {'seconds':>9s} {'records read':>13s}")
    for r in insp:
        rr = "-" if r.get("records_read") is None else f"{r['records_read']:,}"
        print(f"{r['case']:44s} {r['seconds']:9.4f} {rr:>13s}")
    head = insp[0]
    print(f"    {head['segments']} segments, end of log {head['end']:,}, {head['messages_in_queues']:,} messages in "
          f"queues; end found from {head['open_source']} (+{head['walked_records']} records walked); "
          f"state JSON {head['state_json_bytes']:,} bytes")

    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"messages": count, "segment_view": seg, "store_inspector": insp,
                   "python": sys.version.split()[0]}, f, indent=1)
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
