"""`Store.read_artifact_head`: a kept file's first bytes and its whole size, in a local folder and
in an S3 bucket (moto on 127.0.0.1) — a file shorter than the limit whole, an empty one (which a
ranged GET would get a 416 for), a missing one `FileNotFoundError`."""

from __future__ import annotations

import pytest

from assay.store import Store

BIG = b"".join(b"line %05d\n" % i for i in range(50_000))  # 500 KB


@pytest.fixture(params=["local", "s3"])
def store(request, tmp_path) -> Store:
    if request.param == "local":
        return Store(tmp_path / "store")
    s3 = request.getfixturevalue("s3")
    return Store(s3.url(request.node.name.replace("[", "-").rstrip("]")))


def test_the_head_of_a_kept_file_and_its_size(store):
    for name, data in {"big.patch": BIG, "small.patch": b"+one\n", "empty.patch": b""}.items():
        store.location.write(f"artifacts/run_id=r/a/0/{name}", data)
    assert store.read_artifact_head("run_id=r/a/0/big.patch", 1000) == (BIG[:1000], len(BIG))
    assert store.read_artifact_head("run_id=r/a/0/small.patch", 1000) == (b"+one\n", 5)
    assert store.read_artifact_head("run_id=r/a/0/empty.patch", 1000) == (b"", 0)
    with pytest.raises(FileNotFoundError):
        store.read_artifact_head("run_id=r/a/0/gone.patch", 1000)
