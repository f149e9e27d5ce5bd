"""The labelling page over a copy of the view's two runs, through HTTP in process: it draws the
sample `assay labels sample` draws; a posted label lands in the store's labels (read back through
`assay.store.labels`) and the agreement figures follow; a label of an output since changed shows
as stale; blind mode hides the judge; a label posted from another site is refused."""

from __future__ import annotations

import html
import re
import shutil
from pathlib import Path

import pytest

from assay.analysis.labelling import sample_tasks
from assay.store import Store
from assay.store.labels import read_labels, write_labels
from tests.view.conftest import client

ORIGIN = {"Origin": "http://127.0.0.1"}


@pytest.fixture
def store(view_runs, tmp_path) -> Path:
    copy = tmp_path / "store"
    shutil.copytree(view_runs["store"], copy)
    return copy


def _form(page: str) -> dict[str, str]:
    form = page[page.index('id="label-form"') :]
    form = form[: form.index("</form>")]
    found = re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', form)
    return {name: html.unescape(value) for name, value in found}


def test_the_page_shows_the_sample_labels_sample_draws(store, view_runs):
    run = view_runs["cand"]
    tasks = sample_tasks(Store(store), run, "judge", n=5, strategy="stratified", seed=3)
    with client(store) as http:
        shown = [
            http.get(
                f"/runs/{run}/labels",
                params={"scorer": "judge", "n": 5, "strategy": "stratified", "seed": 3, "i": i},
            )
            for i in range(len(tasks))
        ]
    assert [p.status_code for p in shown] == [200] * len(tasks)
    assert [_form(p.text)["item_id"] for p in shown] == [t["item_id"] for t in tasks]
    assert 'data-key="1"' in shown[0].text and 'data-key="0"' in shown[0].text  # a pass/fail scorer


def test_a_posted_label_is_stored_and_the_agreement_follows(store, view_runs):
    run = view_runs["cand"]
    params = {"scorer": "judge", "n": 4, "seed": 1, "labeller": "ana"}
    with client(store) as http:
        first = http.get(f"/runs/{run}/labels", params=params)
        assert 'id="no-agreement"' in first.text
        form = _form(first.text)
        answer = http.post(
            f"/runs/{run}/labels",
            data={**form, "value": "1", "note": "fine <b>"},
            headers=ORIGIN | {"HX-Request": "true"},
        )
        second = _form(answer.text)
        again = http.post(
            f"/runs/{run}/labels", data={**second, "value": "0"}, headers=ORIGIN, follow_redirects=False
        )
    assert answer.status_code == 200 and second["i"] == "1" and "i=1" in answer.headers["HX-Push-Url"]
    assert re.search(r'id="n-labelled">1<', answer.text)  # the swapped fragment holds the figures
    assert again.status_code == 303 and "i=2" in again.headers["location"]
    labels = read_labels(Store(store), run).sort("labelled_at").to_dicts()
    tasks = sample_tasks(Store(store), run, "judge", n=4, seed=1)
    assert [(r["item_id"], r["value"], r["labeller"], r["note"]) for r in labels] == [
        (tasks[0]["item_id"], 1.0, "ana", "fine <b>"),
        (tasks[1]["item_id"], 0.0, "ana", None),
    ]
    assert [r["output_hash"] for r in labels] == [tasks[0]["output_hash"], tasks[1]["output_hash"]]
    assert [r["inclusion_probability"] for r in labels] == [4 / 59, 4 / 59]  # 59 scored: q40 failed


def test_a_label_of_a_changed_output_shows_as_stale(store, view_runs):
    run = view_runs["cand"]
    task = sample_tasks(Store(store), run, "judge", n=3)[0]
    # What the store holds once the output a label judged has changed: another hash.
    write_labels(
        Store(store),
        run,
        [
            {
                **{k: task[k] for k in ("item_id", "trial", "scorer")},
                "value": 1.0,
                "labeller": "ana",
                "output_hash": "0" * 64,
            }
        ],
    )
    with client(store) as http:
        stale = http.get(f"/runs/{run}/labels", params={"scorer": "judge", "n": 3, "labeller": "ana"})
        other = http.get(f"/runs/{run}/labels", params={"scorer": "judge", "n": 3, "labeller": "bo"})
        refused = http.post(
            f"/runs/{run}/labels",
            data={**_form(stale.text), "output_hash": "0" * 64, "value": "1"},
            headers=ORIGIN,
        )
    assert 'id="stale"' in stale.text and 'id="labelled-count">0<' in stale.text
    assert 'id="current-label"' not in other.text
    assert refused.status_code == 400 and "output changed" in html.unescape(refused.text)
    assert read_labels(Store(store), run).height == 1


