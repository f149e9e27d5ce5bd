"""The `remote` scorer against a real evaluator on 127.0.0.1: several named scores per item."""

from __future__ import annotations

import json
import ssl
from collections.abc import Iterator
from typing import Any

import polars as pl
import pytest
from aiohttp import web

from assay.cli import main
from assay.outcomes import RowKind
from assay.store import Store
from assay.testing._background import BackgroundServer, listen
from tests.conftest import write_jsonl, write_spec


class Evaluator:
    """Answers every POST with `reply(body)`; remembers the bodies."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.reply: Any = None
        self.status = 200
        self._runner: web.AppRunner | None = None

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.bodies.append(body)
        if self.status != 200:
            return web.Response(status=self.status, text="down")
        return web.json_response(self.reply(body) if callable(self.reply) else self.reply)

    async def start(self, port: int = 0) -> int:
        app = web.Application()
        app.router.add_post("/evaluate", self._handle)
        self._runner, bound = await listen(app, "127.0.0.1", port)
        return bound

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


@pytest.fixture
def evaluator() -> Iterator[BackgroundServer[Evaluator]]:
    with BackgroundServer(Evaluator(), name="evaluator") as server:
        yield server


def spec(tmp_path, port):
    (tmp_path / "remote_solver.py").write_text("def solve(x):\n    return x.upper()\n")
    write_jsonl(
        tmp_path / "d.jsonl", [{"id": f"q{i}", "input": f"say {i}", "expected": f"SAY {i}"} for i in range(3)]
    )
    return write_spec(
        tmp_path,
        name="remote",
        dataset={"path": "d.jsonl", "id": "id"},
        target={"kind": "python", "function": "remote_solver:solve"},
        scorers=[{"kind": "remote", "name": "eval", "url": f"http://127.0.0.1:{port}/evaluate"}],
        fail_on_item_error_rate=1,
        fail_on_scorer_error_rate=1,  # its scorers fail on purpose
    )


def test_each_named_score_is_its_own_row_and_errors_are_failed_rows(tmp_path, evaluator, capsys):
    evaluator.app.reply = lambda body: [
        {
            "name": "correct",
            "score": 1.0 if body["answer"] == body["case"]["expected"] else 0.0,
            "label": "pass",
        },
        {"name": "polite", "score": 0.5, "label": "meh", "explanation": "terse"},
        {"name": "safety", "score": None, "label": "error", "explanation": "classifier timed out"},
    ]
    assert main(["run", str(spec(tmp_path, evaluator.port)), "--store", str(tmp_path / "s"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    scores = Store(tmp_path / "s").run_scores(summary["run_id"])
    assert set(scores["scorer"]) == {"eval.correct", "eval.polite", "eval.safety"}
    correct = scores.filter(pl.col("scorer") == "eval.correct")
    assert correct["score"].to_list() == [1.0] * 3 and correct["label"].to_list() == ["pass"] * 3
    safety = scores.filter(pl.col("scorer") == "eval.safety")
    assert safety["outcome"].to_list() == ["failed"] * 3 and safety["error"][0] == "classifier timed out"
    assert safety["label"].to_list() == ["error"] * 3
    assert scores.filter(pl.col("scorer") == "eval.polite")["explanation"][0] == "terse"
    body = evaluator.app.bodies[0]
    assert body["case"]["input"].startswith("say ") and body["answer"] == body["output"]


def test_an_unreachable_or_wrong_evaluator_fails_the_scorer(tmp_path, evaluator, capsys):
    evaluator.app.status = 503
    assert main(["run", str(spec(tmp_path, evaluator.port)), "--store", str(tmp_path / "s"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    scores = Store(tmp_path / "s").run_scores(summary["run_id"])
    assert scores["scorer"].to_list() == ["eval"] * 3 and scores["outcome"].to_list() == ["failed"] * 3
    assert "HTTP 503" in scores["error"][0]
    assert summary["items"]["completed"] == 3, "a failing evaluator never fails the item"


def test_the_payload_carries_the_case_id_config_and_files(tmp_path, evaluator, capsys):
    """As evalkit's custom evaluators receive a case: its id, the evaluator's config, its files."""
    (tmp_path / "echo_solver.py").write_text("def solve(x):\n    return x\n")
    files = [{"path": "data/a.csv", "url": "https://example.invalid/a.csv"}]
    write_jsonl(
        tmp_path / "d.jsonl",
        [
            {"id": "q0", "input": {"task": "t0"}, "expected": "x", "files": files},
            {"id": "q1", "input": "plain", "expected": "x"},
        ],
    )
    evaluator.app.reply = [{"name": "ok", "score": 1.0}]
    spec = write_spec(
        tmp_path,
        name="remote",
        dataset={"path": "d.jsonl", "id": "id"},
        target={"kind": "python", "function": "echo_solver:solve"},
        scorers=[
            {
                "kind": "remote",
                "name": "eval",
                "url": f"http://127.0.0.1:{evaluator.port}/evaluate",
                "config": {"strict": True, "rubric": "r1"},
            }
        ],
    )
    assert main(["run", str(spec), "--store", str(tmp_path / "s"), "--json"]) == 0
    capsys.readouterr()
    cases = {body["case"]["id"]: body["case"] for body in evaluator.app.bodies}
    assert set(cases) == {"q0", "q1"}
    assert cases["q0"]["config"] == cases["q1"]["config"] == {"strict": True, "rubric": "r1"}
    assert cases["q0"]["files"] == files and cases["q1"]["files"] == []
    assert cases["q0"]["input"] == {"task": "t0", "files": files}, "evalkit puts files in the input too"
    assert cases["q1"]["input"] == "plain"


def test_a_trajectory_evaluator_without_a_trajectory_is_a_neutral_skip(tmp_path, evaluator, capsys):
    evaluator.app.reply = [{"name": "steps_ok", "score": 1.0}]
    path = spec(tmp_path, evaluator.port)
    text = path.read_text().replace("/evaluate\n", "/evaluate\n  requires_trajectory: true\n")
    assert "requires_trajectory" in text
    path.write_text(text)
    assert main(["run", str(path), "--store", str(tmp_path / "s"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    scores = Store(tmp_path / "s").run_scores(summary["run_id"])
    assert scores["outcome"].to_list() == ["skipped"] * 3 and scores["error"].null_count() == 3
    assert scores["explanation"][0] == "the target gave no trajectory, and this evaluator needs one"
    assert evaluator.app.bodies == [], "nothing is sent for an item it cannot judge"
    (row,) = summary["scorers"]
    assert row["skipped"] == 3 and row["failed"] == 0


def test_a_remote_evaluator_may_return_gauges(tmp_path, evaluator, capsys):
    evaluator.app.reply = lambda body: [
        {"name": "correct", "score": 1.0},
        {"name": "latency_ms", "score": 1200 + len(body["answer"]), "kind": "gauge"},
    ]
    assert main(["run", str(spec(tmp_path, evaluator.port)), "--store", str(tmp_path / "s"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    store = Store(tmp_path / "s")
    assert store.run_scores(summary["run_id"])["scorer"].unique().to_list() == ["eval.correct"]
    gauges = store.run_scores(summary["run_id"], kind=RowKind.GAUGE).filter(
        pl.col("scorer") == "gauge.eval.latency_ms"
    )
    assert gauges.height == 3 and gauges["score"].null_count() == 3
    assert gauges["value"].to_list() == [1205.0] * 3 and set(gauges["outcome"]) == {"measured"}
    assert set(gauges["scorer_kind"]) == {"gauge"}
    assert [s["scorer"] for s in summary["scorers"]] == ["eval.correct"]
    assert any(g["gauge"] == "gauge.eval.latency_ms" and g["mean"] == 1205.0 for g in summary["gauges"])


def test_the_requests_of_a_run_share_one_tls_setup(tmp_path, evaluator, capsys, monkeypatch):
    """Each item's request reuses the process's TLS settings: loading the CA bundle again for each
    costs ~50 ms of CPU, most of a minute over a 1,000-item run."""
    made = []
    create = ssl.create_default_context
    monkeypatch.setattr(ssl, "create_default_context", lambda *a, **k: made.append(a) or create(*a, **k))
    evaluator.app.reply = [{"name": "correct", "score": 1.0}]
    assert main(["run", str(spec(tmp_path, evaluator.port)), "--store", str(tmp_path / "s"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["items"]["completed"] == 3
    assert len(evaluator.app.bodies) == 3 and len(made) <= 1, made
