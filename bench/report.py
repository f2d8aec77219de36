#!/usr/bin/env python3
"""Turn remote-bench's JSON files into the results report (bench/results/*.md, *.json).

    report.py --meta meta.json --local local.json [--remote remote.json] --md OUT.md --json OUT.json

local.json: remote-bench run without LD_PRELOAD (local CUDA and the TCP baselines);
remote.json: remote-bench --only cuda through libremote.so; meta.json: the machine
(written by run-gpu.sh). The targets (issue 2, item 8), over loopback on the GPU machine:
  round trip  <= 1.3 x raw TCP ping-pong (median)
  copies      >= 85 % of raw TCP stream throughput, every size >= 16 MiB
  launch rate >= 70 % of local CUDA
  TCP copies at 256 MiB >= 2x single stream (issue 20 item 2: striped copies; every
              kind of 256 MiB copy of the remote run against the TCP stream of 256 MiB)
With --stripes N=FILE (remote runs of `--only copy` with REMOTE_GPU_STRIPES=N, repeated)
the report adds a table of copy bandwidth by stripe count, from which the default
count was chosen.
With --transport shm (a remote run over shm://) the transport baselines are the shm
transport's own (shm_pingpong, shm_stream of the local run), and issue 20's targets
are judged too:
  round trip  <= 3 us (cudaStreamQuery median)
  copies      >= 80 % of local cudaMemcpy of the same kind, every size >= 16 MiB
Only the standard library: it runs on the GPU machine too.
"""
import argparse
import json
import os
import sys

RTT_TARGET = 1.3
COPY_TARGET = 0.85
COPY_MIN_BYTES = 16 << 20
LAUNCH_TARGET = 0.70
SHM_RTT_US = 3.0
SHM_LOCAL_TARGET = 0.80
STRIPE_TARGET = 2.0
STRIPE_BYTES = 256 << 20


def load(path):
    if not path or not os.path.exists(path):
        return None
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        print(f"report.py: {path}: {e}", file=sys.stderr)
        return None


def size_name(n):
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return f"{n >> 20} MiB"
    if n >= 1 << 10 and n % (1 << 10) == 0:
        return f"{n >> 10} KiB"
    return f"{n} B"


def fmt(v, spec=".2f", missing="-"):
    return missing if v is None else format(v, spec)


def ratio(a, b):
    if a is None or b is None or not b:
        return None
    return a / b


def rtt_rows(run):
    return {r["call"]: r for r in (run or {}).get("rtt", []) if "median_us" in r}


def copy_rows(run):
    return {(r["dir"], r["mem"], r["bytes"]): r for r in (run or {}).get("copy", [])
            if "gbps" in r}


