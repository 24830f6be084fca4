"""Limits on untrusted spec files, so that no spec can make the compiler run long.

Each limit has a name used in the error that reports it (``limit 'formula_chars'``);
``docs/errors.md`` lists them all.
"""

MAX_FILE_BYTES = 64 * 1024
MAX_FORMULA_CHARS = 4000
MAX_BINDINGS = 64
MAX_DEPTH = 40             # nesting depth of a formula expression
MAX_NODES = 2000           # expression nodes in one formula, as written
MAX_TREE = 20000           # nodes of the loss after inlining its bindings
MAX_TREE_DEPTH = 100       # nesting of the loss after inlining (the catalogue's deepest: 25)
MAX_REWRITTEN_TREE = 100000  # nodes of any node a rewrite or guard makes (log-cosh of log-cosh grows 5x a level)
MAX_EXPONENT = 64          # |integer exponent| in x**k
MAX_CALL_ARGS = 32         # arguments of one call (max, min, Piecewise pairs): Python nests at most ~200 brackets
MAX_RANK = 8               # axes per input
MAX_FIXED_SIZE = 64        # size of an axis of a fixed size (shape: [N, K=4])
MAX_FIXED_ELEMENTS = 4096  # product of a spec's fixed axis sizes
MAX_INPUTS = 32
MAX_PARAMS = 32
MAX_REDUCTIONS = 8         # entries of `reductions:` (each lowers the loss once more; the catalogue has 1 at most)
MAX_LEARNABLE_ELEMENTS = 4096
MAX_CASES = 200
MAX_REFERENCES = 8         # entries of `references:` (the catalogue has 2 at most)
MAX_CASE_ELEMENTS = 20000  # numbers in one case
MAX_REFERENCE_DPS = 500   # working digits of the reference evaluator (inputs up to |x| ~ 1000)
MAX_REFERENCE_GRAD_ELEMENTS = 256  # entries of one case whose gradients the reference computes
MAX_REFERENCE_WORK = 2_000_000_000  # additions the evaluator makes on one case x digits**2 / 40 (~40 s at most)
MAX_REFERENCE_SPEC_WORK = 20_000_000_000  # reference_work summed over one spec's cases in verify (catalogue: 2e9 a dtype)
MAX_CONDITION_SPEC_WORK = 400_000_000_000  # gradient-condition work over one spec's given cases (catalogue: 6.6e10 a dtype)
MAX_REFERENCE_SECONDS = 60  # wall-clock seconds of one evaluator, a backstop beside 'reference_work'
MAX_CASE_FILE_BYTES = 1 << 20   # one case or reference JSON file
MAX_JSON_DEPTH = 32        # nesting of a case file
MAX_YAML_NODES = 50000
MAX_YAML_DEPTH = 32        # nesting of YAML collections, block or flow
MAX_NAME_CHARS = 64
MAX_COMPOSE_DEPTH = 8      # specs calling specs, nested
MAX_SPEC_CALLS = 32        # spec calls in one formula
MAX_INLINED = 4000         # distinct nodes the spec calls of one spec inline, summed over its calls
MAX_TEXT_CHARS = 2000      # summary, docs

LIMITS = {
    name.lower()[4:]: value for name, value in dict(globals()).items() if name.startswith("MAX_")
}
