#!/usr/bin/env python3
"""Builds a libcuda.so.1 that forwards every function of the real driver to it
and logs the calls that load and look up kernel images (trace_calls.c), for a
local run to compare with what the same program asks of libremote.so.

  make_shim.py REAL_LIBCUDA OUT_DIR     (then LD_LIBRARY_PATH=OUT_DIR SHIM_OUT=FILE prog)

Each function of REAL_LIBCUDA not in trace_calls.c becomes a jump through a
slot filled from the real library at load time; the runtime's cuGetProcAddress
answers come from the real driver too, except for the traced functions.
"""
import os
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
real, out = sys.argv[1], sys.argv[2]
traced = open(os.path.join(here, "trace_calls.c")).read()
nm = subprocess.run(["nm", "-D", "--defined-only", real], capture_output=True, text=True, check=True).stdout
names = sorted({f[2].split("@")[0] for f in (l.split() for l in nm.splitlines())
                if len(f) == 3 and f[1] in "TW" and f[2].split("@")[0].isidentifier()})
# traced: defined in trace_calls.c as "CUresult NAME(" (no jump for them)
jumps = [n for n in names if f"CUresult {n}(" not in traced]
src = ["#define _GNU_SOURCE", "#include <dlfcn.h>", "#include <stdlib.h>",
       f'__attribute__((visibility("hidden"))) void *slot[{len(jumps)}];',
       "static const char *const nm[] = {%s};" % ",".join(f'"{n}"' for n in jumps)]
src += [f'__asm__(".globl {n}\\n.type {n},@function\\n{n}: jmp *slot+{8 * i}(%rip)\\n");'
        for i, n in enumerate(jumps)]
src += ["static void *real_h;",
        f'void *trace_real(const char *n) {{ if (!real_h) real_h = dlopen("{real}", RTLD_NOW | RTLD_GLOBAL);'
        " return real_h ? dlsym(real_h, n) : NULL; }",
        "__attribute__((constructor)) static void init(void) { for (unsigned i = 0; i < sizeof(nm) / sizeof(nm[0]); i++)"
        " if (!(slot[i] = trace_real(nm[i]))) abort(); }"]
os.makedirs(out, exist_ok=True)
jump_c = os.path.join(out, "jumps.c")
open(jump_c, "w").write("\n".join(src) + "\n")
cuda = os.environ.get("CUDA_HOME", "/usr/local/cuda")
subprocess.run(["gcc", "-shared", "-fPIC", "-O1", f"-I{cuda}/include", "-o", os.path.join(out, "libcuda.so.1"),
                jump_c, os.path.join(here, "trace_calls.c"), "-ldl", "-Wl,-soname,libcuda.so.1"], check=True)
print(os.path.join(out, "libcuda.so.1"))
