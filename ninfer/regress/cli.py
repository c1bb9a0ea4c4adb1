"""``ninfer-regress``: bench (the main job), compare, baseline, noise, report, shape-report.

Exit status everywhere: 0 pass, 1 regression (or a point that failed to run),
2 usage or environment error (no GPU, busy GPU, no baseline, unreadable file, another
GPU model, a confirmation that could not run).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..bench.args import HelpFormatter, count_arg
from ..formats.qtype import QType
from ..record import Results, ResultsError, key_str, load_baseline, load_results
from . import tune_cmd
from .baseline_cmd import cmd_baseline, is_sentence
from .compare import EXIT_ERROR, EXIT_PASS, Comparison, compare, text_table, with_confirmation
from .noise_cmd import cmd_noise
from .runner import BASELINE_ROUNDS, DEFAULT_ROUNDS, with_dispatch
from .session import busy_check as _busy_check
from .session import gpu_or_exit as _gpu_or_exit
from .session import measure_or_exit as _measure_or_exit
from .session import plan as _plan
from .session import repo as _repo
from .stats import DEFAULT_ALPHA, DEFAULT_THRESHOLD

__all__ = ["build_parser", "cmd_baseline", "is_sentence", "main"]
QTYPES = [q.value for q in QType]


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


def _seconds(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not 0 <= v < 86400:
        raise argparse.ArgumentTypeError(f"expected 0 <= seconds < 86400, got {v}")
    return v


def _stat_args(ap: argparse.ArgumentParser) -> None:
    # Checked at parse time: a bad flag must not cost a whole GPU run first.
    ap.add_argument("--threshold", type=_fraction(0, 1), default=DEFAULT_THRESHOLD,
                    help="relative change that counts (0.05 = 5 %%)")  # fmt: skip
    ap.add_argument("--alpha", type=_fraction(0, 0.5), default=DEFAULT_ALPHA,
                    help="significance after Benjamini-Hochberg over the points")  # fmt: skip
    ap.add_argument("--strict", action="store_true", help="fail (exit 1) on unknown points too")
    ap.add_argument("--allow-missing", action="store_true",
                    help="baseline points absent from the new run do not fail the gate")  # fmt: skip


def _bench_args(ap: argparse.ArgumentParser, rounds: int) -> None:
    from ..bench.points import SUITE_NAMES

    ap.add_argument("--suite", choices=SUITE_NAMES, default="all", help="the suite to measure")
    ap.add_argument("--rounds", type=count_arg(2), default=rounds,
                    help="rounds, each a fresh process with the points shuffled")  # fmt: skip
    ap.add_argument("--repeat", type=count_arg(1), default=20, help="samples per point and round")
    ap.add_argument("--warmup", type=count_arg(0), default=3, help="untimed calls per point")
    ap.add_argument("--device", type=count_arg(0), default=0, help="CUDA device index")
    ap.add_argument("--seed", type=count_arg(0), default=None,
                    help="order seed of the rounds (default: from the clock; recorded)")  # fmt: skip
    ap.add_argument("--baselines", type=Path, default=Path("baselines"),
                    help="folder of <gpu>/<suite>.json baselines")  # fmt: skip
    ap.add_argument("--runs", type=Path, default=Path("runs"),
                    help="where run folders <suite>_<timestamp>/ are made")  # fmt: skip
    ap.add_argument("--idle-wait", type=_seconds, default=120.0,
                    help="seconds to wait for a busy GPU to become idle")  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    from .ab import AB_ROUNDS

    ap = argparse.ArgumentParser(
        prog="ninfer-regress",
        description=(
            "The regression gate: measure the suite in rounds of fresh processes, compare\n"
            "with the committed baseline of this GPU model, confirm by an A/B on this GPU.\n"
            "ninfer-regress COMMAND --help shows a command's options. docs/regress.md."
        ),
        epilog=(
            "exit status: 0 pass, 1 regression (or a point that failed to run), 2 usage or\n"
            "environment error (no GPU, busy GPU, no baseline, unreadable file, another GPU\n"
            "model, a confirmation that could not run)."
        ),
        formatter_class=HelpFormatter,
    )
    sub = ap.add_subparsers(dest="cmd", required=True, title="commands", metavar="COMMAND")
    b = sub.add_parser(
        formatter_class=HelpFormatter,
        name="bench",
        help="measure the suite, compare with baselines/<gpu>/",
    )
    _bench_args(b, DEFAULT_ROUNDS)
    _stat_args(b)
    b.add_argument("--ab", metavar="REF",
                   help="instead: HEAD against REF, all points, interleaved on this GPU")  # fmt: skip
    b.add_argument("--qtype", action="append", choices=QTYPES, default=None,
                   help="with --ab: only this format's points (repeatable; default: all formats)")  # fmt: skip
    b.add_argument("--suite-file", type=Path, metavar="FILE",
                   help="with --ab: the points of this suite file (ninfer-bench --suite-file's "
                   "format, its suite named as the file) instead of --suite's")  # fmt: skip
    b.add_argument("--ab-rounds", type=count_arg(2), default=AB_ROUNDS,
                   help="rounds a side of an A/B")  # fmt: skip
    b.add_argument("--dispatch", type=Path, metavar="FILE",
                   help="with --ab: both sides under this dispatch override (ninfer-bench "
                   "--dispatch: a forced route, a route-table file), e.g. a route the "
                   "shipped table does not send these points to")  # fmt: skip
    b.add_argument("--fallback-ab", metavar="REF",
                   help="where this GPU has no baseline: an A/B against REF instead (CI: the "
                   "PR's merge-base)")  # fmt: skip
    b.add_argument("--no-confirm", action="store_true",
                   help="do not confirm points that are not 'same' by an A/B (report only)")  # fmt: skip
    b.add_argument("--no-plots", action="store_true", help="write the report without PNG plots")
    c = sub.add_parser(
        formatter_class=HelpFormatter,
        name="compare",
        help="compare two result files as separate runs (baseline first)",
    )
    c.add_argument("base", type=Path, help="the reference results file (a baseline, or side A)")
    c.add_argument("new", type=Path, help="the results file judged against it")
    c.add_argument("--same-runner", action="store_true",
                   help="the files are the two sides of one interleaved A/B")  # fmt: skip
    c.add_argument("--markdown", type=Path, help="write the markdown report here")
    c.add_argument("--json", type=Path, metavar="PATH",
                   help="write the verdicts as JSON here (the verdict.json schema; - for stdout)")  # fmt: skip
    c.add_argument("--plots", type=Path, help="write PNG plots into this folder")
    _stat_args(c)
    s = sub.add_parser(
        formatter_class=HelpFormatter,
        name="baseline",
        help="re-measure (more rounds) and write baselines/<gpu>/",
    )
    _bench_args(s, BASELINE_ROUNDS)
    s.add_argument("--reason", required=True, help="why the baseline changes: a sentence")
    s.add_argument("--from", dest="from_", type=Path, help="promote this results file instead")
    n = sub.add_parser(
        formatter_class=HelpFormatter,
        name="noise",
        help="measure where the noise lives (levels), or decompose records",
    )
    _bench_args(n, 4)
    n.add_argument(
        "--allocs", type=count_arg(1), default=2, help="allocations (rounds) per process"
    )
    n.add_argument("--memory", choices=["arena", "pool", "both"], default="both",
                   help="memory layouts to measure: one arena, a pool per group, or both")  # fmt: skip
    n.add_argument("--from", dest="from_", type=Path, nargs="+",
                   help="decompose these noise records together (several machines)")  # fmt: skip
    n.add_argument("--markdown", type=Path, help="write the table here")
    r = sub.add_parser(
        formatter_class=HelpFormatter,
        name="report",
        help="(re)write report.md and plots of a run folder",
    )
    r.add_argument("run", type=Path, help="a run folder or its results.json")
    r.add_argument(
        "--baseline",
        type=Path,
        help="compare with this baseline (without it: the run alone, or its A/B)",
    )
    _stat_args(r)
    tune_cmd.add_parser(sub, HelpFormatter, _bench_args)
    sr = sub.add_parser(
        "shape-report",
        formatter_class=HelpFormatter,
        help="one shape's report along T (routes, seams, plots) from --sweep results",
    )
    sr.add_argument("results", type=Path, nargs="+", help="results files of --sweep runs")
    sr.add_argument("--qtype", required=True, choices=QTYPES, help="the shape's format")
    sr.add_argument("--n", type=count_arg(1), required=True, help="output features")
    sr.add_argument("--k", type=count_arg(1), required=True, help="input features")
    sr.add_argument("--policy", default="a16", help="activation policy")
    sr.add_argument("--out", type=Path, required=True, help="folder for README.md and plots")
    return ap


def _write_report(
    run_dir: Path, new: Results, c: Comparison | None, plots: bool, note: str = ""
) -> Path:
    """compare.txt first, then the plots, then report.md: a plotting error never hides
    the verdicts, it becomes a line in the report."""
    from ..record import write_text_atomic
    from .report import markdown, run_markdown

    if c is not None:
        write_text_atomic(run_dir / "compare.txt", c.summary() + "\n" + text_table(c) + "\n")
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
    write_text_atomic(out, md)
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
    for miss in c.only_base:
        print(f"not measured (in the baseline, not in this run): {key_str(miss)}")
    for extra in c.only_new:
        print(f"new point (not in the baseline, not judged): {key_str(extra)}")
    print(c.summary())
    if c.fingerprint_changed and not c.same_runner:
        from .compare import refresh_hint

        print(refresh_hint(c))
    if c.compiler_changed and not c.same_runner:
        from .compare import compiler_hint

        print(compiler_hint(c))
    if c.undecided:
        print("no point could be decided (all unknown): not a pass")
    return c.exit_code


def cmd_compare(a: argparse.Namespace) -> int:
    base, new = load_results(a.base), load_results(a.new)
    c = compare(base, new, a.threshold, a.alpha, a.strict, a.allow_missing, a.same_runner)
    to_stdout = a.json is not None and str(a.json) == "-"
    rc = c.exit_code if to_stdout else _gate(c)  # JSON to stdout stands alone, for a pipe
    if a.json is not None:
        import json

        from ..record import write_text_atomic
        from . import verdict

        env = new.env
        doc = verdict.build(c, exit_code=rc, mode="ab" if a.same_runner else "compare",
                            gpu={"name": env.get("gpu_name", ""), "key": new.gpu_key})  # fmt: skip
        text = json.dumps(doc, indent=1) + "\n"
        if to_stdout:
            sys.stdout.write(text)
        else:
            write_text_atomic(a.json, text)
    if a.markdown or a.plots:
        from ..record import write_text_atomic
        from .report import markdown

        paths: list[Path] = []
        if a.plots:
            try:
                from .plots import all_plots

                paths = all_plots(new, c, a.plots)
            except ImportError as e:  # matplotlib is optional: the verdict and markdown stand
                print(f"plots skipped: {e} (pip install 'ninfer[report]')", file=sys.stderr)
        if a.markdown:
            write_text_atomic(a.markdown, markdown(c, paths, a.markdown.parent))
    return rc


def _confirm(a: argparse.Namespace, run_dir: Path, c: Comparison) -> Comparison:
    from .ab import AbError, run_ab

    todo = c.to_confirm()
    if not todo or a.no_confirm:
        return c
    ref = c.base.commit
    print(f"confirming {len(todo)} point(s) not 'same' by an A/B on this GPU: "
          f"{(ref or '?')[:12]} (A, the baseline's commit) against this checkout (B)")  # fmt: skip
    if ref is None:
        c.confirm_error = "the baseline records no commit to measure beside HEAD"
        return c
    try:
        plan = _plan(a, only=todo)
        A, B, _ = run_ab(run_dir, plan, a.ab_rounds, _repo(), ref, _busy_check(a))
    except AbError as e:
        c.confirm_error = str(e)
        return c
    ab = compare(A, B, a.threshold, a.alpha, same_runner=True)
    return with_confirmation(c, ab)


def cmd_bench(a: argparse.Namespace) -> int:
    if a.ab:
        return cmd_ab(a)
    if a.qtype:
        # A gate over part of the suite would pass on the points it never measured.
        raise ResultsError(f"--qtype {' '.join(a.qtype)}: expected with --ab only, got without")
    if a.suite_file is not None:
        # Baselines are kept per named suite: other points are an A/B's.
        raise ResultsError(f"--suite-file {a.suite_file}: expected with --ab only, got without")
    if a.dispatch is not None:
        # A gate or a baseline is the shipped dispatch's: an override is an experiment.
        raise ResultsError(f"--dispatch {a.dispatch}: expected with --ab only, got without")
    gpu = _gpu_or_exit(a)
    base_path = a.baselines / gpu.key / f"{a.suite}.json"
    if not base_path.exists() and a.fallback_ab:
        # Day one on a new GPU: no committed baseline, so the PR is judged by an A/B
        # against its merge-base on this runner (seed 003: the only comparison that holds).
        print(f"no baseline for {gpu.name} at {base_path}: an A/B against {a.fallback_ab}")
        a.ab = a.fallback_ab
        return cmd_ab(a, mode="ab-no-baseline", gpu=gpu)
    run_dir, new, gpu = _measure_or_exit(a, a.rounds, gpu)
    if not base_path.exists():
        msg = (
            f"no baseline for {gpu.name} at {base_path}: measured, nothing compared.\n"
            f"Create one: nox -s baseline -- --suite {a.suite} --reason 'first baseline on "
            f"{gpu.key}' and commit {a.baselines}/{gpu.key}/; or compare with a commit on "
            "this GPU: nox -s bench -- --ab main"
        )
        _write_report(run_dir, new, None, not a.no_plots, "\n" + msg.replace("\n", "  \n"))
        _verdict(run_dir, None, EXIT_ERROR, "none", gpu, msg.replace("\n", " "))
        print(msg)
        print(f"report: {run_dir}/report.md")
        return EXIT_ERROR
    c = compare(
        load_baseline(base_path, gpu.key), new, a.threshold, a.alpha, a.strict, a.allow_missing
    )
    c = _confirm(a, run_dir, c)
    rc = _gate(c)
    print(f"report: {_write_report(run_dir, new, c, not a.no_plots)}")
    _verdict(run_dir, c, rc, "baseline", gpu)
    return rc


def cmd_ab(a: argparse.Namespace, mode: str = "ab", gpu: Any = None) -> int:
    from ..bench.points import load_suite, load_suite_file
    from .ab import run_ab
    from .runner import new_run_dir

    # Checked before the GPU: a file's points, and its absolute path for side A's worktree.
    if a.suite_file is not None:
        points = load_suite_file(a.suite_file, a.suite_file.stem)
        suite, name = str(a.suite_file.resolve()), a.suite_file.stem
    else:
        points, suite, name = load_suite(a.suite), a.suite, a.suite
    gpu = gpu if gpu is not None else _gpu_or_exit(a)
    dispatch = _dispatch_doc(a.dispatch) if getattr(a, "dispatch", None) is not None else None
    run_dir = new_run_dir(a.runs, f"ab_{name}")
    print(f"run folder: {run_dir}; A = {a.ab}, B = this checkout; {a.ab_rounds} rounds a side")
    only = None
    if a.qtype:
        only = sorted({p.key for p in points if p.key.qtype in a.qtype})
        if not only:
            raise ResultsError(f"--qtype {' '.join(a.qtype)}: no point of suite {name} has it")
    plan = _plan(a, only=only, suite=suite)
    if dispatch is not None:  # both sides' rounds read one file, by its absolute path
        plan = with_dispatch(run_dir.resolve(), "ab", plan, dispatch)
    A, B, sha = run_ab(run_dir, plan, a.ab_rounds, _repo(), a.ab, _busy_check(a))
    c = compare(A, B, a.threshold, a.alpha, a.strict, a.allow_missing, same_runner=True)
    rc = _gate(c)
    print(f"report: {_write_report(run_dir, B, c, not a.no_plots)}")
    _verdict(run_dir, c, rc, mode, gpu, ab_ref=sha)
    return rc


def _dispatch_doc(path: Path) -> dict[str, Any]:
    """The override in ``path``, checked before any round. Side A runs in its worktree: a
    table file is given as an absolute path, so that both sides read this checkout's."""
    from ..bench.override import OverrideError, load

    try:
        doc, _ = load(path)
    except (OSError, OverrideError) as e:
        raise ResultsError(f"--dispatch {path}: {e}") from None
    if "table" in doc:
        doc = {**doc, "table": str(Path(doc["table"]).resolve())}
    return dict(doc)


