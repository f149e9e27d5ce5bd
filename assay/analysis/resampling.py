"""The paired bootstrap's resampled means, computed exactly and fast (`assay.analysis.stats`
draws its intervals from them).

The bootstrap mean of a resample depends only on how many times each item is drawn, i.e. on a
``Multinomial(n, 1/n, ..., 1/n)`` count vector.

* A column with few *distinct* differences (binary scorers: ``d in {-1, 0, 1}``; graded judges
  on a 0.1 grid: a few dozen values) draws ``Multinomial(n, freq/n)`` over the distinct values for
  every resample at once and takes ``counts @ values / n``. This is exact, not an approximation:
  the counts of each distinct value under item resampling have exactly this distribution.
* Any other column draws item indices, but cheaply: ``n`` is split into blocks whose sizes are
  powers of two (at most 2^16), a ``Multinomial(n, size_b/n)`` draw says how many of a resample's
  ``n`` draws fall in each block, and a uniform index inside a block of size ``2^k`` is just ``k``
  random bits (16-bit words cut from the raw generator output; no rejection, no division). Every
  item is still drawn with probability exactly ``1/n``. Columns with the same rows share the
  index draws. One or two such columns are summed by a gather and a segmented sum per column
  (``take``, ``np.add.reduceat``); three or more by per-(resample, item) counts (``np.bincount``)
  and one BLAS matmul ``counts @ columns``, whose cost barely grows with the columns. Resamples
  are processed in chunks (bounded memory, reused buffers), each chunk with its own generator
  spawned from ``SeedSequence(seed)``, and the chunks run on a few threads (numpy releases the GIL),
  so the result does not depend on the thread count.
"""

from __future__ import annotations

import itertools
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]

# Largest index block: a uniform index inside it is one 16-bit word of raw generator output.
_MAX_BLOCK = 1 << 16
# Item draws per chunk of resamples (bounds memory: ~18 bytes per draw of the largest block, per
# worker thread), and the size from which the chunks are spread over threads.
_DRAWS_PER_CHUNK = 1 << 20
_THREADED_FROM_DRAWS = 1 << 23
# From this many columns sharing their rows, resampled sums are counts @ columns (one matmul)
# rather than a gather and a segmented sum per column.
_COUNTS_FROM_COLUMNS = 3
# Multinomial counts held at once on the distinct-values path (int64 each).
_COUNTS_PER_CHUNK = 1 << 21
# Threads for the index bootstrap; None = the CPUs this process may use. Tests set it.
_WORKERS: int | None = None


