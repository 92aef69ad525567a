"""The documents say which requests the broker and the name server answer, read from their processor tables
(rmqstore.broker.requests_table): README.md and bench/README.md hold the generated table between their marks."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmqstore.broker.requests_table import BEGIN_MARK, END_MARK, answered_requests, replace_marked, requests_markdown
from rmqstore.remoting import RequestCode

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("document", ["README.md", "bench/README.md"])
def test_the_documents_list_what_the_processor_tables_answer(document):
    text = (ROOT / document).read_text(encoding="utf-8")
    assert text == replace_marked(text, requests_markdown()), (
        f"{document}'s request table is not the processors' any more: write it again with "
        f"python3 -c \"from pathlib import Path; from rmqstore.broker.requests_table import *; "
        f"p = Path('{document}'); p.write_text(replace_marked(p.read_text(), requests_markdown()))\"")


def test_every_answered_request_has_rocketmqs_name_and_the_table_is_the_servers():
    rows = answered_requests()
    assert all(RequestCode(r.code).name == r.name for r in rows)
    broker = {r.code for r in rows if r.server == "broker"}
    namesrv = {r.code for r in rows if r.server == "name server"}
    # what a producer, a consumer and mqadmin need of each
    assert {RequestCode.SEND_MESSAGE_V2, RequestCode.PULL_MESSAGE, RequestCode.HEART_BEAT, RequestCode.LOCK_BATCH_MQ,
            RequestCode.GET_BROKER_RUNTIME_INFO, RequestCode.UPDATE_AND_CREATE_TOPIC} <= broker
    assert {RequestCode.GET_ROUTEINFO_BY_TOPIC, RequestCode.REGISTER_BROKER,
            RequestCode.GET_BROKER_CLUSTER_INFO} <= namesrv
    assert not broker & namesrv


def test_a_document_without_the_marks_is_refused():
    with pytest.raises(ValueError, match="requests:begin"):
        replace_marked("no table here", "| x |\n")
    assert replace_marked(f"a\n{BEGIN_MARK}\nold\n{END_MARK}\nb", "new\n") == f"a\n{BEGIN_MARK}\nnew\n{END_MARK}\nb"
