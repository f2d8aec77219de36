#!/usr/bin/env python3
"""Memory handed between tenants (issue 22 item 4): the clients and the report of
bench/two_tenants.sh's handover part (RG_TT_PARTS).

    handover.py hold --out F --gib N --ready-file F --stop-file F
    handover.py grab --out F --gib N --start-file F --done-file F
    handover.py report --dir D --out REPORT.md

hold (the batch tenant's PyTorch process): installs the release hook
(remote_gpu_set_release_hook -> torch.cuda.empty_cache()), fills the GPU but for
N GiB it keeps in PyTorch's caching allocator (allocated, then freed: reserved,
not in use) and a slack of 1 GiB, then waits for the stop file. Writes what the
hook saw: its calls, and the bytes PyTorch reserved before and after.
grab (the latency tenant's): initialised before hold fills the GPU, waits for the
start file, then allocates N GiB (torch.empty + synchronize): the device is full,
so the server asks hold's client to release, and the allocation is tried again.
Writes that time, and the time of the same allocation again once the memory is
free (the allocation alone, for comparison).
report: the figures of D (hold.json, grab.json, smi-handover.json) in markdown."""
import argparse
import ctypes
import json
import os
import time

GiB = 1 << 30
SLACK = GiB


def wait_file(path, secs=600):
    end = time.time() + secs
    while path and not os.path.exists(path) and time.time() < end:
        time.sleep(0.01)


def cmd_hold(a):
    import torch
    seen = {"calls": [], "reserved_before": [], "reserved_after": []}

    def release(_arg):
        seen["calls"].append(time.time())
        seen["reserved_before"].append(torch.cuda.memory_reserved())
        torch.cuda.empty_cache()
        seen["reserved_after"].append(torch.cuda.memory_reserved())

    hook = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(release)  # referenced until the end
    lib = ctypes.CDLL(None)
    installed = hasattr(lib, "remote_gpu_set_release_hook")
    if installed:
        lib.remote_gpu_set_release_hook(hook, None)
    torch.zeros(1, device="cuda")
    free, total = torch.cuda.mem_get_info()
    filler = torch.empty(max(0, free - a.gib * GiB - SLACK), dtype=torch.uint8, device="cuda")
    cached = torch.empty(a.gib * GiB, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    del cached  # back to the caching allocator: reserved, not in use
    info = {"hook_installed": installed, "total": total, "free_at_start": free, "filler": filler.numel(),
            "reserved": torch.cuda.memory_reserved(), "free_when_ready": torch.cuda.mem_get_info()[0]}
    open(a.ready_file, "w").close()
    wait_file(a.stop_file)
    info.update(seen)
    json.dump(info, open(a.out, "w"))


def cmd_grab(a):
    import torch
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    wait_file(a.start_file)
    r = {"gib": a.gib}
    t0 = time.time()
    try:
        x = torch.empty(a.gib * GiB, dtype=torch.uint8, device="cuda")
        torch.cuda.synchronize()
        r["handover_s"] = time.time() - t0
        del x
        torch.cuda.empty_cache()
        t1 = time.time()
        y = torch.empty(a.gib * GiB, dtype=torch.uint8, device="cuda")
        torch.cuda.synchronize()
        r["alone_s"] = time.time() - t1
        del y
    except RuntimeError as e:  # torch.OutOfMemoryError is one
        r["error"] = str(e).splitlines()[0]
        r["failed_after_s"] = time.time() - t0
    json.dump(r, open(a.out, "w"))
    open(a.done_file, "w").close()


def load(d, name):
    p = os.path.join(d, name)
    try:
        return json.load(open(p))
    except (OSError, ValueError):
        return None


def cmd_report(a):
    h, g, smi = load(a.dir, "hold.json"), load(a.dir, "grab.json"), load(a.dir, "smi-handover.json")
    tenants = {t["name"]: t for t in ((smi or {}).get("servers") or [{}])[0].get("tenants", [])}
    lines = ["# Memory handed between tenants: %s GiB from a batch PyTorch process's cache" % (g or {}).get("gib", "?"),
             ""]
    meta = os.path.join(a.dir, "meta.txt")
    if os.path.exists(meta):
        lines.append(open(meta).read())
    ok = bool(g and "handover_s" in g)
    if h:
        lines.append("- batch process: GPU total %.1f GiB, filled but for %.2f GiB; PyTorch reserved %.2f GiB "
                     "(the cached part not in use); hook installed: %s" %
                     (h["total"] / GiB, h["free_when_ready"] / GiB, h["reserved"] / GiB, h["hook_installed"]))
        for i, c in enumerate(h.get("calls", [])):
            lines.append("- hook call %d: PyTorch reserved %.2f GiB before empty_cache, %.2f GiB after" %
                         (i + 1, h["reserved_before"][i] / GiB, h["reserved_after"][i] / GiB))
    lines += ["", "| measure | value |", "|---|---|"]
    if ok:
        lines.append("| latency allocation with the handover (s) | %.3f |" % g["handover_s"])
        lines.append("| the same allocation on free memory (s) | %.3f |" % g["alone_s"])
        lines.append("| handover cost (s) | %.3f |" % (g["handover_s"] - g["alone_s"]))
    else:
        lines.append("| latency allocation | failed: %s |" % (g or {}).get("error", "did not run"))
    lat, bat = tenants.get("infer", {}), tenants.get("train", {})
    lines.append("| handovers asked / served / timed out (infer) | %s / %s / %s |" %
                 (lat.get("handovers"), lat.get("handovers_served"), lat.get("handover_timeouts")))
    lines.append("| bytes released (train, as the server counted) | %s (%.2f GiB) |" %
                 (bat.get("released_bytes"), (bat.get("released_bytes") or 0) / GiB))
    text = "\n".join(lines) + "\n"
    open(a.out, "w").write(text)
    print(text)
    print("handover: %s" % ("%.3f s for %s GiB (%.3f s on free memory)" % (g["handover_s"], g["gib"], g["alone_s"])
                            if ok else "FAILED: %s" % (g or {}).get("error", "did not run")))


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    files = {"hold": ("--out", "--ready-file", "--stop-file"), "grab": ("--out", "--start-file", "--done-file"),
             "report": ("--dir", "--out")}
    for name, flags in files.items():
        c = sub.add_parser(name)
        for f in flags:
            c.add_argument(f, required=True)
        if name != "report":
            c.add_argument("--gib", type=int, default=10)
    a = p.parse_args()
    {"hold": cmd_hold, "grab": cmd_grab, "report": cmd_report}[a.cmd](a)


if __name__ == "__main__":
    main()
