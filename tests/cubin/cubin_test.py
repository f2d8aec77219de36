#!/usr/bin/env python3
"""remote-cubin end-to-end tests (ctest runs each subcommand as one test).

  layouts      TOOL EXPECTED FILE...  every cubin of FILE lists exactly the kernels
                                      and (ordinal, offset, size) of EXPECTED
  registration TOOL PROBE PROG LIB... fatbins a program registers (seen by an
                                      LD_PRELOADed probe) are in the store, same hash
  library      TOOL LIB               extract a CUDA library, verify, damage, repair
  badinput     TOOL FILE...           truncated / flipped inputs: nonzero exit, no crash
  store        TOOL FILE FILE         concurrent extracts into one store lose nothing
"""
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

SKIP = 77  # ctest SKIP_RETURN_CODE


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def run(args, env=None, check=True):
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    if p.returncode < 0:
        fail("%s killed by signal %d\n%s" % (args, -p.returncode, p.stderr.decode(errors="replace")))
    if check and p.returncode != 0:
        fail("%s exited %d\n%s%s" % (args, p.returncode, p.stdout.decode(errors="replace"),
                                     p.stderr.decode(errors="replace")))
    return p


def ls_json(tool, target):
    return json.loads(run([tool, "ls", target, "--json"]).stdout)


def read_index(store):
    recs = {}
    with open(os.path.join(store, "index")) as f:
        for line in f:
            h, size, src = line.rstrip("\n").split(" ", 2)
            recs[h] = (int(size), src)
    return recs


def layouts(tool, expected_file, files):
    expected = {}
    with open(expected_file) as f:
        for line in f:
            parts = line.split()
            expected[parts[0]] = [tuple(int(x) for x in p.replace("@", ":").split(":")) for p in parts[1:]]
    archs = set()
    compressed = 0
    for path in files:
        doc = ls_json(tool, path)
        ncubins = 0
        for inp in doc["inputs"]:
            for img in inp["images"]:
                for e in img["entries"]:
                    if e["kind"] != "elf" or "kernels" not in e:
                        continue
                    kernels = {k["name"]: [(p["ordinal"], p["offset"], p["size"]) for p in k["params"]]
                               for k in e["kernels"]}
                    ours = {n: v for n, v in kernels.items() if n in expected}
                    if not ours:
                        continue  # another translation unit's cubin
                    ncubins += 1
                    archs.add(e["arch"])
                    compressed += e["compressed"]
                    if ours != expected or len(ours) != len(expected):
                        for n in expected:
                            if kernels.get(n) != expected[n]:
                                print("  %s sm_%d %s: got %s want %s" % (path, e["arch"], n, kernels.get(n), expected[n]))
                        fail("%s: layouts differ from the host compiler's" % path)
        if not ncubins:
            fail("%s: no cubin with the test kernels" % path)
        print("%s: %d cubins match" % (path, ncubins))
    print("archs checked: %s; compressed cubins: %d" % (sorted(archs), compressed))