def met_word(ok):
    return "not measured" if ok is None else ("**met**" if ok else "**not met**")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--meta", required=True)
    ap.add_argument("--local", required=True)
    ap.add_argument("--remote")
    ap.add_argument("--md", required=True)
    ap.add_argument("--json", required=True)
    ap.add_argument("--transport", choices=("tcp", "shm"), default="tcp",
                    help="the remote run's transport: which baselines of the local run apply")
    ap.add_argument("--stripes", action="append", default=[], metavar="N=FILE",
                    help="a remote --only copy run with REMOTE_GPU_STRIPES=N (repeat)")
    a = ap.parse_args()
    base = a.transport
    BASE = {"tcp": "TCP", "shm": "shm transport"}[base]

    meta = load(a.meta) or {}
    local = load(a.local)
    remote = load(a.remote)
    out = {"meta": meta, "targets": {"rtt_max_ratio": RTT_TARGET,
                                     "copy_min_ratio": COPY_TARGET,
                                     "copy_min_bytes": COPY_MIN_BYTES,
                                     "launch_min_ratio": LAUNCH_TARGET},
           "local": local, "remote": remote}
    verdict = {}
    md = []
    w = md.append

    title_gpu = meta.get("gpu_name") or ((local or {}).get("cuda") or {}).get("name") or "unknown GPU"
    w(f"# remote-bench: {meta.get('date', '?')}, {title_gpu}")
    w("")
    w(f"- GPU: {'; '.join(meta.get('gpus', [])) or title_gpu}, driver {meta.get('driver', '?')}")
    w(f"- CPU: {meta.get('cpu', '?')} ({meta.get('cpus', '?')} cores), kernel {meta.get('kernel', '?')}")
    w(f"- commit: `{meta.get('commit', 'unknown')}`")
    w(f"- command: `{meta.get('command', 'bench/run-gpu.sh')}`; remote = remote-gpud on the GPU, "
      "client with LD_PRELOAD=libremote.so in a mount namespace without the driver libraries "
      f"and /dev/nvidia*, over {'127.0.0.1 TCP' if base == 'tcp' else 'shm:// (a unix socket, rings in shared memory)'}")
    if meta.get("notes"):
        for n in meta["notes"]:
            w(f"- note: {n}")
    w("")

    # ---- round trip
    tcp_pp = (local or {}).get(f"{base}_pingpong") or {}
    tcp_med = tcp_pp.get("median_us")
    tcp_p99 = tcp_pp.get("p99_us")
    lr, rr = rtt_rows(local), rtt_rows(remote)
    rtt_out = []
    for call in ["cudaStreamQuery", "cudaDeviceSynchronize", "cudaMemcpy D2H 4 B"]:
        l, r = lr.get(call, {}), rr.get(call, {})
        rtt_out.append({"call": call, "local_median_us": l.get("median_us"),
                        "remote_median_us": r.get("median_us"), "remote_p99_us": r.get("p99_us"),
                        "tcp_median_us": tcp_med, "tcp_p99_us": tcp_p99,
                        "ratio_median": ratio(r.get("median_us"), tcp_med),
                        "ratio_p99": ratio(r.get("p99_us"), tcp_p99)})
    null = rtt_out[0]
    verdict["rtt"] = {"call": "cudaStreamQuery", "ratio": null["ratio_median"],
                      "met": None if null["ratio_median"] is None
                      else null["ratio_median"] <= RTT_TARGET}

    # ---- copies
    tcp_stream = {r["bytes"]: r for r in (local or {}).get(f"{base}_stream", [])}
    lc, rc = copy_rows(local), copy_rows(remote)
    order = {"H2D": 0, "D2H": 1, "pageable": 0, "pinned": 1}
    keys = sorted(set(lc) | set(rc), key=lambda k: (k[2], order.get(k[0], 9), order.get(k[1], 9)))
    copy_out = []
    for k in keys:
        d, m, b = k
        t = tcp_stream.get(b, {})
        rg = rc.get(k, {}).get("gbps")
        copy_out.append({"dir": d, "mem": m, "bytes": b, "local_gbps": lc.get(k, {}).get("gbps"),
                         "remote_gbps": rg, "tcp_stream_gbps": t.get("stream_gbps"),
                         "tcp_acked_gbps": t.get("acked_gbps"),
                         "ratio_stream": ratio(rg, t.get("stream_gbps")),
                         "ratio_acked": ratio(rg, t.get("acked_gbps"))})
    big = [c for c in copy_out if c["bytes"] >= COPY_MIN_BYTES]
    have = [c for c in big if c["ratio_stream"] is not None]
    missing = len(big) - len(have)
    if not remote:
        verdict["copy"] = {"ratio": None, "met": None, "why": "not run"}
    elif not have:
        verdict["copy"] = {"ratio": None, "met": False, "why": "no remote copy of 16 MiB or more"}
    else:
        worst = min(have, key=lambda c: c["ratio_stream"])
        verdict["copy"] = {"worst": worst, "ratio": worst["ratio_stream"], "missing": missing,
                           "met": missing == 0 and worst["ratio_stream"] >= COPY_TARGET}

    # ---- launch rate
    ll = (local or {}).get("launch") or {}
    rl = (remote or {}).get("launch") or {}
    lr_rate, rr_rate = ll.get("rate_per_s"), rl.get("rate_per_s")
    launch_ratio = ratio(rr_rate, lr_rate)
    verdict["launch"] = {"local_per_s": lr_rate, "remote_per_s": rr_rate, "ratio": launch_ratio,
                         "met": None if launch_ratio is None else launch_ratio >= LAUNCH_TARGET}
    if remote and verdict["rtt"]["met"] is None:
        verdict["rtt"]["met"] = False
    if remote and lr_rate is not None and verdict["launch"]["met"] is None:
        verdict["launch"]["met"] = False

    if base == "tcp":
        # striped copies (issue 20 item 2): each 256 MiB copy against one TCP stream
        at = [c for c in copy_out if c["bytes"] == STRIPE_BYTES and c["ratio_stream"] is not None]
        if at:
            worst = min(at, key=lambda c: c["ratio_stream"])
            verdict["stripes"] = {"worst": worst, "ratio": worst["ratio_stream"],
                                  "met": len(at) == 4 and worst["ratio_stream"] >= STRIPE_TARGET}
        else:
            verdict["stripes"] = {"ratio": None, "met": None if not remote else False}
    if base == "shm":
        q = null["remote_median_us"]
        verdict["shm_rtt"] = {"median_us": q, "met": None if q is None else q <= SHM_RTT_US}
        # judged per kind of host memory: pinned copies go through shared
        # regions (zero-copy), synchronous pageable ones of 1 MiB and more
        # through the channel's registered bounce region (one memcpy)
        for mem in ("pinned", "pageable"):
            big_m = [c for c in big if c["mem"] == mem]
            have_l = [c for c in big_m if c["remote_gbps"] is not None and c["local_gbps"]]
            if have_l:
                worst_l = min(have_l, key=lambda c: c["remote_gbps"] / c["local_gbps"])
                r_l = worst_l["remote_gbps"] / worst_l["local_gbps"]
                verdict[f"shm_copy_local_{mem}"] = {"worst": worst_l, "ratio": r_l,
                                                    "met": len(have_l) == len(big_m) and r_l >= SHM_LOCAL_TARGET}
            else:
                verdict[f"shm_copy_local_{mem}"] = {"ratio": None, "met": None if not remote else False}
    out["transport"] = base
    out["rtt"] = rtt_out
    out["copy"] = copy_out
    out["verdict"] = verdict

    # ---- markdown
    w("## Targets")
    w("")
    w("| target | measured | ratio | |")
    w("|---|---|---|---|")
    w(f"| null-call round trip <= {RTT_TARGET}x {BASE} ping-pong (median) | "
      f"cudaStreamQuery {fmt(null['remote_median_us'], '.1f')} us vs {BASE} {fmt(tcp_med, '.1f')} us | "
      f"{fmt(verdict['rtt']['ratio'], '.2f')}x | {met_word(verdict['rtt']['met'])} |")
    cv = verdict["copy"]
    if cv.get("worst"):
        c = cv["worst"]
        meas = (f"worst at >= 16 MiB: {c['dir']} {c['mem']} {size_name(c['bytes'])}, "
                f"{fmt(c['remote_gbps'])} vs {fmt(c['tcp_stream_gbps'])} GB/s")
        if cv.get("missing"):
            meas += f"; {cv['missing']} of {len(big)} copies missing"
    else:
        meas = cv.get("why", "-")
    w(f"| copy bandwidth >= {COPY_TARGET:.0%} of {BASE} stream, every size >= 16 MiB | {meas} | "
      f"{fmt(None if cv['ratio'] is None else 100 * cv['ratio'], '.0f')}% | {met_word(cv['met'])} |")
    w(f"| launch rate >= {LAUNCH_TARGET:.0%} of local | {fmt(rr_rate, ',.0f')}/s vs "
      f"{fmt(lr_rate, ',.0f')}/s | {fmt(None if launch_ratio is None else 100 * launch_ratio, '.0f')}% | "
      f"{met_word(verdict['launch']['met'])} |")
    if base == "tcp":
        sv = verdict["stripes"]
        c = sv.get("worst")
        meas = (f"worst: {c['dir']} {c['mem']}, {fmt(c['remote_gbps'])} vs {fmt(c['tcp_stream_gbps'])} GB/s "
                "(one stream)" if c else "-")
        w(f"| TCP copies at 256 MiB >= {STRIPE_TARGET:g}x single stream | {meas} | "
          f"{fmt(sv['ratio'], '.2f')}x | {met_word(sv['met'])} |")
    if base == "shm":
        sv = verdict["shm_rtt"]
        w(f"| shm round trip <= {SHM_RTT_US:g} us (cudaStreamQuery median) | {fmt(sv['median_us'])} us | - | "
          f"{met_word(sv['met'])} |")
        for mem, how in (("pinned", "shared regions, zero-copy"), ("pageable", "one memcpy, a bounce region")):
            lv = verdict[f"shm_copy_local_{mem}"]
            c = lv.get("worst")
            meas = (f"worst at >= 16 MiB: {c['dir']} {c['mem']} {size_name(c['bytes'])}, {fmt(c['remote_gbps'])} vs "
                    f"{fmt(c['local_gbps'])} GB/s local" if c else "-")
            w(f"| shm {mem} copies ({how}) >= {SHM_LOCAL_TARGET:.0%} of local {mem} cudaMemcpy, every size "
              f">= 16 MiB | {meas} | {fmt(None if lv['ratio'] is None else 100 * lv['ratio'], '.0f')}% | "
              f"{met_word(lv['met'])} |")
    w("")

    w(f"## Null-call round trip (us; ratio = remote / {BASE} ping-pong)")
    w("")
    w(f"{BASE} ping-pong, 64 B each way: median {fmt(tcp_med)} us, p99 {fmt(tcp_p99)} us.")
    w("")
    w("| call | local median | remote median | remote p99 | ratio median | ratio p99 |")
    w("|---|---|---|---|---|---|")
    for r in rtt_out:
        w(f"| {r['call']} | {fmt(r['local_median_us'])} | {fmt(r['remote_median_us'])} | "
          f"{fmt(r['remote_p99_us'])} | {fmt(r['ratio_median'])} | {fmt(r['ratio_p99'])} |")
    w("")

    w("## Copy bandwidth (GB/s = 1e9 B/s; sync cudaMemcpy, median copy)")
    w("")
    w(f"{BASE} stream: back-to-back messages; {BASE} acked: one reply per message, the shape of a "
      f"synchronous copy. Ratios are remote / {BASE}; `<` marks a ratio under "
      f"{COPY_TARGET:.0%}. A synchronous remote copy to the device whose bytes travel in frames returns "
      "once they are sent, as CUDA's from pageable memory returns once staged (over tcp every one; over shm "
      "those under 1 MiB, of pinned memory too: REMOTE_GPU_REGION_SYNC_MIN): small H2D rows can beat "
      "local CUDA, which waits for its DMA from pinned memory.")
    w("")
    w(f"| size | copy | local CUDA | remote | {BASE} stream | {BASE} acked | remote/stream | remote/acked |")
    w("|---|---|---|---|---|---|---|---|")

    def pct(v):
        if v is None:
            return "-"
        return f"{100 * v:.0f}%" + (" <" if v < COPY_TARGET else "")

    for c in copy_out:
        w(f"| {size_name(c['bytes'])} | {c['dir']} {c['mem']} | {fmt(c['local_gbps'])} | "
          f"{fmt(c['remote_gbps'])} | {fmt(c['tcp_stream_gbps'])} | {fmt(c['tcp_acked_gbps'])} | "
          f"{pct(c['ratio_stream'])} | {pct(c['ratio_acked'])} |")
    w("")

    sweep = []
    for spec in a.stripes:
        n, _, path = spec.partition("=")
        run = load(path)
        if run is not None:
            sweep.append((n, copy_rows(run)))
    if sweep:
        w("## Copy bandwidth by stripe count (GB/s; REMOTE_GPU_STRIPES, 0: one connection)")
        w("")
        sizes = sorted({k[2] for _, rows in sweep for k in rows})
        w("| size | copy | " + " | ".join(f"{n} stripes" for n, _ in sweep) + f" | {BASE} stream |")
        w("|---|---|" + "---|" * (len(sweep) + 1))
        for b in sizes:
            for d in ("H2D", "D2H"):
                for m in ("pageable", "pinned"):
                    cells = [fmt(rows.get((d, m, b), {}).get("gbps")) for _, rows in sweep]
                    w(f"| {size_name(b)} | {d} {m} | " + " | ".join(cells) +
                      f" | {fmt(tcp_stream.get(b, {}).get('stream_gbps'))} |")
        w("")
        out["stripe_sweep"] = {n: [{"dir": k[0], "mem": k[1], "bytes": k[2], "gbps": r["gbps"]}
                                   for k, r in rows.items()] for n, rows in sweep}

    w("## Launch rate (empty kernel, async, then one cudaDeviceSynchronize)")
    w("")
    w(f"- local: {fmt(lr_rate, ',.0f')} launches/s ({fmt(ll.get('us_per_launch'))} us each)")
    w(f"- remote: {fmt(rr_rate, ',.0f')} launches/s ({fmt(rl.get('us_per_launch'))} us each)")
    w("")

    errors = {}  # message -> how many times

    def err(msg):
        errors[msg] = errors.get(msg, 0) + 1

    for name, run in (("local", local), ("remote", remote)):
        if run is None:
            continue
        for k, v in run.items():
            if k.endswith("error"):
                err(f"{name}: {k}: {v}")
        if isinstance(run.get("cuda"), dict) and "error" in run["cuda"]:
            err(f"{name}: cuda: {run['cuda']['error']}")
        for sec in ("rtt", "copy"):
            for r in run.get(sec, []) if isinstance(run.get(sec), list) else []:
                if "error" in r:
                    what = r.get("call") or " ".join(x for x in (r.get("dir"), r.get("mem")) if x)
                    err(f"{name}: {sec}: {what + ': ' if what else ''}{r['error']}")
        if isinstance(run.get("launch"), dict) and "error" in run["launch"]:
            err(f"{name}: launch: {run['launch']['error']}")
    if remote is None:
        err("remote run: no results (see notes)")
    lines = [m + (f" ({n} times)" if n > 1 else "") for m, n in errors.items()]
    if lines:
        w("## Errors")
        w("")
        for e in lines:
            w(f"- {e}")
        w("")
    out["errors"] = lines

    with open(a.md, "w") as f:
        f.write("\n".join(md))
    with open(a.json, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
