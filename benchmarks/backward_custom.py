"""Forward + backward time of the generated classes with the framework's autograd and with
losscc's symbolic backward (``backward: custom``), per spec, backend and mode.

    PYTHONPATH=. python benchmarks/backward_custom.py [--shape 512 1024] [--reps 15] mse l1 ...

Both variants are generated into a temporary folder from the current compiler; the median
of `reps` timed calls (after two warm-up calls) is printed in milliseconds, as the table in
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


def median_ms(fn, reps: int) -> float:
    fn()
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def bench_paddle(mod, spec, arrays, mode, reps):
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

    return median_ms(step, reps)


def bench_mindspore(mod, spec, arrays, mode, reps):
    import mindspore as ms

    cell = getattr(mod, spec.class_name)()
    vg = ms.value_and_grad(cell, grad_position=tuple(range(len(arrays))))
    if mode == "jit":
        vg = ms.jit(vg)
    ts = [ms.Tensor(a) for a in arrays]

    def step():
        _, g = vg(*ts)
        g[0].asnumpy()

    return median_ms(step, reps)


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
            for b, modes, bench in (("paddle", ("eager", "to_static"), bench_paddle),
                                    ("mindspore", ("pynative", "jit"), bench_mindspore)):
                for mode in modes:
                    t = {v: bench(load(out / f"{b}_{v}_{n}.py"), spec, arrays, mode, args.reps)
                         for v in ("autograd", "custom")}
                    print(f"| {n} | {b} | {mode} | {t['autograd']:.2f} | {t['custom']:.2f} | "
                          f"{t['custom'] / t['autograd']:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
