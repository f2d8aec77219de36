#!/usr/bin/env python3
"""Writes the driver API's entry points from the toolkit's headers:

frontend/gen/drv_entries.c
    the table cuGetProcAddress answers from: every driver function (cuda.h and
    the GL/EGL/VDPAU/profiler headers, as cudaTypedefs.h lists them) with each
    of its ABI variants (the CUDA version that introduced it, the symbol that
    carries it, and whether it is the per-thread default stream variant), and
    the address that answers it: the definition in frontend/src when there is
    one, else a stub that answers CUDA_ERROR_NOT_SUPPORTED and logs its name
    once. Every stub is also exported under the driver's symbol, so programs
    that link or dlsym the driver by name find the same answer.

    Per-thread default stream variants (_ptds, _ptsz) of implemented functions
    jump to the implementation: per-thread default streams are the legacy one
    here (frontend/README.md).

docs/DRIVER_API.md
    every driver function that the toolkit's libraries name (the static
    runtime, cuDNN, cuFFT, cuSOLVER, cuSPARSE, cuRAND, NVRTC, nvJitLink, NCCL,
    as listed in api/driver_names.txt), and how libremote.so answers it.

A variant's symbol: cudaTypedefs.h names each variant PFN_<name>_v<version>;
the newest is the symbol cuda.h maps the name to (#define cuMemAlloc
cuMemAlloc_v2), the older ones are <name>, <name>_v2, ... in order of version.

  api/gen_drv.py [--check] [--include DIR]
"""
import glob
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "frontend", "gen", "drv_entries.c")
DOC = os.path.join(ROOT, "docs", "DRIVER_API.md")
NAMES = os.path.join(ROOT, "api", "driver_names.txt")
TYPEDEF_HEADERS = ["cudaTypedefs.h", "cudaGLTypedefs.h", "cudaEGLTypedefs.h", "cudaVDPAUTypedefs.h",
                   "cudaProfilerTypedefs.h"]


def include_dir(argv):
    if "--include" in argv:
        return argv[argv.index("--include") + 1]
    return os.path.join(os.environ.get("CUDA_HOME") or "/usr/local/cuda", "include")


def read(path):
    with open(path) as f:
        return f.read()


def variants(inc):
    """{name: {"plain": [versions], "ptds": [versions], "ptsz": [versions]}}"""
    out = {}
    for h in TYPEDEF_HEADERS:
        path = os.path.join(inc, h)
        if not os.path.exists(path):
            continue
        for name, ver, pt in re.findall(r"\(CUDAAPI \*PFN_(cu\w+?)_v(\d+)(?:_(ptds|ptsz))?\)", read(path)):
            v = out.setdefault(name, {"plain": set(), "ptds": set(), "ptsz": set()})
            v[pt or "plain"].add(int(ver))
    return {n: {k: sorted(s) for k, s in v.items()} for n, v in out.items()}


def newest_symbols(inc):
    """cuda.h's (and the GL/EGL headers') #define name symbol, PTDS/PTSZ unwrapped."""
    m = {}
    for h in ["cuda.h", "cudaGL.h", "cudaEGL.h", "cudaVDPAU.h", "cudaProfiler.h"]:
        path = os.path.join(inc, h)
        if not os.path.exists(path):
            continue
        text = read(path)
        cut = text.find("#if defined(__CUDA_API_VERSION_INTERNAL)\n    #undef")
        head = text if cut < 0 else text[:cut]
        for name, target in re.findall(r"^\s*#define\s+(cu[A-Z]\w*)\s+(\S+)\s*$", head, flags=re.M):
            t = re.match(r"__CUDA_API_PT(?:DS|SZ)\((\w+)\)", target)
            m.setdefault(name, t.group(1) if t else target)
    return m


