#!/usr/bin/env python3
"""The verdict rules of scripts/results on data made to hit each branch, so that
a page cannot say "holds" where the rule of docs/results/README.md#statistics
says "not resolved" (run by ctest, label docs):

- zoo: a model without a convergence entry, still learning, marked by the tool's
  verdict rule (early_training: not below the n-gram on its own bytes), or marked "has not
  learned context" gives no verdict, whatever its interval; a converged one
  that learned context gets one from the paired interval against the control,
  and "within noise" is never "holds";
- passkey: a verdict only where the tool's McNemar verdict says "beats";
- study: one window gives no verdict; several give one only where the tool's
  paired interval against none excludes 0.

    results_verdicts.py [ROOT]
"""
import copy
import importlib.machinery
import importlib.util
import pathlib
import sys

ROOT = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parents[2])
loader = importlib.machinery.SourceFileLoader("results", str(ROOT / "scripts" / "results"))
spec = importlib.util.spec_from_loader("results", loader)
results = importlib.util.module_from_spec(spec)
loader.exec_module(results)

checks = 0


def expect(what, got, want):
    global checks
    checks += 1
    if got != want:
        print(f"results verdicts: {what}: {got!r}, expected {want!r}")
        sys.exit(1)


def zoo_case(convergence, report_marks, row, interval, sign, early_training=None):
    """The verdict of a one-row zoo grid: `row` minus the control at 256 bytes is `interval`; early_training: the
    tool's verdict rule's entries, where the report has them."""
    data = {"seeds": [0, 1], "train_length": 128, "ngrams": [], "stride_divisor": 2,
            "models": [{"scheme": row.split()[0]}], "convergence": convergence}
    if early_training is not None:
        data["early_training"] = early_training
    marks = " **has not learned context**" if report_marks else ""
    report = ("| encoding | 128 (1×) | at L, minus the 5-gram |\n|---|---|---|\n"
              f"| {row} | 2.0 ±0.1 | +0.5 [+0.4, +0.6]{marks} |\n\n"
              "| encoding or method | 256 (2×) |\n|---|---|\n"
              f"| {row} | {interval[0]:+.3f} [{interval[1]:+.3f}, {interval[2]:+.3f}] |\n")
    grid = results.Grid("zoo", "zoo", "zoo", "The default schemes")
    return results.zoo_grid_evidence_from(grid, data, report, row, row.split()[0], sign)


converged = [{"scheme": "alibi", "converged": True}]
expect("zoo, no convergence check", zoo_case([], False, "alibi", (-0.2, -0.3, -0.1), 0).verdict, "not resolved")
expect("zoo, still learning", zoo_case([{"scheme": "alibi", "converged": False}], False, "alibi", (-0.2, -0.3, -0.1), 0)
       .verdict, "not resolved")
expect("zoo, has not learned context", zoo_case(converged, True, "alibi", (-0.2, -0.3, -0.1), 0).verdict,
       "not resolved")
expect("zoo, below the control beyond noise", zoo_case(converged, False, "alibi", (-0.2, -0.3, -0.1), 0).verdict,
       "holds")
expect("zoo, not below the n-gram on its own training bytes",
       zoo_case(converged, False, "alibi", (-0.2, -0.3, -0.1), 0,
                [{"scheme": "alibi", "reasons": ["not below the 5-gram on its training bytes beyond noise"]}]).verdict,
       "not resolved")
expect("zoo, the tool's rule passes it", zoo_case(converged, False, "alibi", (-0.2, -0.3, -0.1), 0, []).verdict,
       "holds")
expect("zoo, above the control beyond noise", zoo_case(converged, False, "alibi", (0.2, 0.1, 0.3), 0).verdict,
       "does not hold")
expect("zoo, within noise of the control", zoo_case(converged, False, "alibi", (0.0, -0.1, 0.1), 0).verdict,
       "not resolved")
expect("zoo, worse than the control as claimed", zoo_case(converged, False, "alibi", (0.2, 0.1, 0.3), +1).verdict,
       "holds")

pair = {"a": "self-extend", "b": "none", "trials": 12, "found_a": 9, "found_b": 2, "only_a": 7, "only_b": 0,
        "p_value": 0.0156, "verdict": "self-extend beats"}
passkey = {"train_length": 8192, "design": "independent", "trials": 12, "lengths": [10240],
           "summary": [], "comparisons": [{"length": 10240, "pairs": [pair]}]}
grid = results.Grid("passkey-independent", "passkey", "passkey", "Independent trials inside the training length")
expect("passkey, beats", [e.verdict for e in results.passkey_grid_evidence(grid, passkey, "self-extend", "none")],
       ["holds"])
within = copy.deepcopy(passkey)
within["comparisons"][0]["pairs"][0].update(verdict="within noise", p_value=0.07)
expect("passkey, within noise", [e.verdict for e in results.passkey_grid_evidence(grid, within, "self-extend", "none")],
       ["not resolved"])
inside = copy.deepcopy(passkey)
inside["comparisons"][0]["length"] = 4096
expect("passkey, inside L", results.passkey_grid_evidence(grid, inside, "self-extend", "none"), [])


def study(windows, excludes_zero, mean):
    methods = [{"method": m, "beyond": {"ppl": 20.0, "vs_none": {"mean": d, "low": d - 0.1, "high": d + 0.1,
                                                                 "excludes_zero": x}},
                "windows": [{"document": w % 3} for w in range(windows)]}
               for m, d, x in (("none", 0.0, False), ("ntk", mean, excludes_zero))]
    return {"train_length": 8192, "windows": windows, "texts": ["a", "b", "c"],
            "lengths": [{"length": 12288, "methods": methods, "comparisons": {}}]}


grid = results.Grid("study", "study", "study", "One window of one text (the main job's run)")
expect("study, one window", [e.verdict for e in results.study_grid_evidence(grid, study(1, True, -0.3), "ntk", -1)],
       ["not resolved"])
expect("study, six windows, beyond noise",
       [e.verdict for e in results.study_grid_evidence(grid, study(6, True, -0.3), "ntk", -1)], ["holds"])
expect("study, six windows, within noise",
       [e.verdict for e in results.study_grid_evidence(grid, study(6, False, -0.05), "ntk", -1)], ["not resolved"])
expect("study, six windows, against the claim",
       [e.verdict for e in results.study_grid_evidence(grid, study(6, True, 0.3), "ntk", -1)], ["does not hold"])

print(f"results verdicts: {checks} cases, each verdict as the rule says")
