"""``ninfer-regress``: bench (the main job), compare, baseline, noise, report, shape-report.

Exit status everywhere: 0 pass, 1 regression (or a point that failed to run),
2 usage or environment error (no GPU, busy GPU, no baseline, unreadable file, another
GPU model, a confirmation that could not run).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..bench.cli import count_arg
from ..record import Results, ResultsError, load_baseline, load_results
from .compare import EXIT_ERROR, EXIT_PASS, Comparison, compare, text_table, with_confirmation
from .runner import BASELINE_ROUNDS, DEFAULT_ROUNDS, RoundPlan
from .stats import DEFAULT_ALPHA, DEFAULT_THRESHOLD


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


def _bench_args(ap: argparse.ArgumentParser, rounds: int) -> None:
    from ..bench.points import SUITE_NAMES

    ap.add_argument("--suite", choices=SUITE_NAMES, default="all", help="(default all)")
    ap.add_argument("--rounds", type=count_arg(2), default=rounds,
                    help=f"rounds, each a fresh process (default {rounds})")  # fmt: skip
    ap.add_argument("--repeat", type=count_arg(1), default=20, help="samples a round (default 20)")
    ap.add_argument("--warmup", type=count_arg(0), default=3, help="(default 3)")
    ap.add_argument("--device", type=count_arg(0), default=0, help="(default 0)")
    ap.add_argument("--seed", type=count_arg(0), default=None,
                    help="order seed of the rounds (default: from the clock; recorded)")  # fmt: skip
    ap.add_argument("--baselines", type=Path, default=Path("baselines"))
    ap.add_argument("--runs", type=Path, default=Path("runs"))
    ap.add_argument("--idle-wait", type=float, default=120.0,
                    help="seconds to wait for a busy GPU to become idle (default 120)")  # fmt: skip


def _qtypes() -> list[str]:
    from ..formats import QType

    return [q.value for q in QType]


def build_parser() -> argparse.ArgumentParser:
    from .ab import AB_ROUNDS

    ap = argparse.ArgumentParser(prog="ninfer-regress", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("bench", help="measure the suite, compare with baselines/<gpu>/")
    _bench_args(b, DEFAULT_ROUNDS)
    _stat_args(b)
    b.add_argument("--ab", metavar="REF",
                   help="instead: HEAD against REF, all points, interleaved on this GPU")  # fmt: skip
    b.add_argument("--qtype", action="append", choices=_qtypes(), default=None,
                   help="with --ab: only this format's points (repeatable; default all)")  # fmt: skip
    b.add_argument("--ab-rounds", type=count_arg(2), default=AB_ROUNDS,
                   help=f"rounds a side of an A/B (default {AB_ROUNDS})")  # fmt: skip
    b.add_argument("--no-confirm", action="store_true",
                   help="do not confirm points that are not 'same' by an A/B (report only)")  # fmt: skip
    b.add_argument("--no-plots", action="store_true")
    c = sub.add_parser("compare", help="compare two result files as separate runs (baseline first)")
    c.add_argument("base", type=Path)
    c.add_argument("new", type=Path)
    c.add_argument("--same-runner", action="store_true",
                   help="the files are the two sides of one interleaved A/B")  # fmt: skip
    c.add_argument("--markdown", type=Path, help="write the markdown report here")
    c.add_argument("--plots", type=Path, help="write PNG plots into this folder")
    _stat_args(c)
    s = sub.add_parser("baseline", help="re-measure (more rounds) and write baselines/<gpu>/")
    _bench_args(s, BASELINE_ROUNDS)
    s.add_argument("--reason", required=True, help="why the baseline changes: a sentence")
    s.add_argument("--from", dest="from_", type=Path, help="promote this results file instead")
    n = sub.add_parser("noise", help="measure where the noise lives (levels), or decompose records")
    _bench_args(n, 4)
    n.add_argument("--allocs", type=count_arg(1), default=2, help="allocations a process (2)")
    n.add_argument("--memory", choices=["arena", "pool", "both"], default="both")
    n.add_argument("--from", dest="from_", type=Path, nargs="+",
                   help="decompose these noise records together (several machines)")  # fmt: skip
    n.add_argument("--markdown", type=Path, help="write the table here")
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
    print(c.summary())
    if c.fingerprint_changed and not c.same_runner:
        from .compare import refresh_hint

        print(refresh_hint(c))
    if c.undecided:
        print("no point could be decided (all unknown): not a pass")
    return c.exit_code


def cmd_compare(a: argparse.Namespace) -> int:
    base, new = load_results(a.base), load_results(a.new)
    c = compare(base, new, a.threshold, a.alpha, a.strict, a.allow_missing, a.same_runner)
    rc = _gate(c)
    if a.markdown or a.plots:
        from ..record import write_text_atomic
        from .report import markdown

        paths: list[Path] = []
        if a.plots:
            from .plots import all_plots

            paths = all_plots(new, c, a.plots)
        if a.markdown:
            write_text_atomic(a.markdown, markdown(c, paths, a.markdown.parent))
    return rc


def _gpu_or_exit(a: argparse.Namespace) -> Any:
    from ..runtime.cupy_env import NoGPUError
    from .runner import detect_gpu

    try:
        gpu = detect_gpu(a.device)
    except NoGPUError as e:
        raise SystemExit(
            f"ninfer-regress: no GPU to measure on: {e}\n"
            "The benchmark needs an NVIDIA GPU with CuPy; without one, run nox -s tests."
        ) from e
    print(f"GPU: {gpu.name} -> baselines/{gpu.key}/")
    return gpu


def _busy_check(a: argparse.Namespace) -> Any:
    """The idle check, before every round: another process on the GPU stops the run."""
    from ..bench.telemetry import busy_reason

    def check(log: Any) -> None:
        # Each check waits up to --idle-wait on its own: one deadline for the whole run
        # would turn the first busy reading after two minutes of rounds into a refusal.
        deadline = time.monotonic() + a.idle_wait
        while True:
            why = busy_reason(a.device)
            if why is None:
                return
            if time.monotonic() > deadline:
                raise SystemExit(
                    f"ninfer-regress: the GPU is busy ({why}); refusing to measure: timings "
                    "taken now would be wrong"
                )
            log.write(f"waiting: {why}\n")
            # Mostly the previous round's own tail in NVML's trailing utilization window
            # (measured: 2 of 63 checks in three gate runs on the H200), gone within a second.
            time.sleep(1.0)

    return check


def _plan(
    a: argparse.Namespace, only: list[Any] | None = None, extra: tuple[str, ...] = ()
) -> RoundPlan:
    if a.seed is None:
        a.seed = int(time.time()) % 1_000_000
    return RoundPlan(a.suite, a.repeat, a.warmup, a.device, a.seed, only, extra)


def _measure_or_exit(a: argparse.Namespace, rounds: int) -> tuple[Path, Results, Any]:
    from .runner import measure, new_run_dir

    gpu = _gpu_or_exit(a)
    run_dir = new_run_dir(a.runs, a.suite)
    print(f"run folder: {run_dir}")
    plan = _plan(a)
    codes, res_path = measure(run_dir, plan, rounds, _busy_check(a))
    if not res_path.exists():
        raise SystemExit(
            f"ninfer-regress: the benchmark wrote no results (exit {codes}); {run_dir}/run.log"
        )
    new = load_results(res_path)
    if new.doc["failures"]:
        print(f"{len(new.doc['failures'])} point(s) failed to run: see {run_dir}/run.log")
    return run_dir, new, gpu


def _repo() -> Path:
    from ..bench.env import checkout_root

    root = checkout_root()
    if root is None:
        raise ResultsError("not in a git checkout of ninfer: an A/B needs one (git worktree)")
    return root


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
    run_dir, new, gpu = _measure_or_exit(a, a.rounds)
    base_path = a.baselines / gpu.key / f"{a.suite}.json"
    if not base_path.exists():
        msg = (
            f"no baseline for {gpu.name} at {base_path}: measured, nothing compared.\n"
            f"Create one: nox -s baseline -- --suite {a.suite} --reason 'first baseline on "
            f"{gpu.key}' and commit {a.baselines}/{gpu.key}/; or compare with a commit on "
            "this GPU: nox -s bench -- --ab main"
        )
        _write_report(run_dir, new, None, not a.no_plots, "\n" + msg.replace("\n", "  \n"))
        print(msg)
        print(f"report: {run_dir}/report.md")
        return EXIT_ERROR
    c = compare(
        load_baseline(base_path, gpu.key), new, a.threshold, a.alpha, a.strict, a.allow_missing
    )
    c = _confirm(a, run_dir, c)
    rc = _gate(c)
    print(f"report: {_write_report(run_dir, new, c, not a.no_plots)}")
    return rc


def cmd_ab(a: argparse.Namespace) -> int:
    from .ab import run_ab
    from .runner import new_run_dir

    _gpu_or_exit(a)
    run_dir = new_run_dir(a.runs, f"ab_{a.suite}")
    print(f"run folder: {run_dir}; A = {a.ab}, B = this checkout; {a.ab_rounds} rounds a side")
    only = None
    if a.qtype:
        from ..bench.points import load_suite
        from ..record import PointKey

        keys = {PointKey(p.qtype.value, p.policy.value, p.n, p.k, p.t) for p in load_suite(a.suite)}
        only = sorted(k for k in keys if k.qtype in a.qtype)
        if not only:
            raise ResultsError(f"--qtype {' '.join(a.qtype)}: no point of suite {a.suite} has it")
    A, B, _ = run_ab(run_dir, _plan(a, only=only), a.ab_rounds, _repo(), a.ab, _busy_check(a))
    c = compare(A, B, a.threshold, a.alpha, a.strict, a.allow_missing, same_runner=True)
    rc = _gate(c)
    print(f"report: {_write_report(run_dir, B, c, not a.no_plots)}")
    return rc


def is_sentence(text: str) -> bool:
    """A reason a reviewer can read: three words or more, letters in it."""
    words = [w for w in text.split() if any(ch.isalpha() for ch in w)]
    return len(words) >= 3 and len(text.strip()) >= 15


def round_noise(p: dict[str, Any]) -> dict[str, Any]:
    """A point's between-round sd of log round medians (what a baseline stores)."""
    from ..record import kept_rounds

    v = np.log([float(np.median(r["samples_us"])) for r in kept_rounds(p)])
    # Robust like the verdicts (stats.py): one slow round must not set a point's noise.
    sd = float(1.4826 * np.median(np.abs(v - np.median(v)))) if v.size >= 2 else 0.0
    return {"round_sd": sd, "rounds": int(v.size)}


