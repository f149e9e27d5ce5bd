"""Every command that reads one stored run takes the names `show` does: its id, a unique prefix of
it, or `latest` (`assay/cli/_runs.py`)."""

from __future__ import annotations

from tests.evaluators.test_llm_judge import judged_spec
from tests.helpers.cli import assay_json, assay_out


def test_rescore_resume_power_and_exports_take_latest_and_a_prefix(tmp_path, mock, capsys):
    mock.configure(answers={"*": "Score: 10"})
    store = tmp_path / "s"
    run_id = assay_json(capsys, "run", judged_spec(tmp_path, mock.base_url, n=3), "--store", store)["run_id"]
    prefix = run_id[:-2]

    assert assay_json(capsys, "power", "latest", "--mde", "0.1", "--store", store)
    assay_out(capsys, "requests", "export", prefix, "--store", store)
    refused = assay_out(capsys, "trajectories", "export", "latest", "--store", store, code=2).err
    assert "no run" not in refused and run_id in refused, refused
    resumed = assay_json(capsys, "resume", prefix, "--store", store)
    assert resumed["run_id"] == run_id
    rescored = assay_json(capsys, "rescore", "latest", "--scorer", "exact_match", "--store", store)
    assert rescored["source_run_id"] == run_id and rescored["run_id"] != run_id
    # Now the rescore is the newest run: `latest` names it.
    assert (
        assay_json(capsys, "rescore", "latest", "--scorer", "exact_match", "--store", store)["source_run_id"]
        == rescored["run_id"]
    )