def table(inc):
    """[(name, version, kind, symbol)], kind "" / "ptds" / "ptsz"."""
    vs = variants(inc)
    newest = newest_symbols(inc)
    rows = []
    for name in sorted(vs):
        plain = vs[name]["plain"]
        sym_of = {}
        for i, ver in enumerate(plain):
            sym_of[ver] = name if i == 0 else f"{name}_v{i + 1}"
        target = newest.get(name)
        if plain and target and not re.fullmatch(re.escape(name) + r"(_v\d+)?", target):
            # cuda.h gives the name to another function (cuGraphInstantiate is
            # cuGraphInstantiateWithFlags since CUDA 12.0): a variant of the
            # next major release after the listed ones
            ver = (plain[-1] // 1000 + 1) * 1000
            plain = plain + [ver]
            sym_of[ver] = target
        elif plain and target and not (target == name and len(plain) > 1):
            # (cuda.h's per-thread block maps cuStreamGetCtx to itself; its
            # newer variant keeps its own symbol, cuStreamGetCtx_v2)
            sym_of[plain[-1]] = target
        for ver in plain:
            rows.append((name, ver, "", sym_of[ver]))
        for kind in ("ptds", "ptsz"):
            for ver in vs[name][kind]:
                base = [v for v in plain if v <= ver]
                sym = sym_of[base[-1]] if base else name
                rows.append((name, ver, kind, f"{sym}_{kind}"))
    return rows, newest


def implemented(newest):
    """Symbols defined in frontend/src: CUresult functions, by the symbol their
    source name becomes under cuda.h's defines (no per-thread compile)."""
    syms = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "frontend", "src", "*.[ch]"))) + \
            [os.path.join(ROOT, "frontend", "gen", "drv_forward.c")]:
        text = read(path)
        # an implementation under another variant's symbol:
        # CUresult cname(...) __asm__("symbol");
        for cname, sym in re.findall(r"^CUresult\s+(\w+)\s*\([^;]*?\)\s*__asm__\(\"(cu\w+)\"\)\s*;", text,
                                     flags=re.M):
            syms[sym] = (cname, os.path.basename(path))
        for src in re.findall(r"^CUresult\s+(?:CUDAAPI\s+)?(cu\w+)\s*\(", text, flags=re.M):
            syms[newest.get(src, src)] = (src, os.path.basename(path))
        # another variant's symbol given to an implementation:
        # extern __typeof__(impl) cname __asm__("symbol") __attribute__((alias(...)));
        # (the table points at impl, the same function)
        for impl, sym in re.findall(r"^extern\s+__typeof__\((\w+)\)\s+\w+\s+__asm__\(\"(cu\w+)\"\)", text, flags=re.M):
            syms[sym] = (impl, os.path.basename(path))
    return syms


def generate(inc):
    rows, newest = table(inc)
    have = implemented(newest)
    version = re.search(r"#define\s+CUDA_VERSION\s+(\d+)", read(os.path.join(inc, "cuda.h"))).group(1)
    src_of = {sym: src for sym, (src, _) in have.items()}
    # Only the newest plain variant of an implemented name has the C prototype
    # cuda.h gives its source name; older variants are answered only when
    # frontend/src defines their symbol too (then by that symbol's source name).
    stubs, jumps, entries = [], [], []
    for name, ver, kind, sym in rows:
        if kind:
            base = sym[:-(len(kind) + 1)]
            if sym in have:
                fn = src_of[sym]
            elif base in have:
                jumps.append((sym, base))
                fn = f"fe_drv_jump_{sym}"
            else:
                stubs.append(sym)
                fn = f"fe_drv_stub_{sym}"
        elif sym in have:
            fn = src_of[sym]
        else:
            stubs.append(sym)
            fn = f"fe_drv_stub_{sym}"
        entries.append((name, ver, kind, sym, fn))
    stubs = sorted(set(stubs))
    jumps = sorted(set(jumps))
    o = [f"/* @generated by api/gen_drv.py from cuda.h and cudaTypedefs.h (CUDA_VERSION {version}). Do not edit. */\n",
         "/*\n * Every driver function and its ABI variants, as cuGetProcAddress answers them\n"
         " * (drv_procaddr.c). Implemented ones point at frontend/src; the rest at a stub\n"
         " * that answers CUDA_ERROR_NOT_SUPPORTED and logs its name once, exported under\n"
         " * the driver's symbol too. Per-thread default stream variants of implemented\n"
         " * functions jump to them (per-thread default streams are the legacy one).\n */\n",
         "#include <stddef.h>\n\n#include \"drv.h\"\n\n",
         "/* The table names the deprecated functions too: programs still ask for them. */\n"
         "#pragma GCC diagnostic ignored \"-Wdeprecated-declarations\"\n\n",
         "/* In assembly, as the jumps: a C alias would need a prototype that cuda.h's\n"
         " * declaration of the same name contradicts, and link-time optimisation drops\n"
         " * symbols set to functions it sees no C reference to. */\n",
         "#if defined(__x86_64__)\n#define STUB(sym) \\\n\tvoid fe_drv_stub_##sym(void); \\\n"
         "\t__asm__(\".text\\n.globl fe_drv_stub_\" #sym \"\\n.hidden fe_drv_stub_\" #sym \"\\n.globl \" #sym \\\n"
         "\t\t\"\\n.type \" #sym \", @function\\nfe_drv_stub_\" #sym \":\\n\" #sym \":\\n\" \\\n"
         "\t\t\"\\tleaq .Lname_\" #sym \"(%rip), %rdi\\n\\tjmp fe_drv_unsupported\\n.size \" #sym \", .-\" #sym \\\n"
         "\t\t\"\\n.section .rodata\\n.Lname_\" #sym \": .asciz \\\"\" #sym \"\\\"\\n.text\\n\");\n"
         "#elif defined(__aarch64__)\n#define STUB(sym) \\\n\tvoid fe_drv_stub_##sym(void); \\\n"
         "\t__asm__(\".text\\n.globl fe_drv_stub_\" #sym \"\\n.hidden fe_drv_stub_\" #sym \"\\n.globl \" #sym \\\n"
         "\t\t\"\\n.type \" #sym \", %function\\nfe_drv_stub_\" #sym \":\\n\" #sym \":\\n\" \\\n"
         "\t\t\"\\tadrp x0, .Lname_\" #sym \"\\n\\tadd x0, x0, :lo12:.Lname_\" #sym \"\\n\\tb fe_drv_unsupported\\n\" \\\n"
         "\t\t\".size \" #sym \", .-\" #sym \"\\n.section .rodata\\n.Lname_\" #sym \": .asciz \\\"\" #sym \"\\\"\\n.text\\n\");\n"
         "#else\n#error \"drv_entries.c: no stub for this architecture\"\n#endif\n",
         "#if defined(__x86_64__)\n#define JUMP(sym, to) \\\n\tvoid fe_drv_jump_##sym(void); \\\n"
         "\t__asm__(\".text\\n.globl fe_drv_jump_\" #sym \"\\n.globl \" #sym \"\\n.type \" #sym \", @function\\n\" \\\n"
         "\t\t\"fe_drv_jump_\" #sym \":\\n\" #sym \":\\n\\tjmp \" #to \"@PLT\\n.size \" #sym \", .-\" #sym \"\\n\");\n"
         "#elif defined(__aarch64__)\n#define JUMP(sym, to) \\\n\tvoid fe_drv_jump_##sym(void); \\\n"
         "\t__asm__(\".text\\n.globl fe_drv_jump_\" #sym \"\\n.globl \" #sym \"\\n.type \" #sym \", %function\\n\" \\\n"
         "\t\t\"fe_drv_jump_\" #sym \":\\n\" #sym \":\\n\\tb \" #to \"\\n.size \" #sym \", .-\" #sym \"\\n\");\n"
         "#else\n#error \"drv_entries.c: no jump for this architecture\"\n#endif\n\n"]
    o += [f"STUB({s})\n" for s in stubs]
    o.append("\n")
    o += [f"JUMP({s}, {b})\n" for s, b in jumps]
    o.append("\n/* Sorted by name, then version. */\nconst fe_drv_entry fe_drv_entries[] = {\n")
    for name, ver, kind, sym, fn in entries:
        pt = {"": "0", "ptds": "FE_DRV_PTDS", "ptsz": "FE_DRV_PTSZ"}[kind]
        o.append(f"\t{{\"{name}\", {ver}, {pt}, \"{sym}\", (void *){fn}}},\n")
    o.append("};\nconst size_t fe_drv_entries_n = sizeof(fe_drv_entries) / sizeof(fe_drv_entries[0]);\n")
    return "".join(o), entries, have


