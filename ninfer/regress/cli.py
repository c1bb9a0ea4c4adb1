"""``ninfer-regress``: bench (the main job), compare, baseline, report, shape-report.

Exit status everywhere: 0 pass, 1 regression (or a point that failed to run),
2 usage or environment error (no GPU, no baseline, unreadable file, another GPU model).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from .compare import EXIT_ERROR, EXIT_PASS, Comparison, compare, text_table
from .results import Results, ResultsError, load_baseline, load_results, write_json
from .stats import DEFAULT_ALPHA, DEFAULT_THRESHOLD

MIN_BASELINE_REPEAT = 50  # 50 a side keeps the interval of a 2 %-noise point within ±1.3 %


def _fraction(lo: float, hi: float) -> Any:
    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not lo < v < hi:
            raise argparse.ArgumentTypeError(f"expected {lo} < value < {hi}, got {v}")
        return v

    return parse


def _stat_args(ap: argparse.ArgumentParser) -> None:
    # Checked at parse time: a bad flag must not cost a whole GPU run first.
    ap.add_argument("--threshold", type=_fraction(0, 1), default=DEFAULT_THRESHOLD,
                    help="relative change that counts (default 0.05 = 5 %%)")  # fmt: skip
    ap.add_argument("--alpha", type=_fraction(0, 0.5), default=DEFAULT_ALPHA,
                    help="significance after Benjamini-Hochberg (default 0.01)")  # fmt: skip
    ap.add_argument("--strict", action="store_true", help="fail (exit 1) on unknown points too")
    ap.add_argument("--allow-missing", action="store_true",
                    help="baseline points absent from the new run do not fail the gate")  # fmt: skip


def _bench_args(ap: argparse.ArgumentParser, repeat: int) -> None:
    from ..bench.points import SUITE_NAMES

    ap.add_argument("--suite", choices=SUITE_NAMES, default="all")
    ap.add_argument("--repeat", type=int, default=repeat)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--baselines", type=Path, default=Path("baselines"))
    ap.add_argument("--runs", type=Path, default=Path("runs"))


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="ninfer-regress", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("bench", help="measure the suite, compare with baselines/<gpu>/")
    _bench_args(b, 20)
    _stat_args(b)
    b.add_argument("--no-plots", action="store_true")
    c = sub.add_parser("compare", help="compare two result files (baseline first)")
    c.add_argument("base", type=Path)
    c.add_argument("new", type=Path)
    c.add_argument("--markdown", type=Path, help="write the markdown report here")
    c.add_argument("--plots", type=Path, help="write PNG plots into this folder")
    _stat_args(c)
    s = sub.add_parser("baseline", help="re-measure (repeat >= 50) and write baselines/<gpu>/")
    _bench_args(s, MIN_BASELINE_REPEAT)
    s.add_argument("--reason", required=True, help="why the baseline changes (recorded)")
    s.add_argument("--from", dest="from_", type=Path, help="promote this results file instead")
    r = sub.add_parser("report", help="(re)write report.md and plots of a run folder")
    r.add_argument("run", type=Path, help="a run folder or its results.json")
    r.add_argument("--baseline", type=Path)
    _stat_args(r)
    sr = sub.add_parser("shape-report", help="per-shape report (seed 001) from sweep results")
    sr.add_argument("results", type=Path, nargs="+")
    sr.add_argument("--qtype", required=True)
    sr.add_argument("--n", type=int, required=True)
    sr.add_argument("--k", type=int, required=True)
    sr.add_argument("--policy", default="a16")
    sr.add_argument("--out", type=Path, required=True)
    return ap


def _write_report(
    run_dir: Path, new: Results, c: Comparison | None, plots: bool, note: str = ""
) -> Path:
    """compare.txt first, then the plots, then report.md: a plotting error never hides
    the verdicts, it becomes a line in the report."""
    from .report import markdown, run_markdown

    if c is not None:
        (run_dir / "compare.txt").write_text(c.summary() + "\n" + text_table(c) + "\n")
    paths: list[Path] = []
    if plots and new.points:
        try:
            from .plots import all_plots

            paths = all_plots(new, c, run_dir / "plots")
        except ImportError as e:  # matplotlib is the optional 'report' extra
            note += f"\n\n(plots skipped: {e}; pip install 'ninfer[report]')"
        except Exception as e:
            note += f"\n\n(plots failed: {type(e).__name__}: {e})"
    md = (markdown(c, paths, run_dir) if c else run_markdown(new)) + note
    out = run_dir / "report.md"
    out.write_text(md)
    return out


def _gate(c: Comparison) -> int:
    print(text_table(c, only_changed=True))
    for s in c.seams:
        q, pol, n, k = s.group
        print(
            f"new seam: {q} {pol} [{n},{k}] T {s.t_lo}->{s.t_hi}: {s.new_step:+.1%} "
            f"(baseline {s.base_step:+.1%})"
        )
    for f in c.failures:
        print(f"failed to run: {f['point']}: {f['error']}")
    print(c.summary())
    if c.fingerprint_changed:
        from .compare import refresh_hint

        print(refresh_hint(c))
    if c.undecided:
        print("no point could be decided (all unknown): not a pass")
    return c.exit_code


def cmd_compare(a: argparse.Namespace) -> int:
    base, new = load_results(a.base), load_results(a.new)
    c = compare(base, new, a.threshold, a.alpha, a.strict, a.allow_missing)
    rc = _gate(c)
    if a.markdown or a.plots:
        from .report import markdown

        paths: list[Path] = []
        if a.plots:
            from .plots import all_plots

            paths = all_plots(new, c, a.plots)
        if a.markdown:
            a.markdown.write_text(markdown(c, paths, a.markdown.parent))
    return rc


def _measure_or_exit(a: argparse.Namespace) -> tuple[Path, Results, Any]:
    from ..runtime.cupy_env import NoGPUError
    from .runner import detect_gpu, measure, new_run_dir

    try:
        gpu = detect_gpu(a.device)
    except NoGPUError as e:
        raise SystemExit(
            f"ninfer-regress: no GPU to measure on: {e}\n"
            "The benchmark needs an NVIDIA GPU with CuPy; without one, run nox -s tests."
        ) from e
    print(f"GPU: {gpu.name} -> baselines/{gpu.key}/")
    run_dir = new_run_dir(a.runs, a.suite)
    print(f"run folder: {run_dir}")
    rc, res_path = measure(run_dir, a.suite, a.repeat, a.warmup, a.device, [])
    if not res_path.exists():
        raise SystemExit(
            f"ninfer-regress: the benchmark wrote no results (exit {rc}); {run_dir}/run.log"
        )
    new = load_results(res_path)
    if new.doc["failures"]:
        print(f"{len(new.doc['failures'])} point(s) failed to run: see {run_dir}/run.log")
    return run_dir, new, gpu


def cmd_bench(a: argparse.Namespace) -> int:
    if a.repeat < 6:
        raise ResultsError(f"--repeat: expected >= 6 (the verdicts need 6 samples), got {a.repeat}")
    run_dir, new, gpu = _measure_or_exit(a)
    base_path = a.baselines / gpu.key / f"{a.suite}.json"
    if not base_path.exists():
        msg = (
            f"no baseline for {gpu.name} at {base_path}: measured, nothing compared.\n"
            f"Create one: nox -s baseline -- --suite {a.suite} --reason 'first baseline on "
            f"{gpu.key}' and commit {a.baselines}/{gpu.key}/"
        )
        _write_report(run_dir, new, None, not a.no_plots, "\n" + msg.replace("\n", "  \n"))
        print(msg)
        print(f"report: {run_dir}/report.md")
        return EXIT_ERROR
    c = compare(
        load_baseline(base_path, gpu.key), new, a.threshold, a.alpha, a.strict, a.allow_missing
    )
    rc = _gate(c)
    print(f"report: {_write_report(run_dir, new, c, not a.no_plots)}")
    return rc


def cmd_baseline(a: argparse.Namespace) -> int:
    reason = a.reason.strip()
    if len(reason) < 3:
        raise ResultsError(f"--reason: expected a sentence saying why, got {a.reason!r}")
    if a.from_:
        new = load_results(a.from_)
        key, name = new.gpu_key, new.env["gpu_name"]
        suite = new.doc.get("suite")
        if suite != a.suite:
            raise ResultsError(
                f"{a.from_}: measured suite {suite!r}, but --suite is {a.suite!r}; a baseline "
                "of a suite is promoted only from a run of that suite"
            )
    else:
        if a.repeat < MIN_BASELINE_REPEAT:
            raise ResultsError(
                f"--repeat: a baseline needs >= {MIN_BASELINE_REPEAT}, got {a.repeat}"
            )
        _, new, gpu = _measure_or_exit(a)
        key, name, suite = gpu.key, gpu.name, a.suite
    if new.timing["repeat"] < MIN_BASELINE_REPEAT:
        raise ResultsError(
            f"{new.path}: measured with repeat {new.timing['repeat']}, a baseline needs "
            f">= {MIN_BASELINE_REPEAT}"
        )
    if new.doc["failures"]:
        raise ResultsError(
            f"{new.path}: {len(new.doc['failures'])} point(s) failed; not a baseline"
        )
    from ..bench.points import load_suite

    want = {(p.qtype.value, p.policy.value, p.n, p.k, p.t) for p in load_suite(suite)}
    got = set(new.by_key())
    if want != got:
        raise ResultsError(
            f"{new.path}: expected the {len(want)} points of suite {suite!r}, got {len(got)} "
            f"({len(want - got)} missing, {len(got - want)} extra)"
        )
    short = [p for p in new.points if len(p["samples_us"]) < MIN_BASELINE_REPEAT]
    if short:
        raise ResultsError(
            f"{new.path}: a baseline needs >= {MIN_BASELINE_REPEAT} samples a point, got "
            f"{len(short[0]['samples_us'])} at {short[0]['qtype']} [{short[0]['n']},{short[0]['k']}]"
        )
    target = a.baselines / key / f"{suite}.json"
    old: Results | None = None
    if target.exists():
        try:
            old = load_baseline(target, key)
        except ResultsError as e:
            print(f"the old baseline is not readable ({e}); replacing it")
    env = new.env
    doc = dict(new.doc)
    doc["baseline"] = {
        "reason": reason,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "commit": env.get("commit"),
        "dirty": env.get("dirty"),
        "kernel_fingerprint": env["kernel_fingerprint"],
        "timing": new.timing,
        "source": str(new.path),
        "previous": None if old is None else {
            k: old.doc["baseline"].get(k) for k in ("commit", "kernel_fingerprint", "reason", "created")
        },
    }  # fmt: skip
    if env.get("dirty"):
        print("warning: measured on a working tree with uncommitted changes (recorded as dirty)")
    lines = [f"# Baseline {key}/{suite}", "", f"Reason: {reason}", "", f"GPU: {name}", ""]
    c: Comparison | None = None
    if old is not None:
        try:
            c = compare(old, Results(target, doc))
        except ResultsError as e:  # e.g. a deliberate change of the timing contract
            print(f"the old baseline is not comparable ({e}); replacing it")
            lines += [f"The old baseline is not comparable: {e}", ""]
    if c is not None:
        table = text_table(c)
        verdicts = c.summary().split(": ", 1)[1]
        print("old baseline vs new baseline:")
        print(table)
        print(f"old vs new: {verdicts}")
        lines += ["Old vs new:", "", "```", verdicts, table, "```", ""]
    elif old is None:
        lines += ["No previous baseline.", ""]
    write_json(target, doc)
    target.with_suffix(".md").write_text("\n".join(lines))
    print(f"wrote {target} ({len(new.points)} points) and {target.with_suffix('.md')}")
    return EXIT_PASS


def cmd_report(a: argparse.Namespace) -> int:
    path = a.run / "results.json" if a.run.is_dir() else a.run
    new = load_results(path)
    c = compare(load_results(a.baseline), new, a.threshold, a.alpha) if a.baseline else None
    out = _write_report(path.parent, new, c, True)
    print(f"wrote {out}")
    return EXIT_PASS


def cmd_shape_report(a: argparse.Namespace) -> int:
    from .shape_report import write_shape_report

    out = write_shape_report(
        [load_results(p) for p in a.results], a.qtype, a.policy, a.n, a.k, a.out
    )
    print(f"wrote {out}")
    return EXIT_PASS


COMMANDS = {
    "bench": cmd_bench,
    "compare": cmd_compare,
    "baseline": cmd_baseline,
    "report": cmd_report,
    "shape-report": cmd_shape_report,
}


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    try:
        return COMMANDS[args.cmd](args)
    except (ResultsError, ValueError, OSError) as e:
        print(f"ninfer-regress {args.cmd}: error: {e}", file=sys.stderr)
        return EXIT_ERROR
    except SystemExit as e:
        if isinstance(e.code, str):
            print(e.code, file=sys.stderr)
            return EXIT_ERROR
        raise
    except Exception as e:  # a crash is an environment error (2), never "regression" (1)
        import traceback

        traceback.print_exc()
        print(
            f"ninfer-regress {args.cmd}: internal error: {type(e).__name__}: {e}", file=sys.stderr
        )
        return EXIT_ERROR


if __name__ == "__main__":
    raise SystemExit(main())
