"""Forward + backward time of the generated classes with the framework's autograd and with
losscc's symbolic backward (``backward: custom``), per spec, backend and mode.

    PYTHONPATH=. python benchmarks/backward_custom.py [--shape 512 1024] [--reps 15] mse l1 ...

Both variants are generated into a temporary folder from the current compiler; the median
of `reps` timed calls (after two warm-up calls; the two variants timed in turn) is printed in milliseconds, as the table in
docs/backward.md ("Measurements").  Run by hand: the figures are for one machine.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def generate(names, out: Path) -> None:
    from losscc.backends import get
    from losscc.emit import compile_spec
    from losscc.spec import load_spec

    for n in names:
        spec = load_spec(ROOT / "specs" / f"{n}.yaml")
        for variant in ("autograd", "custom"):
            s = dataclasses.replace(spec, backward=variant)
            for b in ("paddle", "mindspore"):
                (out / f"{b}_{variant}_{n}.py").write_text(compile_spec(s, get(b)))


def load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = mod  # ms.jit reads the module's globals by name
    spec.loader.exec_module(mod)
    return mod


def interleaved(fns: dict, reps: int) -> dict:
    """Median ms of each step, the steps timed in turn (a busy machine slows them alike)."""
    for fn in fns.values():
        fn()
        fn()
    times: dict = {k: [] for k in fns}
    for _ in range(reps):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[k].append((time.perf_counter() - t0) * 1e3)
    return {k: statistics.median(v) for k, v in times.items()}


def step_paddle(mod, spec, arrays, mode):
    import paddle

    layer = getattr(mod, spec.class_name)()
    f = paddle.jit.to_static(layer, full_graph=True) if mode == "to_static" else layer
    ts = [paddle.to_tensor(a, stop_gradient=False) for a in arrays]

    def step():
        out = f(*ts)
        out.backward()
        float(ts[0].grad.sum())
        for t in ts:
            t.clear_grad()

    return step


def step_mindspore(mod, spec, arrays, mode):
    import mindspore as ms

    cell = getattr(mod, spec.class_name)()
    vg = ms.value_and_grad(cell, grad_position=tuple(range(len(arrays))))
    if mode == "jit":
        vg = ms.jit(vg)
    ts = [ms.Tensor(a) for a in arrays]

    def step():
        _, g = vg(*ts)
        g[0].asnumpy()

    return step


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("specs", nargs="+")
    ap.add_argument("--shape", type=int, nargs="+", default=[512, 1024])
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args(argv)
    import mindspore  # noqa: F401 - before paddle (both ship libdnnl)
    import numpy as np
    import paddle  # noqa: F401

    from losscc.spec import load_spec

    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        generate(args.specs, out)
        sys.path.insert(0, tmp)
        print("| spec | backend | mode | autograd ms | custom ms | custom / autograd |")
        print("|---|---|---|---|---|---|")
        for n in args.specs:
            spec = load_spec(ROOT / "specs" / f"{n}.yaml")
            required = [i for i in spec.inputs if not i.optional]
            arrays = [rng.uniform(0.05, 0.95, args.shape).astype("float32") for _ in required]
            for b, modes, make in (("paddle", ("eager", "to_static"), step_paddle),
                                   ("mindspore", ("pynative", "jit"), step_mindspore)):
                for mode in modes:
                    t = interleaved({v: make(load(out / f"{b}_{v}_{n}.py"), spec, arrays, mode)
                                     for v in ("autograd", "custom")}, args.reps)
                    print(f"| {n} | {b} | {mode} | {t['autograd']:.2f} | {t['custom']:.2f} | "
                          f"{t['custom'] / t['autograd']:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
