#!/usr/bin/env python3
"""check_obs.py: the checks of run_obs.sh, one subcommand each. Prints what is
wrong, one problem a line, and exits 1 when anything is; exits 0 otherwise.

  stats JSON              REMOTE_GPU_STATS=*.json of `obs_counts counts`
  dump OUT                the remote_gpu_stats_dump(stdout) section of its stdout
  smi JSON PID PROG MEM   remote-smi --json: one session of client PID running
                          PROG holding MEM bytes
  nosession JSON          remote-smi --json: the server is there, no session
  metrics PORT MEM        GET /metrics: strict Prometheus text format, one session
                          holding MEM bytes; and the answers to bad requests
  promfile FILE           FILE parses as Prometheus text format (remote-smi --prometheus)
  trace ERR BINARY        REMOTE_GPU_TRACE=cudaMalloc=1,cudaMemcpy=2 of obs_counts
  trace_py ERR SCRIPT     REMOTE_GPU_TRACE=cudaMalloc=1 of trace_py.py
  logsync OUT SYNC        order of the lines of `obs_counts logsync` (2>&1); SYNC 1
                          when REMOTE_GPU_LOG_SYNC=1 was set
"""
import json
import math
import re
import socket
import subprocess
import sys

MIB = 1 << 20
problems = []


def want(cond, msg):
    if not cond:
        problems.append(msg)
    return cond


# ---- a strict parser of the Prometheus text exposition format 0.0.4 ----------

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r"[a-zA-Z_][a-zA-Z0-9_]*"
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}


