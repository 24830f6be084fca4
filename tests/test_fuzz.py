"""The differential fuzzer's CI budget: a fixed sequence of drawn specs (fixed seed, no
example database), both backends, float64 and float32 eager, graph mode for about one spec
in six.  Every spec must compile and match the reference (a per-element accuracy shortfall
of a drawn formula is reported, not failed); rejections other than the deliberate reserved
names mean the strategy drew an invalid spec.  By hand: `python -m tests.fuzz --examples N
--seed S`."""

from tests import fuzz

CI_SEED = 20261203
CI_EXAMPLES = 4


def test_fuzz_budget(tmp_path):
    # names with a reported collision bug are left out (fuzz.KNOWN_COLLISIONS), and so are
    # empty variadic groups (fuzz.CI_MIN_RANK), for a reported bug of the reference evaluator;
    # a failure passes only if each of its problems is a reported bug (fuzz.KNOWN_BUGS)
    s = fuzz.fuzz(CI_EXAMPLES, seed=CI_SEED, graph_every=6, out=tmp_path, keep=("failed", "rejected"),
                  avoid=fuzz.KNOWN_COLLISIONS, min_rank=fuzz.CI_MIN_RANK)
    report = s.text()
    print(report)
    assert not s.unknown, report
    ran = s.counts["passed"] + s.counts["accuracy"]
    assert ran >= CI_EXAMPLES // 2, report  # most drawn specs are valid and run


def test_known_bugs_match_their_messages():
    """Each KNOWN_BUGS pattern matches the message the fuzzer saw, and not a clean mismatch."""
    seen = [
        ("fuzzed.yaml:1:7: error: internal compiler error (ValueError: tuple.index(x): x not in tuple); please "
        "report it with this spec [E900]"),
        ("case0 mindspore/float64/eager: value (none) off by 3.34e-08 (norm-wise) at element [1]: got -2.64, "
        "expected -2.64"),
    ]
    assert [fuzz.known_bug(m) is not None for m in seen] == [True] * len(seen)
    assert fuzz.known_bug("case0 paddle/float64/eager: value (none) off by 3.34e-08 (norm-wise)") is None
    assert fuzz.known_bug("case0 mindspore/float64/eager: value (none) off by 0.5 (norm-wise)") is None
    # fixed bugs are no longer tolerated
    assert fuzz.known_bug("fuzzed.yaml:45:22: error: formula: cannot build this expression (TypeError: Invalid "
                          "comparison of non-real Gather(w, margin, C)*Where(Eq(ArgMin(StopGradient) [E203]") is None
    assert fuzz.known_bug("case0 paddle/float64/eager: ValueError: argument 'x' (position 0) must be Tensor, "
                          "but got int") is None
    assert fuzz.known_bug("case1 jax/float64/eager: TypeError: cannot reshape array of shape (3, 3) (size 9)") is None


def test_rename_keeps_the_spec_valid():
    """Triage renames every name; the renamed spec must still compile (and `axis=` stays)."""
    from losscc.spec import spec_from_text

    plan = fuzz.Plan({"name": "fuzzed", "summary": "s.", "inputs": {
        "axis": {"dtype": "float", "shape": ["N", "C"]}, "d": {"dtype": "int", "shape": ["N"], "domain": "[0, C)"}},
        "formula": "t = log_softmax(axis, axis=C)[d]\nloss = -t\n"}, [({"axis": None, "d": None}, {}, {})])
    renamed = fuzz.rename(plan, {"axis": "n0", "d": "n1", "t": "n2", "loss": "n3"})
    assert renamed.doc["formula"] == "n2 = log_softmax(n0, axis=C)[n1]\nn3 = -n2\n"
    spec_from_text(fuzz.yaml.safe_dump(renamed.doc, sort_keys=False), "renamed.yaml")
    assert set(renamed.cases[0][0]) == {"n0", "n1"}