def cmd_baseline(a: argparse.Namespace) -> int:
    from ..bench.env import CODE_PATHS, git
    from ..bench.points import load_suite
    from ..record import pair_digest, write_pair
    from ..routes import fingerprint

    reason = a.reason.strip()
    if not is_sentence(reason):
        raise ResultsError(
            f"--reason: expected a sentence saying why the baseline changes (three words or "
            f"more), got {a.reason!r}"
        )
    head = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no", "--", *CODE_PATHS)
    if head is None:
        raise ResultsError("a baseline is made in a git checkout (its commit is recorded)")
    if status:
        raise ResultsError(
            "the working tree has uncommitted changes to the measured code; commit them "
            f"first (a baseline names the commit it measured):\n{status}"
        )
    if a.from_:
        new = load_results(a.from_)
        key, name = new.gpu_key, new.env["gpu_name"]
        suite = new.doc.get("suite")
        if suite != a.suite:
            raise ResultsError(
                f"{a.from_}: measured suite {suite!r}, but --suite is {a.suite!r}; a baseline "
                "of a suite is promoted only from a run of that suite"
            )
        if new.fingerprint != fingerprint() or new.commit != head or new.env.get("dirty"):
            raise ResultsError(
                f"{a.from_}: measured at commit {(new.commit or '?')[:12]} (kernels "
                f"{new.fingerprint}, dirty {new.env.get('dirty')}), but HEAD is {head[:12]} "
                f"(kernels {fingerprint()}): a baseline is HEAD's, measured clean"
            )
    else:
        _, new, gpu = _measure_or_exit(a, a.rounds)
        key, name, suite = gpu.key, gpu.name, a.suite
    rounds = len(new.rounds)
    if rounds < BASELINE_ROUNDS and not a.from_:
        print(f"note: {rounds} rounds; the default for a baseline is {BASELINE_ROUNDS}")
    if rounds < 2:
        raise ResultsError(f"{new.path}: {rounds} round(s); a baseline needs >= 2 to store noise")
    if new.doc["failures"]:
        raise ResultsError(
            f"{new.path}: {len(new.doc['failures'])} point(s) failed; not a baseline"
        )
    want = {p.key for p in load_suite(suite)}
    got = set(new.by_key())
    if want != got:
        raise ResultsError(
            f"{new.path}: expected the {len(want)} points of suite {suite!r}, got {len(got)} "
            f"({len(want - got)} missing, {len(got - want)} extra)"
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
    doc["points"] = [{**p, "noise": round_noise(p)} for p in new.points]
    doc["baseline"] = {
        "reason": reason,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "commit": env.get("commit"),
        "dirty": env.get("dirty"),
        "kernel_fingerprint": env["kernel_fingerprint"],
        "timing": new.timing,
        "rounds": rounds,
        "source": str(new.path),
        "previous": None if old is None else {
            k: old.doc["baseline"].get(k) for k in ("commit", "kernel_fingerprint", "reason", "created")
        },
    }  # fmt: skip
    sds = [p["noise"]["round_sd"] for p in doc["points"]]
    lines = [f"# Baseline {key}/{suite}", "", f"Reason: {reason}", "", f"GPU: {name}", "",
             f"Commit {env.get('commit')}, kernels {env['kernel_fingerprint']}, {rounds} rounds "
             f"(fresh processes) of {new.timing['repeat']} samples a point.", "",
             f"Between-round noise (sd of log round medians): median {np.median(sds):.2%}, "
             f"max {max(sds):.2%}.", ""]  # fmt: skip
    if old is not None:
        try:
            c = compare(old, Results(target, doc))
            print("old baseline vs new baseline:")
            print(text_table(c))
            lines += [
                "Old vs new (separate runs):",
                "",
                "```",
                c.summary(),
                text_table(c),
                "```",
                "",
            ]
        except ResultsError as e:  # e.g. a deliberate change of the timing contract
            print(f"the old baseline is not comparable ({e}); replacing it")
            lines += [f"The old baseline is not comparable: {e}", ""]
    else:
        lines += ["No previous baseline.", ""]
    lines += [f"Pair digest: `{pair_digest(doc)}` (the .json this file belongs to).", ""]
    write_pair(target, doc, target.with_suffix(".md"), "\n".join(lines))
    print(
        f"wrote {target} ({len(new.points)} points, {rounds} rounds) and {target.with_suffix('.md')}"
    )
    return EXIT_PASS


def cmd_noise(a: argparse.Namespace) -> int:
    from ..record import write_text_atomic
    from .noise import markdown
    from .runner import RoundPlan, Side, merge_rounds, new_run_dir, run_round, write_points

    if a.from_:
        groups: dict[str, list[Results]] = {}
        for p in a.from_:
            r = load_results(p)
            groups.setdefault(r.timing.get("memory", "arena"), []).append(r)
        main = groups.pop("arena", None) or groups.pop(next(iter(groups)))
        md = markdown(main, {f"{k} layout": v for k, v in groups.items()})
    else:
        _gpu_or_exit(a)
        run_dir = new_run_dir(a.runs, f"noise_{a.suite}")
        write_points(run_dir, a.suite)
        modes = ["arena", "pool"] if a.memory == "both" else [a.memory]
        check = _busy_check(a)
        paths: dict[str, list[Path]] = {m: [] for m in modes}
        seed = a.seed if a.seed is not None else int(time.time()) % 1_000_000
        with (run_dir / "run.log").open("a") as log:
            for i in range(a.rounds):
                for mode in modes if i % 2 == 0 else modes[::-1]:
                    check(log)
                    print(
                        f"process {i + 1}/{a.rounds} ({mode}, {a.allocs} allocations)", flush=True
                    )
                    plan = RoundPlan(a.suite, a.repeat, a.warmup, a.device, seed + 1000 * i,
                                     None, ("--allocs", str(a.allocs), "--memory", mode))  # fmt: skip
                    _, out = run_round(run_dir, plan, i, Side(mode), log)
                    paths[mode].append(out)
        res: dict[str, Results] = {}
        for m in modes:
            merged = merge_rounds(paths[m], run_dir / f"noise_{m}.json",
                                  ["ninfer-regress", "noise", m])  # fmt: skip
            if merged is None:
                raise ResultsError(f"noise: the {m} processes measured nothing; {run_dir}/run.log")
            res[m] = merged  # merge renumbers rounds; each keeps its process in its meta
        main = [res.get("arena") or next(iter(res.values()))]
        md = markdown(main, {f"{k} layout": [v] for k, v in res.items() if k != "arena"})
        print(f"noise records: {', '.join(str(run_dir / f'noise_{m}.json') for m in modes)}")
    print(md)
    if a.markdown:
        write_text_atomic(a.markdown, md)
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
    "noise": cmd_noise,
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