def multinomial_means(
    values: FloatArray, counts: NDArray[np.int64], resamples: int, seed: np.random.SeedSequence
) -> FloatArray:
    """Bootstrap means of a column with few distinct values: exact multinomial over the values."""
    n = int(counts.sum())
    rng = np.random.Generator(np.random.SFC64(seed))
    p = counts / n
    chunk = max(1, _COUNTS_PER_CHUNK // values.size)
    means = np.empty(resamples)
    for start in range(0, resamples, chunk):  # chunks of resamples, to bound memory
        stop = min(resamples, start + chunk)
        drawn = rng.multinomial(n, p, size=stop - start)
        means[start:stop] = (drawn @ values) / n
    return means


def blocks(n: int) -> NDArray[np.int64]:
    """n as a sum of powers of two no larger than _MAX_BLOCK, largest first."""
    full, rest = divmod(n, _MAX_BLOCK)
    sizes = [_MAX_BLOCK] * full + [
        1 << b for b in range(_MAX_BLOCK.bit_length() - 2, -1, -1) if rest >> b & 1
    ]
    return np.asarray(sizes, dtype=np.int64)


def index_bootstrap_means(
    columns: list[FloatArray], resamples: int, seed: np.random.SeedSequence
) -> list[FloatArray]:
    """Bootstrap means of columns over the same n rows, from shared item-index draws.

    Each of a resample's n draws picks an item with probability exactly 1/n: the numbers of draws
    per power-of-two block are Multinomial(n, size_b / n), and a draw inside a block of size 2^k
    is k uniform random bits. Chunks of resamples each get a generator spawned from ``seed``,
    so the result does not depend on how the chunks are spread over threads. The draws do not
    depend on the number of columns either; only how they are summed does (`_chunk_sums`).
    """
    n = columns[0].size
    sizes = blocks(n)
    bases = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    table = np.column_stack(columns) if len(columns) >= _COUNTS_FROM_COLUMNS else None
    per_chunk = max(1, _DRAWS_PER_CHUNK // n)
    starts = list(range(0, resamples, per_chunk))
    chunk_seeds = seed.spawn(len(starts))
    totals = np.empty((len(columns), resamples))

    def work(chunk_ids: range) -> None:
        scratch = _Scratch()
        for c in chunk_ids:
            start = starts[c]
            stop = min(resamples, start + per_chunk)
            totals[:, start:stop] = _chunk_sums(
                columns, table, sizes, bases, stop - start, chunk_seeds[c], scratch
            )

    workers = _workers(len(starts), n * resamples)
    if workers == 1:
        work(range(len(starts)))
    else:
        bounds = np.linspace(0, len(starts), workers + 1).round().astype(int)
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for future in [pool.submit(work, range(a, b)) for a, b in itertools.pairwise(bounds)]:
                future.result()
    return list(totals / n)


class _Scratch:
    """Buffers one worker reuses across chunks (fresh large arrays cost page faults)."""

    __slots__ = ("_buffers",)

    def __init__(self) -> None:
        self._buffers: dict[str, NDArray[Any]] = {}

    def get(self, name: str, size: int, dtype: type[np.generic]) -> NDArray[Any]:
        buffer = self._buffers.get(name)
        if buffer is None or buffer.size < size:
            buffer = self._buffers[name] = np.empty(size + size // 4, dtype=dtype)
        return buffer[:size]


def _chunk_sums(
    columns: list[FloatArray],
    table: FloatArray | None,
    sizes: NDArray[np.int64],
    bases: NDArray[np.int64],
    count: int,
    seed: np.random.SeedSequence,
    scratch: _Scratch,
) -> FloatArray:
    """Sums of ``count`` bootstrap resamples of each column: shape (len(columns), count).

    With ``table`` (the columns side by side, for three or more columns) the draws are counted
    per item and resample (`np.bincount`) and summed by one BLAS matmul, whose cost barely grows
    with the number of columns; otherwise each column gathers its drawn values (`take`) and sums
    them per resample (`np.add.reduceat`), cheaper for one or two columns.
    """
    n = columns[0].size
    rng = np.random.Generator(np.random.SFC64(seed))
    bits = rng.bit_generator
    per_block = rng.multinomial(n, sizes / n, size=count)  # (count, blocks): draws in each block
    sums = np.zeros((len(columns), count))
    segment_starts = np.zeros(count, dtype=np.intp)
    for b in range(sizes.size):
        drawn = per_block[:, b]
        total = int(drawn.sum())
        if total == 0:
            continue
        size, base = int(sizes[b]), int(bases[b])
        # `total` uniform offsets in [0, size): size is a power of two <= 2^16, so each is the low
        # bits of one 16-bit word of raw generator output. Resample r's draws are the r-th run of
        # drawn[r] offsets.
        words = bits.random_raw((total + 3) // 4).view(np.uint16)[:total]
        if size < _MAX_BLOCK:
            words = np.bitwise_and(words, np.uint16(size - 1))
        if table is not None:
            # Flat (resample, item) cells: counts[r, i] = times item i was drawn in resample r.
            cells = scratch.get("cells", total, np.intp)
            np.add(words, np.repeat(np.arange(count, dtype=np.intp) * size, drawn), out=cells)
            counts = scratch.get("counts", count * size, np.float64)
            np.copyto(counts, np.bincount(cells, minlength=count * size))
            sums += (counts.reshape(count, size) @ table[base : base + size]).T
            continue
        index = scratch.get("index", total + 1, np.intp)
        values = scratch.get("values", total + 1, np.float64)
        np.copyto(index[:total], words, casting="unsafe")
        index[total] = 0  # a sentinel, so reduceat's index `total` (empty trailing segments) is valid
        np.cumsum(drawn[:-1], out=segment_starts[1:])
        empty = drawn == 0
        for j, column in enumerate(columns):
            column[base : base + size].take(index, out=values)
            values[total] = 0.0
            segment = np.add.reduceat(values, segment_starts)
            segment[empty] = 0.0  # reduceat returns values[start] for an empty segment
            sums[j] += segment
    return sums


def _workers(chunks: int, draws: int) -> int:
    if _WORKERS is not None:
        return max(1, min(_WORKERS, chunks))
    if draws < _THREADED_FROM_DRAWS:
        return 1
    try:
        cpus = len(os.sched_getaffinity(0))  # the CPUs this process may run on (Linux)
    except AttributeError:
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, chunks, 8))
