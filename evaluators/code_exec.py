"""`code_exec`: run checks (shell commands) against the output, in a sandbox; score = the
fraction that passed (or 1/0 with `pass_fail`).

Where the checks run:
    attempt   in the attempt's own container, still alive (a `container` target): the eval's
              checks folder is at /assay/checks by then, the agent's work in /workspace
    fresh     in a new container of `image`: `files` (e.g. the tests) and the output, written to
              `output_file`, go into /workspace first — for code a model generated

A check that exits non-zero fails (it counts 0); a check past `timeout`, or a sandbox that
cannot be made, fails the scorer (outcome `failed`, the run goes on). When the agent damaged its
own container, `attempt` checks run in a fresh one over the exported workspace; the score's
metadata then says so (`verifier`). Every check's exit code
and output tails are kept in the score's metadata. The score is only ever what the checks' exit
codes say: no file an agent wrote is read as a score.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from assay.errors import CheckTimeout
from assay.evaluators._base import Sample, Score, Scorer, run_context

_TAIL = 2000


class CodeExec(Scorer):
    """Runs checks in a sandbox.

    Args:
        checks: shell commands (run by `sh -c` in /workspace), each one check.
        where: `attempt` (the attempt's live container) or `fresh` (a new container of `image`).
        image: the image of a fresh sandbox.
        files: a folder (relative to the spec) copied into a fresh sandbox's /workspace.
        output_file: where a fresh sandbox gets the output (a string), under /workspace.
        timeout: seconds each check may take.
        pass_fail: score 1 only when every check passes, else 0 (default: the fraction passed).
    """

    kind: Literal["code_exec"]
    checks: list[str] = Field(min_length=1)
    where: Literal["attempt", "fresh"] = "attempt"
    image: str | None = None
    files: str | None = None
    output_file: str = Field(default="solution.py", pattern=r"^[\w.\-/]+$")
    timeout: float = Field(default=60.0, gt=0, strict=True)
    pass_fail: bool = False

    operational: ClassVar[frozenset[str]] = frozenset({"gold_check", "timeout"})

    @model_validator(mode="after")
    def _fresh_needs_image(self) -> CodeExec:
        if self.where == "fresh" and not self.image:
            raise ValueError("where: fresh needs `image`")
        return self

    @property
    def makes_containers(self) -> bool:
        """A fresh sandbox is a container of the scorer's own (the attempt's is the target's)."""
        return self.where == "fresh"

    async def score(self, sample: Sample) -> Score:
        if self.where == "attempt":
            if sample.sandbox is None:
                raise RuntimeError("where: attempt needs a `container` target (no live sandbox here)")
            return await self._run_checks(sample.sandbox)
        from assay.sandbox import fresh_sandbox

        context = run_context.get()
        files: dict[str, bytes] = {}
        if self.files is not None:
            from assay.sandbox import folder_files

            files = folder_files((Path(context.spec_dir) / self.files).resolve())
        output = sample.output if isinstance(sample.output, str) else str(sample.output)
        files[self.output_file] = output.encode()
        async with fresh_sandbox(self.image or "", run_id=context.run_id, files=files) as sandbox:
            return await self._run_checks(sandbox)

    async def _run_checks(self, sandbox: Any) -> Score:
        results = []
        for check in self.checks:
            outcome = await sandbox.exec(["sh", "-c", check], timeout=self.timeout)
            results.append(
                {
                    "check": check,
                    "exit_code": outcome.exit_code,
                    "timed_out": outcome.timed_out,
                    "stdout": _tail(outcome.stdout),
                    "stderr": _tail(outcome.stderr),
                }
            )
            if outcome.timed_out:
                raise CheckTimeout(f"check {check!r} ran past {self.timeout:g}s", {"checks": results})
        passed = sum(1 for r in results if r["exit_code"] == 0)
        value = float(passed == len(results)) if self.pass_fail else passed / len(results)
        metadata: dict[str, Any] = {"checks": results, "passed": passed, "total": len(results)}
        # Where the checks ran when the attempt's own container could not be used (and why).
        if getattr(sandbox, "verifier", None):
            metadata["verifier"] = sandbox.verifier
        return Score(value, explanation=f"{passed}/{len(results)} checks passed", metadata=metadata)


def _tail(data: bytes) -> str:
    text = data.decode("utf-8", "replace")
    return text if len(text) <= _TAIL else "…" + text[-_TAIL:]