def registration(tool, probe, prog, libs):
    work = tempfile.mkdtemp(prefix="cubin-reg-")
    try:
        out = os.path.join(work, "registrations")
        env = dict(os.environ, LD_PRELOAD=probe, RG_REGPROBE_OUT=out)
        p = run([prog], env=env)
        if b"registered" not in p.stdout:
            fail("program did not run to main")
        regs, funcs = [], {}
        with open(out) as f:
            for line in f:
                w = line.split()
                if w[0] == "error":
                    fail("probe: " + line)
                if w[0] == "fatbin":
                    regs.append((w[1], int(w[2]), int(w[3])))
                elif w[0] == "function":
                    funcs.setdefault(w[1], []).append(w[2])
        if not regs:
            fail("no registrations seen")
        store = os.path.join(work, "store")
        run([tool, "extract", prog] + libs + ["--store", store, "--quiet"])
        index = read_index(store)
        for h, size, version in regs:
            if h not in index:
                fail("registered fatbin %s (%d bytes) is not in the store" % (h, size))
            if index[h][0] != size:
                fail("%s: store size %d, registered %d" % (h, index[h][0], size))
            with open(os.path.join(store, h + ".fatbin"), "rb") as f:
                if len(f.read()) != size:
                    fail("%s: store file size" % h)
        # Each input file registered at least one of its fatbins (the library's come
        # from its own constructor, not the program's).
        sources = {index[h][1] for h, _, _ in regs}
        for path in [prog] + libs:
            if os.path.realpath(path) not in sources:
                fail("no registration from %s (sources seen: %s)" % (path, sorted(sources)))
        # Every registered function name is a kernel of its fatbin's cubins. Except
        # after a device link (-rdc, wrapper version 2): nvlink drops kernels that
        # host code never launches nor takes the address of, yet the stubs still
        # register them. The kernels prog_main.cu launches must be there.
        version = {h: v for h, _, v in regs}
        launched = ("knone", "kscale", "klib")
        dropped = 0
        for h, names in funcs.items():
            doc = ls_json(tool, os.path.join(store, h + ".fatbin"))
            have = {k["name"] for i in doc["inputs"] for img in i["images"] for e in img["entries"]
                    for k in e.get("kernels", [])}
            missing = [n for n in names if n not in have]
            if missing and (version[h] != 2 or any(l in n for n in missing for l in launched)):
                fail("%s: registered functions %s not listed by ls" % (h, missing))
            dropped += len(missing)
        if dropped:
            print("%d registered kernels absent from the device-linked image (never launched)" % dropped)
        extra = len(index) - len({h for h, _, _ in regs})
        print("%d registrations (wrapper versions %s), all in the store with the same hash and size;"
              " %d stored fatbins never registered (device-link output of a whole-program build)"
              % (len(regs), sorted({v for _, _, v in regs}), extra))
        print("%d registered functions found by ls" % sum(len(v) for v in funcs.values()))
    finally:
        shutil.rmtree(work)


