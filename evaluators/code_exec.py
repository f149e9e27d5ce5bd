"""`code_exec`: run checks (shell commands) against the output, in a sandbox; score = the
fraction that passed (or 1/0 with `pass_fail`).

Where the checks run:
    attempt   in the attempt's own container, still alive (a `container` target): the eval's
              checks folder is at /assay/checks by then, the agent's work in /workspace
    fresh     in a new container of `image`: `files` (e.g. the tests) and the output, written to
              `output_file`, go into /workspace first — for code a model generated

Per item: `checks`, a `files` folder's path and a `files` mapping's paths and contents are
templates over the item's fields (`{test}`, `{entry_point}`, `{field[key]}`; `{{` for a literal
brace), so each item brings its own tests — HumanEval's `test` and `check(entry_point)`, MBPP's
asserts, a SWE task's test command. A field's text goes in as it is, any other value as JSON. A
file's contents may also name `{output}`; a check may not (a model's output is no part of a shell
command: it is in `output_file`). A placeholder naming no field of the dataset is a spec error
before anything runs, naming the field and the nearest name (`Scorer.template_problems`), and an
item that lacks one, or whose folder is missing, a dataset error (`Scorer.item_problems`).

A check that exits non-zero fails (it counts 0); a check past `timeout`, or a sandbox that
cannot be made, fails the scorer (outcome `failed`, the run goes on). When the agent damaged its
own container, `attempt` checks run in a fresh one over the exported workspace; the score's
metadata then says so (`verifier`). Every check's exit code
and output tails are kept in the score's metadata. The score is only ever what the checks' exit
codes say: no file an agent wrote is read as a score.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from assay._templates import FieldValue, named_fields, template_problem, unknown_field
from assay.errors import CheckTimeout
from assay.evaluators._base import Sample, Score, Scorer, run_context

_TAIL = 2000
# More lines than this about items that cannot fill a template add nothing: the first show the pattern.
_MAX_PROBLEMS = 20


def _namespace(
    fields: dict[str, Any], annotations: dict[str, Any], input: Any, expected: Any
) -> dict[str, Any]:
    """What a template may name: the item's row, its annotations, `input` and `expected`."""
    return {**fields, **annotations, "input": input, "expected": expected}


def _fill(template: str, values: dict[str, Any]) -> str:
    return template.format_map({key: FieldValue(value, "") for key, value in values.items()})


def _relative(path: str) -> str | None:
    """Why `path` is no file below /workspace, or None."""
    parts = PurePosixPath(path).parts
    if not parts or path.startswith("/") or ".." in parts:
        return f"{path!r} is not a relative path below /workspace"
    return None