def _verdict(
    run_dir: Path,
    c: Comparison | None,
    rc: int,
    mode: str,
    gpu: Any,
    message: str = "",
    ab_ref: str | None = None,
) -> None:
    """verdict.json beside report.md: what CI and the PR comment read (docs/ci.md)."""
    import json

    from ..record import write_text_atomic
    from . import verdict
    from .compare import refresh_hint

    refresh = refresh_hint(c) if c is not None and c.fingerprint_changed else ""
    if not isinstance(gpu, dict):
        gpu = {"name": gpu.name, "key": gpu.key}
    doc = verdict.build(c, exit_code=rc, mode=mode, gpu=gpu, message=message, ab_ref=ab_ref,
                        refresh=refresh)  # fmt: skip
    write_text_atomic(run_dir / "verdict.json", json.dumps(doc, indent=1) + "\n")


def cmd_report(a: argparse.Namespace) -> int:
    """report.md, compare.txt and verdict.json of a run folder, again. A gate's folder
    with ab/A.json and ab/B.json gets its A/B confirmation back; an --ab run's folder
    (no results.json) is its A/B."""
    run = a.run if a.run.is_dir() else a.run.parent
    ab = [run / "ab" / "A.json", run / "ab" / "B.json"]
    has_ab = all(p.exists() for p in ab)
    c, mode = None, "none"
    if (run / "results.json").exists() or not has_ab:
        new = load_results(run / "results.json" if a.run.is_dir() else a.run)
        if a.baseline:
            c, mode = compare(load_results(a.baseline), new, a.threshold, a.alpha), "baseline"
            if has_ab and c.to_confirm():
                A, B = (load_results(p) for p in ab)
                c = with_confirmation(c, compare(A, B, a.threshold, a.alpha, same_runner=True))
    else:
        A, new = (load_results(p) for p in ab)
        c, mode = compare(A, new, a.threshold, a.alpha, same_runner=True), "ab"
    out = _write_report(run, new, c, True)
    print(f"wrote {out}")
    if c is not None:
        gpu = {"name": str(new.env["gpu_name"]), "key": new.gpu_key}
        ref = c.base.commit if mode == "ab" else None
        _verdict(run, c, c.exit_code, mode, gpu, ab_ref=ref)
        print(f"wrote {run / 'verdict.json'}: {c.summary()}")
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
    "noise": cmd_noise,
    "report": cmd_report,
    "shape-report": cmd_shape_report,
    "tune": tune_cmd.cmd_tune,
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
