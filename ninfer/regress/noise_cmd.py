"""``ninfer-regress noise``: the spread within a process and between processes, and the
arena against the pool layout (docs/regress.md, "Where the noise lives")."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from ..record import Results, ResultsError, load_results, write_text_atomic
from .compare import EXIT_PASS
from .runner import RoundPlan, Side, merge_rounds, new_run_dir, run_round, write_points
from .session import busy_check, gpu_or_exit


def cmd_noise(a: argparse.Namespace) -> int:
    from .noise import markdown  # scipy: loaded for this command only

    if a.from_:
        groups: dict[str, list[Results]] = {}
        for p in a.from_:
            r = load_results(p)
            groups.setdefault(r.timing.get("memory", "arena"), []).append(r)
        main = groups.pop("arena", None) or groups.pop(next(iter(groups)))
        md = markdown(main, {f"{k} layout": v for k, v in groups.items()})
    else:
        gpu_or_exit(a)
        run_dir = new_run_dir(a.runs, f"noise_{a.suite}")
        write_points(run_dir, a.suite)
        modes = ["arena", "pool"] if a.memory == "both" else [a.memory]
        check = busy_check(a)
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
