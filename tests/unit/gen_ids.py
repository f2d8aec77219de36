#!/usr/bin/env python3
"""api/gen.py's op ids: each op line carries its id, so lines may move and ids
may have gaps; the generator refuses a missing id, an id given twice, one
outside its file's range and a retired one given again, naming file:line
(ctest api.gen_ids). Runs the parsers on changed copies of the .api files."""
import os
import shutil
import tempfile

from gentest import API, check, finish
import gen  # noqa: E402  (api/, put on the path by gentest)
import gen_lib  # noqa: E402


def lines_of(name):
    with open(os.path.join(API, name)) as f:
        return f.read().split("\n")


def op_lines(lines):
    """Indexes of the op lines (those that start with an id)."""
    return [i for i, l in enumerate(lines) if l.strip()[:1].isdigit()]


def run(edits):
    """Copies of the .api files with edits {name: lines}; the generator's ops
    by id, or its refusal's message."""
    d = tempfile.mkdtemp()
    try:
        for name in os.listdir(API):
            if name.endswith(".api"):
                shutil.copy(os.path.join(API, name), d)
        for name, lines in edits.items():
            with open(os.path.join(d, name), "w") as f:
                f.write("\n".join(lines))
        try:
            ops = gen.parse(os.path.join(d, "cuda.api"))
            libs = gen_lib.parse_all(d)
            return gen.all_ops(ops, libs), ops, libs
        except SystemExit as e:
            return str(e), None, None
    finally:
        shutil.rmtree(d)


def with_id(lines, i, new_id):
    """A copy of lines with line i's id replaced (new_id None: taken out)."""
    out = lines[:]
    rest = lines[i].split(None, 1)[1]
    out[i] = rest if new_id is None else f"{new_id} {rest}"
    return out


def refused(edits, where, what):
    msg = run(edits)[0]
    ok = isinstance(msg, str) and msg.startswith(where + ":")
    check(ok, f"{what}: refused at {where} (got {msg if isinstance(msg, str) else 'no refusal'})")


base, ops0, libs0 = run({})
check(not isinstance(base, str), f"the description as it is generates ({base})")
ids0 = {o.name: i for i, o in base}

cuda = lines_of("cuda.api")
blas = lines_of("cublas.api")
nccl = lines_of("nccl.api")
c0, c1 = op_lines(cuda)[:2]
b0, b1 = op_lines(blas)[:2]
n0 = op_lines(nccl)[0]
lo_blas = min(d.base for d in libs0)
nccl_base = next(d.base for d in libs0 if d.stem == "nccl")

# Lines may move and ids may have gaps: the ids are those of the lines.
moved = cuda[:c0] + cuda[c0 + 1:] + [cuda[c0]]
got = run({"cuda.api": moved})[0]
check(not isinstance(got, str) and {o.name: i for i, o in got} == ids0, "a moved line keeps its id")
check(gen.gen_ops_h(*run({"cuda.api": moved})[1:]) == gen.gen_ops_h(ops0, libs0),
      "proto_ops.h does not change when a line moves")
gap = blas[:b0] + blas[b0 + 1:] + [f"@retired {blas[b0].split()[0]}"]
got = run({"cublas.api": gap})[0]
check(not isinstance(got, str) and blas[b0].split()[1] not in {o.name for _, o in got},
      "a removed op with its id retired leaves a gap")

# Refusals, each naming the file and line.
ln = c0 + 1
cid = cuda[c0].split()[0]
refused({"cuda.api": with_id(cuda, c0, None)}, f"cuda.api:{ln}", "a missing id")
refused({"cuda.api": with_id(cuda, c0, "-")}, f"cuda.api:{ln}", "`-` in cuda.api (no local functions)")
refused({"cuda.api": with_id(cuda, c1, cid)}, f"cuda.api:{c1 + 1}", "an id given twice")
refused({"cuda.api": with_id(cuda, c0, lo_blas)}, f"cuda.api:{ln}", "a cuda.api id at the lowest @base")
refused({"cuda.api": with_id(cuda, c0, 0)}, f"cuda.api:{ln}", "id 0 (the reply's)")
refused({"cuda.api": cuda + [f"@retired {cid}"]}, f"cuda.api:{ln}", "a retired id given again")
refused({"cuda.api": cuda + [f"@retired {lo_blas + 5}"]}, f"cuda.api:{len(cuda) + 1}",
        "a retired id outside the range")
refused({"cuda.api": cuda + ["@retired 1000", "@retired 1000"]}, f"cuda.api:{len(cuda) + 2}",
        "an id retired twice")
refused({"cuda.api": cuda + ["@base 3"]}, f"cuda.api:{len(cuda) + 1}", "a directive cuda.api does not take")

lb = b0 + 1
bid = blas[b0].split()[0]
refused({"cublas.api": with_id(blas, b0, None)}, f"cublas.api:{lb}", "a library line without its id")
refused({"cublas.api": with_id(blas, b0, lo_blas - 1)}, f"cublas.api:{lb}", "a library id below its @base")
refused({"cublas.api": with_id(blas, b0, nccl_base)}, f"cublas.api:{lb}", "a library id at the next file's @base")
refused({"cublas.api": with_id(blas, b1, bid)}, f"cublas.api:{b1 + 1}", "a library id given twice")
refused({"cublas.api": blas + [f"@retired {bid}"]}, f"cublas.api:{lb}", "a retired library id given again")
nl = next(i for i, l in enumerate(nccl) if "| local" in l)
refused({"nccl.api": with_id(nccl, nl, nccl_base + 900)}, f"nccl.api:{nl + 1}", "an id on a local function")
refused({"nccl.api": with_id(nccl, n0, "-")}, f"nccl.api:{n0 + 1}", "`-` on an op")

finish("gen_ids")