def doc(entries, have):
    names = [l.split()[0] for l in read(NAMES).splitlines() if l.strip() and not l.startswith("#")]
    by_sym = {}
    for name, ver, kind, sym, fn in entries:
        by_sym.setdefault(name, []).append((ver, kind, sym, fn))
    o = ["<!-- @generated by api/gen_drv.py from api/driver_names.txt and frontend/src. Do not edit. -->\n",
         "# Driver functions the CUDA libraries name, and how libremote.so answers them\n\n",
         "Names from the static CUDA runtime, cuDNN, cuFFT, cuSOLVER, cuSPARSE, cuRAND, NVRTC,\n",
         "nvJitLink and NCCL (`api/driver_names.txt`, made by `api/driver_names.sh`). *where*: the\n",
         "file that answers the newest variant, or `not supported` (CUDA_ERROR_NOT_SUPPORTED, logged\n",
         "once). A name that is not a driver function of this toolkit is `unknown` (cuGetProcAddress\n",
         "answers CUDA_ERROR_NOT_FOUND, as the driver does).\n\n",
         "| function | newest symbol | where |\n|---|---|---|\n"]
    counts = {"implemented": 0, "not supported": 0, "unknown": 0}
    for n in sorted(set(names)):
        vs = [v for v in by_sym.get(n, []) if not v[1]]
        if not vs:
            o.append(f"| `{n}` | | unknown |\n")
            counts["unknown"] += 1
            continue
        sym = vs[-1][2]
        where = f"`{have[sym][1]}`" if sym in have else "not supported"
        counts["implemented" if sym in have else "not supported"] += 1
        o.append(f"| `{n}` | `{sym}` | {where} |\n")
    o.insert(7, f"{counts['implemented']} implemented, {counts['not supported']} not supported, "
                f"{counts['unknown']} unknown.\n\n")
    return "".join(o)


def main(argv):
    inc = include_dir(argv)
    text, entries, have = generate(inc)
    outs = [(OUT, text)]
    if os.path.exists(NAMES):
        outs.append((DOC, doc(entries, have)))
    for path, t in outs:
        if "--check" in argv:
            cur = read(path) if os.path.exists(path) else None
            if cur != t:
                sys.exit(f"{os.path.relpath(path, ROOT)} is stale: run api/gen_drv.py")
            continue
        with open(path, "w") as f:
            f.write(t)
        print(f"wrote {os.path.relpath(path, ROOT)}")


if __name__ == "__main__":
    main(sys.argv[1:])
