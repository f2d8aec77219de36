#!/usr/bin/env python3
"""The bounce sweep's table (bench/run-gpu.sh, RG_BOUNCE_SWEEP=1).

    bounce_sweep.py LOCAL.json OUT.md COMMIT CHUNK:THREADS=RUN.json...

Synchronous pageable copies over shm:// of each run (one bounce setting each:
REMOTE_GPU_BOUNCE_CHUNK, REMOTE_GPU_COPY_THREADS) by direction and size, in
GB/s and as a share of local pageable cudaMemcpy from the same run of
record's local run: the data that chooses host_bounce.c's defaults.
"""
import json
import sys


def pageable(path):
    try:
        run = json.load(open(path))
    except (OSError, ValueError):
        return {}
    return {(r["dir"], r["bytes"]): r["gbps"] for r in run.get("copy", [])
            if r.get("mem") == "pageable" and "gbps" in r}


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    local, out, commit = sys.argv[1:4]
    loc = pageable(local)
    sets = [(a.split("=", 1)[0], pageable(a.split("=", 1)[1])) for a in sys.argv[4:]]
    keys = sorted({k for _, r in sets for k in r})
    lines = [f"# shm pageable copies by bounce setting (commit {commit})", "",
             "Synchronous cudaMemcpy over shm://, GB/s (share of local pageable cudaMemcpy); "
             "columns: REMOTE_GPU_BOUNCE_CHUNK:REMOTE_GPU_COPY_THREADS.", "",
             "| copy | local | " + " | ".join(n for n, _ in sets) + " |",
             "|---|---|" + "---|" * len(sets)]
    for d, b in keys:
        base = loc.get((d, b))
        cells = []
        for _, r in sets:
            g = r.get((d, b))
            cells.append("-" if g is None else f"{g:.2f}" + (f" ({g / base:.0%})" if base else ""))
        lines.append(f"| {d} pageable {b >> 20} MiB | {'-' if base is None else f'{base:.2f}'} | "
                     + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n"
    open(out, "w").write(text)
    print(text)


if __name__ == "__main__":
    main()