def parse_value(s):
    if s in ("NaN", "+Inf", "-Inf", "Inf"):
        return float(s.replace("Inf", "inf").replace("NaN", "nan"))
    if not re.fullmatch(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?", s):
        raise ValueError("bad value %r" % s)
    return float(s)


def parse_labels(s, i, lineno):
    """s[i] is just after '{'; returns (labels, index after '}')."""
    labels = {}
    while True:
        if s[i] == "}":
            return labels, i + 1
        m = re.compile(LABEL).match(s, i)
        if not m:
            raise ValueError("line %d: bad label name at %r" % (lineno, s[i:i + 20]))
        name = m.group(0)
        i = m.end()
        if s[i:i + 2] != '="':
            raise ValueError("line %d: expected =\" after label %s" % (lineno, name))
        i += 2
        v = []
        while True:
            if i >= len(s):
                raise ValueError("line %d: unterminated label value" % lineno)
            c = s[i]
            if c == "\\":
                e = s[i + 1:i + 2]
                if e not in ("\\", '"', "n"):
                    raise ValueError("line %d: bad escape \\%s" % (lineno, e))
                v.append("\n" if e == "n" else e)
                i += 2
            elif c == '"':
                i += 1
                break
            elif c == "\n":
                raise ValueError("line %d: newline in label value" % lineno)
            else:
                v.append(c)
                i += 1
        if name in labels:
            raise ValueError("line %d: label %s twice" % (lineno, name))
        labels[name] = "".join(v)
        if s[i] == ",":
            i += 1
        elif s[i] != "}":
            raise ValueError("line %d: expected , or } after a label" % lineno)


def prom_parse(text):
    """Returns {family: {"type", "help", "samples": [(name, labels, value)]}}.
    Raises ValueError on anything the format does not allow."""
    if not text.endswith("\n"):
        raise ValueError("the text does not end with a newline")
    fams = {}
    order = []  # families in the order their lines appear: each must be one group
    series = set()
    cur = None
    for lineno, line in enumerate(text[:-1].split("\n"), 1):
        if line == "":
            raise ValueError("line %d: empty line" % lineno)
        if line.startswith("#"):
            m = re.fullmatch(r"# (HELP|TYPE) (%s) (.*)" % NAME, line)
            if not m:
                if line.startswith("# HELP") or line.startswith("# TYPE"):
                    raise ValueError("line %d: malformed %r" % (lineno, line))
                continue  # a comment
            kind, name, rest = m.groups()
            f = fams.setdefault(name, {"type": None, "help": None, "samples": []})
            if cur != name:
                if name in order:
                    raise ValueError("line %d: family %s appears in two groups" % (lineno, name))
                order.append(name)
                cur = name
            if kind == "TYPE":
                if rest not in TYPES:
                    raise ValueError("line %d: unknown type %r" % (lineno, rest))
                if f["type"] is not None or f["samples"]:
                    raise ValueError("line %d: TYPE of %s repeated or after its samples" % (lineno, name))
                f["type"] = rest
            else:
                if f["help"] is not None:
                    raise ValueError("line %d: HELP of %s repeated" % (lineno, name))
                if re.search(r"\\[^\\n]", rest):
                    raise ValueError("line %d: bad escape in HELP" % lineno)
                f["help"] = rest
            continue
        m = re.compile(NAME).match(line)
        if not m:
            raise ValueError("line %d: no metric name: %r" % (lineno, line))
        name = m.group(0)
        i = m.end()
        labels = {}
        if i < len(line) and line[i] == "{":
            labels, i = parse_labels(line + "\n", i + 1, lineno)
        rest = line[i:]
        m2 = re.fullmatch(r" (\S+)( -?\d+)?", rest)
        if not m2:
            raise ValueError("line %d: expected ' value [timestamp]' after %s: %r" % (lineno, name, rest))
        value = parse_value(m2.group(1))
        fam = name
        if fam not in fams:  # histogram/summary children
            for suffix in ("_bucket", "_sum", "_count"):
                if name.endswith(suffix) and name[: -len(suffix)] in fams:
                    fam = name[: -len(suffix)]
        f = fams.setdefault(fam, {"type": None, "help": None, "samples": []})
        if cur != fam:
            if fam in order:
                raise ValueError("line %d: family %s appears in two groups" % (lineno, fam))
            order.append(fam)
            cur = fam
        if f["type"] == "counter" and (value < 0 or math.isnan(value)):
            raise ValueError("line %d: counter %s is %r" % (lineno, name, value))
        key = (name, tuple(sorted(labels.items())))
        if key in series:
            raise ValueError("line %d: series %s%s twice" % (lineno, name, labels))
        series.add(key)
        f["samples"].append((name, labels, value))
    return fams


def check_prom_text(text, where):
    try:
        fams = prom_parse(text)
    except ValueError as e:
        want(False, "%s: not valid Prometheus text: %s" % (where, e))
        return None
    try:  # the reference parser too, when it is installed (python3-prometheus-client)
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:
        print("(prometheus_client not installed: strict parser only)")
    else:
        try:
            n = sum(len(f.samples) for f in text_string_to_metric_families(text))
            want(n == sum(len(f["samples"]) for f in fams.values()),
                 "%s: prometheus_client found %d samples, the strict parser %d" %
                 (where, n, sum(len(f["samples"]) for f in fams.values())))
        except Exception as e:  # noqa: BLE001 - any failure of the reference parser
            want(False, "%s: prometheus_client cannot parse it: %s" % (where, e))
    return fams


# ---- the checks ---------------------------------------------------------------

def rows(doc, name):
    return [f for f in doc["functions"] if f["function"] == name]


def check_stats(path):
    doc = json.load(open(path))
    funcs = {f["function"] for f in doc["functions"]}
    expect = {"cudaMalloc", "cudaFree", "cudaMemcpy", "cudaMemsetAsync", "__cudaLaunchKernel",
              "cudaDeviceSynchronize"}
    want(funcs == expect, "functions %s, expected %s" % (sorted(funcs), sorted(expect)))
    for f in doc["functions"]:
        want(f["library"].endswith("/obs_counts"), "%s: called from %s, not obs_counts" %
             (f["function"], f["library"]))
        want(f["calls"] >= f["timed_calls"], "%s: more timed calls than calls" % f["function"])
        want(f["max_us"] <= f["total_us"] + 0.001 and f["mean_us"] <= f["max_us"] + 0.001,
             "%s: times inconsistent: %s" % (f["function"], f))

    def one(name):
        r = rows(doc, name)
        want(len(r) == 1, "%s: %d rows, expected 1" % (name, len(r)))
        return r[0] if r else {"calls": -1, "round_trips": -1, "bytes_sent": -1, "bytes_received": -1,
                               "timed_calls": -1}

    m = one("cudaMalloc")
    want(m["calls"] == 7 and m["timed_calls"] == 7, "cudaMalloc: %d calls (%d timed), expected 7" %
         (m["calls"], m["timed_calls"]))
    # the first call of the process also makes the handshake (hello)
    want(m["round_trips"] == 8, "cudaMalloc: %d round trips, expected 7 + the handshake" % m["round_trips"])
    f = one("cudaFree")
    want(f["calls"] == 7 and f["round_trips"] == 7, "cudaFree: %d calls, %d round trips, expected 7, 7" %
         (f["calls"], f["round_trips"]))
    c = one("cudaMemcpy")
    want(c["calls"] == 4, "cudaMemcpy: %d calls, expected 4" % c["calls"])
    want(c["round_trips"] == 2, "cudaMemcpy: %d round trips, expected 2 (the copies back)" % c["round_trips"])
    # 2 x 1 MiB out plus 4 request frames (header 24 B + a short message each)
    want(2 * MIB + 4 * 24 < c["bytes_sent"] <= 2 * MIB + 4 * 128,
         "cudaMemcpy: %d bytes sent, expected 2 MiB + 4 frames" % c["bytes_sent"])
    want(2 * MIB + 2 * 24 < c["bytes_received"] <= 2 * MIB + 2 * 64,
         "cudaMemcpy: %d bytes received, expected 2 MiB + 2 reply frames" % c["bytes_received"])
    s = one("cudaMemsetAsync")
    want(s["calls"] == 4 and s["round_trips"] == 0 and s["bytes_received"] == 0,
         "cudaMemsetAsync: %s, expected 4 calls, no round trip, nothing received" % s)
    want(4 * 24 < s["bytes_sent"] <= 4 * 128, "cudaMemsetAsync: %d bytes sent" % s["bytes_sent"])
    k = one("__cudaLaunchKernel")
    want(k["calls"] == 10, "launches: %d calls, expected 10" % k["calls"])
    # launches are async; the first loads the module (and may upload it)
    want(1 <= k["round_trips"] <= 2, "launches: %d round trips, expected the module load only" %
         k["round_trips"])
    d = one("cudaDeviceSynchronize")
    want(d["calls"] == 1 and d["round_trips"] == 1, "cudaDeviceSynchronize: %s" % d)
    want(doc["threads"] == 2, "threads: %s, expected 2" % doc["threads"])
    devs = doc["devices"]
    want(len(devs) == 1, "devices: %s" % devs)
    if devs:
        want(devs[0]["peak"] == 3 * MIB + 4096, "peak device memory %d, expected 3 MiB + 4 KiB" % devs[0]["peak"])
        want(devs[0]["current"] == 0 and devs[0]["live_allocations"] == 0,
             "device memory at exit: %s, expected none" % devs[0])


def check_dump(path):
    text = open(path).read()
    m = re.search(r"^--- dump\n(.*?)^--- end$", text, re.S | re.M)
    if not want(m, "no remote_gpu_stats_dump output between --- dump and --- end"):
        return
    body = m.group(1)
    want("remote-gpu statistics on demand" in body, "the dump has no title")
    r = re.search(r"^cudaMalloc\s+obs_counts\s+(\d+)\s+(\d+)", body, re.M)
    want(r and r.group(1) == "7" and r.group(2) == "8",
         "the dump's cudaMalloc row: %s" % (r.group(0) if r else "missing"))
    want(re.search(r"^device 0 \(.*\): memory now 3\.0 MiB, peak 3\.0 MiB; 3 live allocations", body, re.M),
         "the dump's memory line is wrong:\n" + body)


def check_smi(path, pid, prog, mem):
    doc = json.load(open(path))
    servers = doc["servers"]
    if not want(len(servers) == 1, "remote-smi found %d servers, expected 1" % len(servers)):
        return
    s = servers[0]
    want(s.get("alive") is True, "server not alive: %s" % s)
    want(s.get("device", {}).get("name") == "remote-gpu fake device", "device: %s" % s.get("device"))
    sess = s["sessions"]
    if not want(len(sess) == 1, "%d sessions, expected 1: %s" % (len(sess), sess)):
        return
    x = sess[0]
    want(x["state"] == "running", "session state %s" % x["state"])
    want(x.get("client_pid") == int(pid), "client pid %s, expected %s" % (x.get("client_pid"), pid))
    want(x.get("program", "").split(" ")[0].endswith(prog), "program %r, expected ...%s" % (x.get("program"), prog))
    want(x.get("client_host") == socket.gethostname()[:63], "client host %r, expected %r" %
         (x.get("client_host"), socket.gethostname()))
    want(x["memory"] == int(mem) and x["memory_peak"] == int(mem),
         "memory %d (peak %d), expected %s" % (x["memory"], x["memory_peak"], mem))
    want(s["device"]["used_memory"] == int(mem), "device used memory %d" % s["device"]["used_memory"])
    ops = x["calls_by_op"]
    want(ops.get("hello") == 1 and ops.get("mem_alloc") == 1 and ops.get("launch") == 1 and
         ops.get("device_sync") == 1, "calls by op: %s" % ops)
    want(x["calls"] == sum(ops.values()), "calls %d but the ops add up to %d" % (x["calls"], sum(ops.values())))
    want(x["bytes_in"] > 0 and x["bytes_out"] > 0 and x["errors"] == 0, "counters: %s" % x)


def check_devices(path, n):
    doc = json.load(open(path))
    servers = doc["servers"]
    if not want(len(servers) == 1, "remote-smi found %d servers, expected 1" % len(servers)):
        return
    devs = servers[0].get("devices", [])
    want([d.get("ordinal") for d in devs] == list(range(int(n))), "devices: %s" % devs)
    want(all(d.get("name") == "remote-gpu fake device" and d.get("total_memory", 0) > 0 for d in devs),
         "devices: %s" % devs)
    want(servers[0].get("device", {}).get("ordinal") == 0, "device: %s" % servers[0].get("device"))


def check_nosession(path):
    doc = json.load(open(path))
    servers = doc["servers"]
    if want(len(servers) == 1, "remote-smi found %d servers, expected 1" % len(servers)):
        want(servers[0]["sessions"] == [], "sessions left: %s" % servers[0]["sessions"])


def http(port, request):
    # port: N (on 127.0.0.1) or HOST:N (remote-gpud --metrics-listen)
    host, _, port = str(port).rpartition(":")
    with socket.create_connection((host or "127.0.0.1", int(port)), timeout=10) as c:
        c.sendall(request)
        data = b""
        while True:
            b = c.recv(65536)
            if not b:
                break
            data += b
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for h in lines[1:]:
        k, _, v = h.partition(":")
        headers[k.strip().lower()] = v.strip()
    return lines[0], headers, body


def check_metrics(port, mem):
    status, headers, body = http(port, b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nAccept: */*\r\n\r\n")
    want(status == "HTTP/1.0 200 OK", "GET /metrics: %s" % status)
    want(headers.get("content-type") == "text/plain; version=0.0.4; charset=utf-8",
         "Content-Type: %s" % headers.get("content-type"))
    want(headers.get("content-length") == str(len(body)), "Content-Length %s, body %d bytes" %
         (headers.get("content-length"), len(body)))
    fams = check_prom_text(body.decode("utf-8"), "GET /metrics")
    if fams:
        def val(fam, **labels):
            got = [v for (n, l, v) in fams.get(fam, {}).get("samples", [])
                   if all(l.get(k) == x for k, x in labels.items())]
            return got

        want(val("remote_gpud_up") == [1.0], "remote_gpud_up %s" % val("remote_gpud_up"))
        want(val("remote_gpud_sessions") == [1.0], "remote_gpud_sessions %s" % val("remote_gpud_sessions"))
        want(val("remote_gpud_session_memory_bytes") == [float(mem)],
             "remote_gpud_session_memory_bytes %s, expected [%s]" % (val("remote_gpud_session_memory_bytes"), mem))
        want(val("remote_gpud_device_memory_used_bytes") == [float(mem)], "device used memory %s" %
             val("remote_gpud_device_memory_used_bytes"))
        want(val("remote_gpud_session_calls_total", op="mem_alloc") == [1.0], "mem_alloc calls %s" %
             val("remote_gpud_session_calls_total", op="mem_alloc"))
        # no tenant's command line, host or pid (issue 24): remote-smi has them, for the server's user
        want("remote_gpud_session_info" not in fams, "/metrics names the sessions' clients")
        host = socket.gethostname().encode()
        want(b"holder" not in body and (len(host) < 4 or host not in body),
             "/metrics shows a client's command line or host")
        for fam, f in fams.items():
            want(f["type"] is not None and f["help"] is not None, "%s: no TYPE or HELP" % fam)
            if f["type"] == "counter":
                want(fam.endswith("_total"), "counter %s does not end in _total" % fam)
    status, headers, body = http(port, b"HEAD /metrics HTTP/1.0\r\n\r\n")
    want(status == "HTTP/1.0 200 OK" and body == b"" and int(headers.get("content-length", "0")) > 0,
         "HEAD /metrics: %s, %d bytes of body" % (status, len(body)))
    for req, code in ((b"GET /nothing HTTP/1.0\r\n\r\n", "404"), (b"POST /metrics HTTP/1.0\r\n\r\n", "405"),
                      (b"HELLO\r\n\r\n", "400"), (b"GET /metrics HTTP/2.0\r\n\r\n", "400"),
                      (b"GET  /metrics HTTP/1.0\r\n\r\n", "400"), (b"GET /metrics?x=1 HTTP/1.0\r\n\r\n", "200"),
                      (b"GET /metrics HTTP/1.0\r\n" + b"X: " + b"y" * 9000 + b"\r\n\r\n", "431")):
        status, _, _ = http(port, req)
        want(status.startswith("HTTP/1.0 %s " % code), "%r: %s, expected %s" % (req[:40], status, code))


def check_promfile(path):
    check_prom_text(open(path, encoding="utf-8").read(), path)


def nm_function(binary, off):
    """The function of binary that holds offset off (nm -C, defined text symbols)."""
    out = subprocess.run(["nm", "-C", "--defined-only", binary], capture_output=True, text=True).stdout
    best = None
    for line in out.splitlines():
        parts = line.split(" ", 2)
        if len(parts) < 3 or parts[1] not in "tTwW":
            continue
        a = int(parts[0], 16)
        if a <= off and (best is None or a > best[0]):
            best = (a, parts[2])
    return best[1] if best else "?"


def check_trace(path, binary):
    text = open(path).read()
    blocks = re.findall(r"^\[libremote \d+ [\d.]+ info trace\] cudaMalloc called from obs_counts \(thread \d+\)\n"
                        r"((?:    .*\n)+)", text, re.M)
    want(len(blocks) == 7, "%d cudaMalloc backtraces, expected 7" % len(blocks))
    in_do_alloc = 0
    for b in blocks:
        first = b.splitlines()[0]
        m = re.match(r"    #0 0x[0-9a-f]+ (\S+)\((\S*)\+0x([0-9a-f]+)\)$", first)
        if not want(m, "frame #0 unreadable: %r" % first):
            continue
        obj, sym, off = m.group(1), m.group(2), int(m.group(3), 16)
        want(obj.endswith("/obs_counts"), "frame #0 in %s, not the program" % obj)
        fn = sym if sym else nm_function(binary, off)
        if fn.startswith("do_alloc") or fn.startswith("_Z8do_alloc"):
            in_do_alloc += 1
        elif "worker" not in fn:
            want(False, "frame #0 in %s (offset 0x%x), expected do_alloc or worker" % (fn, off))
        want(not re.search(r"libremote", b), "the backtrace shows libremote's own frames:\n" + b)
    want(in_do_alloc == 3, "%d backtraces start in do_alloc, expected 3" % in_do_alloc)
    want("python:" not in text and "py#" not in text, "Python frames in a C program")
    sends = re.findall(r"info trace\] cudaMemcpy -> (\w+)\(([^)]*)\)(.*)$", text, re.M)
    htod = [s for s in sends if s[0] == "memcpy_htod"]
    dtoh = [s for s in sends if s[0] == "memcpy_dtoh"]
    want(len(htod) == 2 and all("+ %d payload bytes" % MIB in s[2] for s in htod),
         "copies to the device traced: %s" % htod)
    want(len(dtoh) == 2 and all(s[1].split(", ")[1] == "0x100000" for s in dtoh),
         "copies to the host traced: %s (expected their size 0x100000 as second argument)" % dtoh)
    results = re.findall(r"info trace\] cudaMemcpy = cudaSuccess \(0\) in [\d.]+ us; (\d+) round trips?", text)
    want(sorted(results) == ["0", "0", "1", "1"], "cudaMemcpy results: %s" % results)
    want(not re.search(r"trace\] (cudaFree|cudaMemsetAsync|__cudaLaunchKernel)", text),
         "functions traced that were not asked for")


def check_trace_py(path, script):
    text = open(path).read()
    line = next(i for i, l in enumerate(open(script), 1) if "TRACED" in l)
    blocks = re.findall(r"info trace\] cudaMalloc called from (\S+) \(thread \d+\)\n((?:    .*\n)+)", text)
    if not want(len(blocks) == 2, "%d cudaMalloc traces, expected 2:\n%s" % (len(blocks), text)):
        return
    lib, b = blocks[0]
    want(lib.startswith("libffi"), "first call from %s, expected libffi (ctypes)" % lib)
    py = re.findall(r'    py#(\d+) File "([^"]+)", line (\d+), in (\S+)', b)
    want(len(py) >= 3, "Python frames of the first call: %s" % py)
    if py:
        want(py[0][1].endswith("trace_py.py") and int(py[0][2]) == line and py[0][3] == "alloc_with_gil",
             "innermost Python frame %s, expected trace_py.py line %d in alloc_with_gil" % (py[0], line))
        want([p[3] for p in py[:3]] == ["alloc_with_gil", "main", "<module>"], "Python frames %s" % py)
    want("does not hold the GIL" in blocks[1][1] and "py#" not in blocks[1][1],
         "the call without the GIL: %s" % blocks[1][1])


def check_logsync(path, sync):
    lines = [l for l in open(path).read().splitlines() if l]
    order = [("B" if "before the call" in l else "A" if "after the call" in l else
              "T" if "info trace] cudaMalloc" in l else None) for l in lines]
    order = "".join(o for o in order if o)
    if sync == "1":
        want(order == "BTA", "with REMOTE_GPU_LOG_SYNC=1 the order is %s, expected before, trace, after" % order)
    else:
        # without it stdout (fully buffered) comes out at exit: the trace first
        want(order == "TBA", "without REMOTE_GPU_LOG_SYNC the order is %s, expected the trace first "
             "(else this test proves nothing)" % order)


def main(argv):
    cmd, args = argv[1], argv[2:]
    {"stats": check_stats, "dump": check_dump, "smi": check_smi, "nosession": check_nosession, "devices": check_devices,
     "metrics": check_metrics, "promfile": check_promfile, "trace": check_trace, "trace_py": check_trace_py,
     "logsync": check_logsync}[cmd](*args)
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
