"""Performance benchmark of the generated losses against the frameworks' built-ins.

``python -m benchmarks`` (from the repository root, with the venv's python) times
forward+backward of every generated loss that has a MindSpore or Paddle built-in
counterpart, in eager and compiled mode, next to the built-in, a hand-written
version (Huber, focal) and the ``(x - y).sum()`` floor, measures peak memory and the
compiler's own wall time, and writes docs/benchmarks.json and docs/benchmarks.md.
``--quick`` runs a small smoke version and writes to /tmp/losscc-bench-quick/ (or
``--out``); ``--from-json docs/benchmarks.json`` re-renders the Markdown only.

Modules: :mod:`.cases` (inputs and which contenders exist), :mod:`.ms_impl` and
:mod:`.pd_impl` (the contender functions), :mod:`.timing` (the harness),
:mod:`.memory` (peak memory, one forked child per contender), :mod:`.compiler`
(losscc wall time), :mod:`.profile` (op-level profiles of the worst cases),
:mod:`.report` (targets, confirmation against a second run, JSON and Markdown),
:mod:`.fingerprint` (machine facts per run, ``python -m benchmarks.fingerprint``),
:mod:`.faults` (``python -m benchmarks.faults``: page faults and CPU time per call under
malloc, thread and allocator settings; not run by the main command); ``notes.md`` is the hand-written analysis
appended to the full run's Markdown; :mod:`.ops` (``python -m benchmarks.ops``, not
run by the main command) times single operators for the operator table.
"""