class CodeExec(Scorer):
    """Runs checks in a sandbox.

    Args:
        checks: shell commands (run by `sh -c` in /workspace), each one check; templates over
            the item's fields, e.g. `"{test_command}"`.
        where: `attempt` (the attempt's live container) or `fresh` (a new container of `image`).
        image: the image of a fresh sandbox.
        files: what a fresh sandbox gets in /workspace besides the output: a folder (relative to
            the spec; its path a template, e.g. `tests/{task_id}`), or a mapping of paths to
            contents, both templates, e.g. `{check.py: "{prompt}{output}\\n{test}\\ncheck({entry_point})"}`.
        output_file: where a fresh sandbox gets the output (a string), under /workspace.
        timeout: seconds each check may take.
        pass_fail: score 1 only when every check passes, else 0 (default: the fraction passed).
    """

    kind: Literal["code_exec"]
    checks: list[str] = Field(min_length=1)
    where: Literal["attempt", "fresh"] = "attempt"
    image: str | None = None
    files: str | dict[str, str] | None = None
    output_file: str = Field(default="solution.py", pattern=r"^[\w.\-/]+$")
    timeout: float = Field(default=60.0, gt=0, strict=True)
    pass_fail: bool = False

    operational: ClassVar[frozenset[str]] = frozenset({"gold_check", "timeout"})

    @field_validator("checks")
    @classmethod
    def _checks_are_templates(cls, checks: list[str]) -> list[str]:
        for n, check in enumerate(checks):
            if problem := template_problem(check, example="dataset field, e.g. {test_command}"):
                raise ValueError(f"checks.{n}: {problem} (write {{{{ and }}}} for a literal brace)")
            if "output" in named_fields(check):
                raise ValueError(
                    f"checks.{n}: a check cannot name {{output}}: a model's output is no part of a shell "
                    "command; read it from output_file"
                )
        return checks

    @field_validator("files")
    @classmethod
    def _files_are_templates(cls, files: str | dict[str, str] | None) -> str | dict[str, str] | None:
        for where, template in _file_templates(files):
            if problem := template_problem(template, example="dataset field, e.g. {test}"):
                raise ValueError(f"{where}: {problem} (write {{{{ and }}}} for a literal brace)")
            if not _shows_output(where) and "output" in named_fields(template):
                raise ValueError(f"{where}: a path cannot name {{output}}")
            if where.endswith(" (path)") and (problem := _relative(template)):
                raise ValueError(f"{where}: {problem}")
        return files

    @model_validator(mode="after")
    def _fresh_needs_image(self) -> CodeExec:
        if self.where == "fresh" and not self.image:
            raise ValueError("where: fresh needs `image`")
        if isinstance(self.files, dict) and self.output_file in self.files:
            raise ValueError(f"files names {self.output_file!r}, where the output goes (output_file)")
        return self

    @property
    def makes_containers(self) -> bool:
        """A fresh sandbox is a container of the scorer's own (the attempt's is the target's)."""
        return self.where == "fresh"

    def template_problems(self, names: set[str]) -> list[str]:
        """Each placeholder naming none of `names` (every field any item has), with its nearest."""
        known = names | {"input", "expected"}
        problems = []
        for where, template in self._templates():
            allowed = known | ({"output"} if _shows_output(where) else set())
            problems += [
                f"{where}: {unknown_field(name, allowed)}"
                for name in named_fields(template)
                if name not in allowed
            ]
        return problems

    def item_problems(self, items: list[Any], spec_dir: Path, where: str) -> list[str]:
        """Each item whose templates cannot be filled (a field it lacks, a key out of range), or
        whose `files` folder is missing; at most about 20 lines."""
        problems: list[str] = []
        for item in items:
            values = _namespace(item.fields, item.annotations, item.input, item.expected)
            try:
                self._checks(values)
                if self.where == "fresh":
                    self._files({**values, "output": ""}, spec_dir)
            except (KeyError, IndexError, TypeError, ValueError) as exc:
                problems.append(f"item {item.item_index} (id {item.item_id!r}): {where}.{_why(exc)}")
            if len(problems) >= _MAX_PROBLEMS:
                break
        return problems

    def fixture_files(self, items: list[Any], spec_dir: Path) -> list[Path]:
        """The files of the `files` folders the items' sandboxes get (their content is part of
        the run's identity)."""
        if not isinstance(self.files, str):
            return []
        folders = {_fill(self.files, _namespace(i.fields, i.annotations, i.input, i.expected)) for i in items}
        return sorted(
            path
            for folder in folders
            if (spec_dir / folder).is_dir()
            for path in (spec_dir / folder).rglob("*")
            if path.is_file() and not path.is_symlink()
        )

    def _templates(self) -> Iterator[tuple[str, str]]:
        yield from ((f"checks.{n}", check) for n, check in enumerate(self.checks))
        yield from _file_templates(self.files)

    def _checks(self, values: dict[str, Any]) -> list[str]:
        """The item's checks."""
        return [_located(f"checks.{n}", check, values) for n, check in enumerate(self.checks)]

    def _files(self, values: dict[str, Any], spec_dir: Path) -> dict[str, bytes]:
        """The item's files for a fresh sandbox (the output not yet among them)."""
        files: dict[str, bytes] = {}
        if isinstance(self.files, str):
            from assay.sandbox import folder_files

            folder = (spec_dir / _located("files", self.files, values)).resolve()
            if not folder.is_dir():
                raise ValueError(f"files: {self.files!r} is {str(folder)!r}, which is no folder")
            files = folder_files(folder)
        elif self.files is not None:
            for path, contents in self.files.items():
                name = _located(f"files.{path} (path)", path, values)
                if problem := _relative(name):
                    raise ValueError(f"files.{path} (path): {problem}")
                files[name] = _located(f"files.{path}", contents, values).encode()
        return files

    async def score(self, sample: Sample) -> Score:
        values = _namespace(sample.fields, sample.annotations, sample.input, sample.expected)
        checks = self._checks(values)
        if self.where == "attempt":
            if sample.sandbox is None:
                raise RuntimeError("where: attempt needs a `container` target (no live sandbox here)")
            return await self._run_checks(sample.sandbox, checks)
        from assay.sandbox import fresh_sandbox

        context = run_context.get()
        output = sample.output if isinstance(sample.output, str) else str(sample.output)
        files = self._files({**values, "output": output}, Path(context.spec_dir))
        files[self.output_file] = output.encode()
        async with fresh_sandbox(self.image or "", run_id=context.run_id, files=files) as sandbox:
            return await self._run_checks(sandbox, checks)

    async def _run_checks(self, sandbox: Any, checks: list[str]) -> Score:
        results = []
        for check in checks:
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


def _file_templates(files: str | dict[str, str] | None) -> Iterator[tuple[str, str]]:
    """Each template of `files`, named as a problem with it names it."""
    if isinstance(files, str):
        yield "files", files
    elif files is not None:
        for path, contents in files.items():
            yield f"files.{path} (path)", path
            yield f"files.{path}", contents


def _shows_output(where: str) -> bool:
    """A file's contents may name `{output}`; a check or a path may not."""
    return where.startswith("files.") and not where.endswith(" (path)")


def _located(where: str, template: str, values: dict[str, Any]) -> str:
    """`template` filled; a failure says which template it was."""
    try:
        return _fill(template, values)
    except KeyError as exc:
        raise KeyError(f"{where}: this item has no field {exc.args[0]!r}") from None
    except (IndexError, TypeError, ValueError) as exc:
        raise ValueError(f"{where}: {template!r} cannot be filled: {type(exc).__name__} {exc}") from None


def _why(exc: Exception) -> str:
    return str(exc.args[0]) if isinstance(exc, KeyError) else str(exc)


def _tail(data: bytes) -> str:
    text = data.decode("utf-8", "replace")
    return text if len(text) <= _TAIL else "…" + text[-_TAIL:]