def library(tool, lib):
    if not os.path.exists(lib):
        print("%s not present: skipped" % lib)
        sys.exit(SKIP)
    work = tempfile.mkdtemp(prefix="cubin-lib-")
    try:
        store = os.path.join(work, "store")
        t0 = time.time()
        p = run([tool, "extract", lib, "--store", store])
        t1 = time.time()
        print(p.stdout.decode().strip())
        print("extract: %.2f s" % (t1 - t0))
        index = read_index(store)
        if not index:
            fail("no fatbins extracted from " + lib)
        p = run([tool, "verify", store])
        print(p.stdout.decode().strip().splitlines()[-1])
        total = sum(s for s, _ in index.values())
        print("%d unique fatbins, %.1f MB, verify %.2f s" % (len(index), total / 1e6, time.time() - t1))

        # The store lists kernels for every fatbin.
        doc = ls_json(tool, store)
        nk = sum(len(e.get("kernels", [])) for i in doc["inputs"] for img in i["images"] for e in img["entries"])
        errs = [img for i in doc["inputs"] for img in i["images"] if "error" in img]
        if nk == 0 or errs:
            fail("ls of the store: %d kernels, %d errors" % (nk, len(errs)))
        print("ls of the store: %d kernels (summed over archs)" % nk)

        # Damage one entry (same size) and remove another: verify fails...
        hashes = sorted(index)
        victim = os.path.join(store, hashes[0] + ".fatbin")
        with open(victim, "r+b") as f:
            f.seek(index[hashes[0]][0] // 2)
            b = f.read(1)
            f.seek(-1, 1)
            f.write(bytes([b[0] ^ 0x5a]))
        if len(hashes) > 1:
            os.unlink(os.path.join(store, hashes[1] + ".fatbin"))
        p = run([tool, "verify", store], check=False)
        out = p.stdout.decode()
        if p.returncode != 1 or ("corrupt  " + hashes[0]) not in out:
            fail("verify did not report the damaged entry (exit %d)\n%s" % (p.returncode, out))
        if len(hashes) > 1 and ("missing  " + hashes[1]) not in out:
            fail("verify did not report the missing entry\n" + out)
        # ... and extracting again repairs both.
        p = run([tool, "extract", lib, "--store", store])
        print(p.stdout.decode().strip())
        run([tool, "verify", store])
        print("damaged and missing entries detected and repaired")
    finally:
        shutil.rmtree(work)


def badinput(tool, files):
    work = tempfile.mkdtemp(prefix="cubin-bad-")
    rnd = random.Random(1234)
    try:
        store = os.path.join(work, "store")
        runs = 0
        for path in files:
            data = open(path, "rb").read()
            n = len(data)
            name = os.path.basename(path)
            # Truncations: the first bytes one by one (headers), then spread out.
            cuts = sorted(set(list(range(0, min(n, 200))) + [rnd.randrange(n) for _ in range(60)] + [n - 1]))
            for cut in cuts:
                mpath = os.path.join(work, "%s.trunc%d" % (name, cut))
                with open(mpath, "wb") as f:
                    f.write(data[:cut])
                for cmd in (["ls", mpath], ["ls", mpath, "--json"], ["extract", mpath, "--store", store, "--quiet"]):
                    p = run([tool] + cmd, check=False)
                    runs += 1
                    if p.returncode != 1:
                        fail("%s truncated to %d bytes: '%s' exited %d, want 1" % (name, cut, cmd[0], p.returncode))
                os.unlink(mpath)
            # Flips: header bytes must give an error, random ones must not crash.
            for off in list(range(0, min(n, 64))) + [rnd.randrange(n) for _ in range(80)]:
                mpath = os.path.join(work, "%s.flip%d" % (name, off))
                m = bytearray(data)
                m[off] ^= 0xff
                with open(mpath, "wb") as f:
                    f.write(m)
                for cmd in (["ls", mpath, "--json"], ["extract", mpath, "--store", store, "--quiet"]):
                    p = run([tool] + cmd, check=False)  # fails the test on a signal
                    runs += 1
                    if p.returncode not in (0, 1):
                        fail("%s flipped at %d: exit %d" % (name, off, p.returncode))
                    if cmd[0] == "ls" and p.returncode == 0:
                        json.loads(p.stdout)  # output stays valid JSON
                    if off < 4 and p.returncode != 1:
                        fail("%s with a broken magic: exit %d" % (name, p.returncode))
                os.unlink(mpath)
        # Usage errors and missing files.
        for args, want in ((["ls"], 2), (["frob"], 2), (["extract", files[0]], 2),
                           (["ls", os.path.join(work, "nonexistent")], 1), (["verify", os.path.join(work, "nope")], 1)):
            p = run([tool] + args, check=False)
            if p.returncode != want:
                fail("%s: exit %d, want %d" % (args, p.returncode, want))
            if not p.stderr:
                fail("%s: no message" % args)
        empty = os.path.join(work, "empty")
        open(empty, "wb").close()
        if run([tool, "ls", empty], check=False).returncode != 1:
            fail("empty file accepted")
        print("%d runs on damaged inputs: no crash, errors where expected" % runs)
    finally:
        shutil.rmtree(work)


def store_concurrency(tool, files):
    work = tempfile.mkdtemp(prefix="cubin-store-")
    try:
        store = os.path.join(work, "store")
        procs = [subprocess.Popen([tool, "extract", f, "--store", store, "--quiet"]) for f in files for _ in range(2)]
        if any(p.wait() != 0 for p in procs):
            fail("concurrent extract failed")
        index = read_index(store)
        want = set()
        for f in files:
            for i in ls_json(tool, f)["inputs"]:
                want |= {img["hash"] for img in i["images"]}
        if set(index) != want:
            fail("index after concurrent extracts: %d entries, want %d" % (len(index), len(want)))
        with open(os.path.join(store, "index")) as f:
            if len(f.readlines()) != len(want):
                fail("duplicate index lines")
        leftovers = [n for n in os.listdir(store) if n.startswith(".tmp-")]
        if leftovers:
            fail("temporary files left: %s" % leftovers)
        run([tool, "verify", store])
        print("concurrent extracts: %d entries, none lost or duplicated" % len(want))
    finally:
        shutil.rmtree(work)


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    cmd, tool, rest = sys.argv[1], sys.argv[2], sys.argv[3:]
    if cmd == "layouts":
        layouts(tool, rest[0], rest[1:])
    elif cmd == "registration":
        registration(tool, rest[0], rest[1], rest[2:])
    elif cmd == "library":
        library(tool, rest[0])
    elif cmd == "badinput":
        badinput(tool, rest)
    elif cmd == "store":
        store_concurrency(tool, rest)
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
