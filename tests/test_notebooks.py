"""Every teaching notebook executes top to bottom in a real kernel, and prints what it teaches."""

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def execute(path: Path):
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    return nb


def outputs_text(nb) -> str:
    parts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                parts.append(out["text"])
            elif "data" in out and "text/plain" in out["data"]:
                parts.append(out["data"]["text/plain"])
    return "".join(parts)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_executes(path):
    nb = execute(path)
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, errors


def test_tour_prints_the_sample_store():
    import rmqstore
    from rmqstore.scan import CommitLogScan

    text = outputs_text(execute(ROOT / "notebooks" / "01_tour.ipynb"))
    scan = CommitLogScan(ROOT / "data" / "sample_store")
    records = list(scan)
    n_msgs = sum(isinstance(r, rmqstore.MessageRecord) for _, r in records)
    n_blanks = len(records) - n_msgs
    assert f"{n_msgs} messages, {n_blanks} blank records" in text
    assert "00000000000000000000  starts at offset        0  size 65,536 bytes" in text
    assert "OrderTopic" in text and "SCHEDULE_TOPIC_XXXX" in text