def test_blind_mode_hides_the_judge(store, view_runs):
    run = view_runs["cand"]
    params = {"scorer": "judge", "n": 3, "labeller": "ana"}
    with client(store) as http:
        seen = http.get(f"/runs/{run}/labels", params=params)
        http.post(f"/runs/{run}/labels", data={**_form(seen.text), "value": "1"}, headers=ORIGIN)
        open_ = http.get(f"/runs/{run}/labels", params=params)
        blind = http.get(f"/runs/{run}/labels", params={**params, "blind": "1"})
    assert (
        'id="judge-score"' in open_.text
        and "judged &lt;script&gt;" in open_.text
        and 'id="agreement"' in open_.text
    )
    assert 'id="blind"' in blind.text
    for hidden in ('id="judge-score"', "judged &lt;script&gt;", 'id="agreement"'):
        assert hidden not in blind.text
    assert _form(blind.text)["blind"] == "1"  # a label posted blind stays blind


@pytest.mark.parametrize(
    ("headers", "said"),
    [
        ({}, "Origin"),
        ({"Origin": "http://evil.example"}, "Origin"),
        ({"Origin": "http://127.0.0.1", "Sec-Fetch-Site": "cross-site"}, "Sec-Fetch-Site"),
        ({"Origin": "http://rebound.example", "Host": "rebound.example"}, "loopback"),
    ],
)
def test_a_label_from_elsewhere_is_refused(store, view_runs, headers, said):
    run = view_runs["cand"]
    with client(store) as http:
        form = _form(http.get(f"/runs/{run}/labels", params={"scorer": "judge", "n": 3}).text)
        answer = http.post(f"/runs/{run}/labels", data={**form, "value": "1"}, headers=headers)
    assert answer.status_code == 403 and said in answer.text
    assert read_labels(Store(store), run).height == 0


@pytest.mark.parametrize(
    ("change", "said"),
    [({"value": "2"}, "value '2'"), ({"value": "x"}, "value 'x'"), ({"item_id": "q1", "i": "0"}, "task 0")],
)
def test_a_bad_label_is_a_400_that_says_why(store, view_runs, change, said):
    run = view_runs["cand"]
    with client(store) as http:
        form = _form(http.get(f"/runs/{run}/labels", params={"scorer": "judge", "n": 3, "seed": 5}).text)
        if form["item_id"] == change.get("item_id"):
            change = {**change, "item_id": "q2"}
        answer = http.post(f"/runs/{run}/labels", data={**form, "value": "1", **change}, headers=ORIGIN)
    assert answer.status_code == 400 and said in html.unescape(answer.text)
    assert read_labels(Store(store), run).height == 0


def test_a_bad_sample_is_a_400(store, view_runs):
    run = view_runs["cand"]
    with client(store) as http:
        unknown = http.get(f"/runs/{run}/labels", params={"scorer": "nope"})
        past = http.get(f"/runs/{run}/labels", params={"scorer": "judge", "n": 3, "i": 3})
        no_scorer = http.get(f"/runs/{run}/labels")
    assert unknown.status_code == 400 and "no scores of scorer 'nope'" in html.unescape(unknown.text)
    assert past.status_code == 400 and "at most 2" in past.text
    assert no_scorer.status_code == 400 and "scorer" in no_scorer.text


def test_the_run_page_links_each_scorer_to_its_labelling(view_runs):
    run = view_runs["cand"]
    with client(view_runs["store"]) as http:
        page = http.get(f"/runs/{run}")
    assert f'href="/runs/{run}/labels?scorer=judge"' in page.text
