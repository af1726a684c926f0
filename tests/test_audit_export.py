"""``agent-gateway audit``: the export of every interaction, checked against the ledger,
through the whole gateway and the real codex app-server (issue 17). A secret answer given
in the run is in neither the export nor the database files."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gateway.domain import Answer
from gateway.interactions.machine import Interaction
from tests.codex_env import CodexHome
from tests.gateway_flows import ask, settles
from tests.gateway_harness import ALICE, ROOM, running_gateway
from tests.servers.fake_responses import FakeResponses, message, request_user_input
from tests.test_gateway_decisions import QUESTIONS_FEATURE, question
from tests.test_gateway_escalation import (
    CAROL,
    CAROLS_DM,
    ESCALATING,
    config,
    copy_in,
    token,
)
from tests.test_gateway_policy import ask_to_touch

pytestmark = [pytest.mark.real_agent("codex"), pytest.mark.timeout(120)]

SECRET = "hunter2-audit-must-not-see"


def export(data_dir: Path, *args: str) -> str:
    run = subprocess.run(
        [sys.executable, "-m", "gateway", "audit", "--data-dir", str(data_dir), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    return run.stdout


async def test_the_export_matches_the_ledger_and_holds_no_secret(
    codex_bin: str, codex_home: CodexHome, fake_model: FakeResponses, tmp_path: Path
) -> None:
    since = datetime.now(UTC) - timedelta(minutes=1)
    settings = config(codex_bin, codex_home, tmp_path, ESCALATING)
    settings = settings.model_copy(
        update={
            "projects": {
                "demo": settings.projects["demo"].model_copy(
                    update={
                        "agent_options": settings.projects["demo"].agent_options.model_copy(
                            update={"features": QUESTIONS_FEATURE}
                        )
                    }
                )
            }
        }
    )
    records: list[Interaction] = []
    async with running_gateway(settings) as gw:
        asked = await ask_to_touch(gw, fake_model)
        await gw.memory.click(ROOM, ALICE, asked.token("Allow once"))
        in_dm = await copy_in(gw, CAROLS_DM)  # escalated after 2 s
        await gw.memory.click(CAROLS_DM, CAROL, token(in_dm, "Allow once"))
        records.append(
            await settles(gw, asked, r"Approved .* · done · 2 of 2: Alice, Carol approved")
        )
        await gw.text_where(lambda text: "Done." in text)
        questions = [
            question(
                "token", "Deploy token", "Paste the deploy token", "I have none", isSecret=True
            )
        ]
        secret_ask = await ask(gw, fake_model, [request_user_input(questions), message("Ok.")])
        form = secret_ask.first.form
        assert form is not None
        answers = {"token": Answer(other=SECRET)}
        await gw.memory.submit(ROOM, ALICE, form.submit_token, answers, private=True)
        records.append(await settles(gw, secret_ask, r"Answered by Alice at .* · done"))
        await gw.text_where(lambda text: "Ok." in text)
    data_dir = tmp_path / "data"
    lines = export(data_dir, "--since", since.isoformat(), "--project", "demo")
    table = export(data_dir, "--since", since.isoformat(), "--format", "csv")
    assert SECRET not in lines and SECRET not in table
    for stored in data_dir.iterdir():  # the database, its WAL, the key
        if stored.is_file():
            assert SECRET.encode() not in stored.read_bytes(), stored.name
    exported = [json.loads(line) for line in lines.splitlines()]
    assert [e["interaction"] for e in exported] == [r.id for r in records]
    touch, secret = exported
    approved = records[0]
    assert approved.decision is not None and approved.delivery is not None
    assert approved.resolution is not None
    assert touch["asked_by"] == "memory:alice" and touch["agent"] == "codex-app-server"
    assert touch["content_hash"] == approved.content_hash
    assert [(v["person"], v["action"], v["surface"]) for v in touch["votes"]] == [
        ("memory:alice", "accept", "memory:team:room:t1"),
        ("carol", "accept", "memory:-:carol:-"),
    ]
    assert all(v["content_hash"] == approved.content_hash for v in touch["votes"])
    assert touch["decided_by"] == "memory:carol" and touch["decision"] == "accept"
    assert touch["decided_at"] == approved.decision.at.isoformat()
    assert touch["decided_on"] == "memory:-:carol:-"
    assert touch["delivered"] == "ok" and touch["delivered_at"] == approved.delivery.at.isoformat()
    assert touch["resolved"] == approved.resolution.how.value
    assert touch["escalated_to"] == ["carol", "dave", "#escalations"]
    assert touch["escalated_at"] is not None and touch["expired_at"] is None
    assert secret["decision"] == "answered" and secret["answered"] == ["token"]
    rows = list(csv.DictReader(io.StringIO(table)))
    assert [row["interaction"] for row in rows] == [r.id for r in records]
    assert rows[0]["escalated_to"] == "carol; dave; #escalations"
    assert "carol accept" in rows[0]["votes"]
    # a later date: nothing
    assert export(data_dir, "--since", (datetime.now(UTC) + timedelta(days=1)).isoformat()) == ""
