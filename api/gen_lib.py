"""Library descriptions: every api/*.api but cuda.api (api/cublas.api: cuBLAS and
cuBLASLt). gen.py imports this module; it parses the descriptions and writes, per
file <lib>.api:

    frontend/gen/lib_<lib>.[ch]   the library's entry points (libremote.so defines
                                  them; LD_PRELOAD wins the binding), and
                                  fe_lib_<name>() for entry points written by hand
    backend/gen/lib_<lib>.[ch]    server handlers be_gen_<name>(), the function
                                  table resolved from the real library, the handle
                                  kinds with their destroy functions

A line names a function and says how it travels; its C prototype comes from the
toolkit header that @lib names (or, for a function the headers do not declare,
from an @proto line), so the line only has to say what each pointer
parameter carries (the generator refuses a pointer it has no kind for: a host
address must never reach the server as if it were a device one). Non-pointer
parameters are classified by their C type: integers and enums travel as msgpack
integers, handle typedefs (@handle) as the client's ids, cudaStream_t as the
runtime's stream id. The rules are in api/cublas.api's header and api/README.md.
"""
import os
import re
import sys

CUDA_INC = os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "include")

# C integer type -> its wire class (msgpack integer, decoded with range checks)
INT_TYPES = {
    "int": "i32", "int32_t": "i32", "unsigned": "u32", "unsigned int": "u32", "uint32_t": "u32",
    "int64_t": "i64", "long long": "i64", "long long int": "i64",
    "uint64_t": "u64", "size_t": "u64", "unsigned long long": "u64",
}
WIRE_CTYPE = {"i32": "int32_t", "u32": "uint32_t", "i64": "int64_t", "u64": "uint64_t"}
KINDS = ("dev", "in", "out", "new", "del", "scalar", "result")
C_WORDS = {"return", "else", "case", "goto", "sizeof", "typedef", "define"}


class LibError(Exception):
    pass


def fail(where, msg):
    sys.exit(f"{where}: {msg}")


# ---------------------------------------------------------------- op ids (shared with gen.py)
# Every op line starts with its id, written in the line so that moving, adding
# or removing a line never renumbers another op (the id is the wire's name of
# the op). A removed op's id is kept in an @retired line, never given again.

ID_RE = re.compile(r"^(\d+|-)\s+(\S.*)$")


def split_id(line, where, local_ok):
    """(id, rest of the line) of a function line: id None for `-` (a local
    function, which has no op), where local_ok."""
    m = ID_RE.match(line)
    if not m or (m.group(1) == "-" and not local_ok):
        fail(where, "a line starts with its op id: the next free id of the file's range "
             "(never one of @retired)" + (", `-` for a local function" if local_ok else ""))
    return (None if m.group(1) == "-" else int(m.group(1))), m.group(2)


def add_retired(retired, words, where):
    """@retired ID...: ids of removed ops, id -> where it is retired."""
    if not words:
        fail(where, "expected @retired ID...")
    for w in words:
        if not w.isdigit():
            fail(where, f"@retired: '{w}' is not an id")
        if int(w) in retired:
            fail(where, f"@retired {w} twice (also {retired[int(w)]})")
        retired[int(w)] = where


def check_ids(fname, fns, retired, lo, hi):
    """Refuse an id outside [lo, hi) (hi None: no bound), one given twice, and a
    retired one given again. fns: objects with id, name and where."""
    rng = f"[{lo}, {hi})" if hi is not None else f"[{lo}, ...)"
    for i, where in sorted(retired.items()):
        if i < lo or (hi is not None and i >= hi):
            fail(where, f"@retired {i} is outside {fname}'s range {rng}")
    seen = {}
    for f in fns:
        if f.id < lo or (hi is not None and f.id >= hi):
            fail(f.where, f"{f.name}: id {f.id} is outside {fname}'s range {rng}")
        if f.id in retired:
            fail(f.where, f"{f.name}: id {f.id} is retired ({retired[f.id]}): a removed op's id is "
                 "never given again, take the next free one")
        if f.id in seen:
            fail(f.where, f"{f.name}: id {f.id} is {seen[f.id].name}'s too ({seen[f.id].where})")
        seen[f.id] = f


# ---------------------------------------------------------------- C headers

def read_headers(names):
    """Prototypes and enum type names of the headers (and those they include from
    the same folder, one level), comments stripped."""
    texts, seen = [], set()
    todo = list(names)
    for _ in range(2):
        nxt = []
        for n in todo:
            path = os.path.join(CUDA_INC, n)
            if n in seen or not os.path.exists(path):
                continue
            seen.add(n)
            t = open(path).read()
            t = re.sub(r"/\*.*?\*/", " ", t, flags=re.S)
            t = re.sub(r"//[^\n]*", " ", t)
            texts.append((n, t))
            nxt += re.findall(r'#\s*include\s*[<"]([\w.]+)[>"]', t)
        todo = nxt
    protos, enums = {}, set()
    for hdr, t in texts:
        for m in re.finditer(r"\b(\w+)\s+\w*WINAPI\s+(\w+)\s*\(([^;{]*?)\)\s*;", t):
            protos.setdefault(m.group(2), (hdr, m.group(1), " ".join(m.group(3).split())))
        # Headers without a calling-convention macro (nccl.h): a declaration
        # that starts a line, its return type a word or `const char *`.
        for m in re.finditer(r"^[ \t]*((?:const\s+)?\w+(?:\s*\*)?)\s+(\w+)\s*\(([^;{()]*)\)\s*;", t, re.M):
            if m.group(1) not in C_WORDS:
                protos.setdefault(m.group(2), (hdr, " ".join(m.group(1).split()), " ".join(m.group(3).split())))
        enums.update(re.findall(r"typedef\s+enum\s*\w*\s*\{[^}]*\}\s*(\w+)\s*;", t))
        enums.update(re.findall(r"typedef\s+enum\s+\w+\s+(\w+)\s*;", t))
    return protos, enums


def split_c_param(text):
    """'const float* const A[]' -> ('const float* const *', 'A')."""
    m = re.match(r"^(.*?)(\w+)\s*(\[\s*\])?$", text.strip())
    if not m or not m.group(1).strip():
        raise LibError(f"cannot parse parameter '{text}'")
    ctype = " ".join(m.group(1).split())
    if m.group(3):
        ctype += " *"
    return ctype, m.group(2)


# ---------------------------------------------------------------- the description

class Kind:
    def __init__(self, ctype, tag, unknown, flags, index):
        self.ctype, self.tag, self.unknown, self.index = ctype, tag, unknown, index
        self.mode = "mode" in flags
        self.early = "early" in flags
        self.charge = "charge" in flags
        self.alias = self.teardown = None
        for f in flags:
            if f.startswith("alias="):
                self.alias = f[6:]
            elif f.startswith("teardown="):
                self.teardown = f[9:]
            elif f not in ("mode", "early", "charge"):
                raise LibError(f"@handle {ctype}: unknown flag {f}")
        self.destroy = None  # the function whose parameter is `del` of this kind


class LibSo:
    def __init__(self, name, soname, header, option, env, index):
        self.name, self.soname, self.header, self.option, self.env, self.index = \
            name, soname, header, option, env, index


class Param:
    def __init__(self, ctype, name):
        self.ctype, self.name = ctype, name
        self.ptr = "*" in ctype
        self.kind = None   # annotation kind
        self.expr = None   # its size expression, if any
        self.cls = None    # int / handle / stream / ptr
        self.wire = None   # i32 u32 i64 u64 for integers
        self.handle = None # Kind, for handles and `new`
        self.which = 0     # ordinal among scalar/result parameters

    def pointee(self):
        return f"__typeof__(*(({self.ctype})0))"


class Fn:
    """One function line: name, sync, custom, params, ret (C return type),
    status_ret, lib (LibSo), route (the handle parameter whose device gets the
    call), mode_src (the handle parameter whose pointer mode rules the scalars),
    results (host outputs, in order), id and enum (op)."""


def scan_annotations(text, where):
    """'alpha:scalar(f(a, b)) A:dev' -> [('alpha', 'scalar', 'f(a, b)'), ('A', 'dev', None)]"""
    out, i, n = [], 0, len(text)
    while i < n:
        if text[i].isspace():
            i += 1
            continue
        m = re.compile(r"(\w+):(\w+)").match(text, i)
        if not m:
            fail(where, f"expected NAME:KIND at '{text[i:]}'")
        name, kind, i, expr = m.group(1), m.group(2), m.end(), None
        if i < n and text[i] == "(":
            depth, j = 0, i
            while j < n:
                depth += {"(": 1, ")": -1}.get(text[j], 0)
                if depth == 0:
                    break
                j += 1
            if depth:
                fail(where, f"unbalanced parentheses in '{text}'")
            expr, i = text[i + 1:j].strip(), j + 1
        out.append((name, kind, expr))
    return out


class LibDesc:
    """One api/<lib>.api file."""

    def __init__(self, path):
        self.path = path
        self.stem = os.path.splitext(os.path.basename(path))[0]
        self.base = None
        self.status = {}
        self.status_type = None
        self.libs, self.kinds, self.fns = [], [], []
        self.local = []   # functions written by hand on the client: nothing travels
        self.values = set()  # @value: struct types passed by value (bytes on the wire)
        self.fixes = {}      # @fix: struct type -> server function that makes an input safe
        self.private = {} # @proto: name -> (lib name, return type, parameters, where)
        self.retired = {}    # @retired: id of a removed op -> where
        lines = []
        with open(path) as f:
            for i, line in enumerate(f, 1):
                line = line.split("#", 1)[0].strip()
                if line:
                    lines.append((i, line))
        for i, line in lines:
            if line.startswith("@"):
                self.directive(line, f"{self.stem}.api:{i}")
        for key in ("success", "bad_arg", "no_server", "channel", "missing", "nomem"):
            if key not in self.status:
                fail(path, f"@status lacks {key}=")
        if self.base is None:
            fail(path, "@base is missing")
        self.protos, self.enums = read_headers([l.header for l in self.libs])
        for name, (lib, ret, params, where) in self.private.items():
            if name in self.protos:
                fail(where, f"{name} is declared in {self.protos[name][0]}: @proto is for what no header declares")
            l = next((x for x in self.libs if x.name == lib), None)
            if not l:
                fail(where, f"@proto {name}: no @lib {lib}")
            self.protos[name] = (l.header, ret, params)
        for i, line in lines:
            if not line.startswith("@"):
                where = f"{self.stem}.api:{i}"
                fid, line = split_id(line, where, True)
                f = self.function(line, where)
                if f.local and fid is not None:
                    fail(where, f"{f.name}: a local function has no op: its id is `-`")
                if not f.local and fid is None:
                    fail(where, f"{f.name}: `-` is for local functions; an op needs its id")
                f.id = fid
                (self.local if f.local else self.fns).append(f)
        names = [f.name for f in self.fns + self.local]
        if len(set(names)) != len(names):
            fail(path, "duplicate function")
        for k in self.kinds:
            if k.teardown:
                t = next((f for f in self.fns if f.name == k.teardown), None)
                if not t or not any(p.kind == "del" and p.handle is k for p in t.params):
                    fail(path, f"@handle {k.ctype}: teardown={k.teardown} is not a function that releases it")
                k.destroy = t
            if k.destroy and len(k.destroy.params) != 1:
                fail(path, f"@handle {k.ctype}: the teardown calls {k.destroy.name} with the object alone "
                     f"(name a one-parameter function with teardown=)")
            if k.alias and k.alias not in {x.tag for x in self.kinds}:
                fail(path, f"@handle {k.ctype}: alias of an unknown kind {k.alias}")
            if not k.destroy and not k.alias:
                fail(path, f"@handle {k.ctype}: no function destroys it (a `del` parameter)")
        for f in self.fns:
            f.enum = "PROTO_OP_" + f.name.upper()

    def directive(self, line, where):
        words = line.split()
        d = words[0]
        if d == "@base" and len(words) == 2:
            self.base = int(words[1])
        elif d == "@status" and len(words) >= 2:
            self.status_type = words[1]
            for w in words[2:]:
                k, _, v = w.partition("=")
                self.status[k] = v
        elif d == "@lib" and len(words) == 6:
            self.libs.append(LibSo(*words[1:], len(self.libs)))
        elif d == "@handle" and len(words) >= 4:
            try:
                self.kinds.append(Kind(words[1], words[2], words[3], words[4:], len(self.kinds)))
            except LibError as e:
                fail(where, str(e))
        elif d == "@retired":
            add_retired(self.retired, words[1:], where)
        elif d == "@value" and len(words) == 2:
            self.values.add(words[1])
        elif d == "@fix" and len(words) == 3:
            self.fixes[words[1]] = words[2]
        elif d == "@proto" and len(words) >= 3:
            m = re.match(r"^@proto\s+(\w+)\s+(\w+)\s+(\w+)\s*\(([^()]*)\)\s*;?$", line)
            if not m:
                fail(where, "expected @proto LIB RETURN-TYPE NAME(PARAMETERS)")
            if m.group(3) in self.private:
                fail(where, f"@proto {m.group(3)} twice")
            self.private[m.group(3)] = (m.group(1), m.group(2), " ".join(m.group(4).split()), where)
        else:
            fail(where, f"bad directive '{line}'")

    def kind_of(self, ctype):
        for k in self.kinds:
            if k.ctype == ctype:
                return k
        return None

    def function(self, line, where):
        cols = [c.strip() for c in line.split("|")]
        if len(cols) not in (3, 4):
            fail(where, "expected 3 or 4 columns: id name | mode | pointer parameters [| custom record]")
        f = Fn()
        f.name, f.where = cols[0], where
        if cols[1] not in ("sync", "async", "local"):
            fail(where, "mode must be sync, async or local")
        f.sync, f.local = cols[1] == "sync", cols[1] == "local"
        flags = cols[3].split() if len(cols) == 4 else []
        f.mode_param = next((x[5:] for x in flags if x.startswith("mode=")), None)
        if any(x not in ("custom", "record", "quick") and not x.startswith("mode=") for x in flags):
            fail(where, "the last column takes `custom`, `record`, `quick` and `mode=PARAM`")
        f.custom, f.record, f.quick = "custom" in flags, "record" in flags, "quick" in flags
        if f.quick and cols[1] != "sync":
            fail(where, "`quick` is for sync calls that never block")
        if f.name not in self.protos:
            fail(where, f"{f.name}: no prototype in {', '.join(l.header for l in self.libs)} (nor an @proto)")
        if f.local:
            # answered by hand-written code on the client: no op, no handler, and
            # no pointer kinds (no pointer travels)
            if flags or cols[2]:
                fail(where, f"{f.name}: a local function takes no pointer kinds and no flags")
            return f
        f.private = f.name in self.private
        hdr, f.ret, params = self.protos[f.name]
        f.lib = next((l for l in self.libs if l.header == hdr), None)
        if not f.lib:
            fail(where, f"{f.name}: declared in {hdr}, which no @lib names")
        f.status_ret = f.ret == self.status_type
        if not f.status_ret and f.ret not in INT_TYPES:
            fail(where, f"{f.name}: returns {f.ret}")
        f.params = []
        if params.strip() not in ("", "void"):
            try:
                f.params = [Param(*split_c_param(p)) for p in params.split(",")]
            except LibError as e:
                fail(where, f"{f.name}: {e}")
        byname = {p.name: p for p in f.params}
        if any(n.endswith("_") for n in byname):
            fail(where, f"{f.name}: parameter names ending in _ clash with the generated code's")
        for name, kind, expr in scan_annotations(cols[2], where):
            p = byname.get(name)
            if not p:
                fail(where, f"{f.name} has no parameter '{name}'")
            if kind not in KINDS:
                fail(where, f"{name}: unknown kind '{kind}' (one of {', '.join(KINDS)})")
            if p.kind:
                fail(where, f"{name} annotated twice")
            p.kind, p.expr = kind, expr
        self.classify(f)
        return f

    def classify(self, f):
        where, nscalar = f.where, 0
        f.route = f.mode_src = None
        for p in f.params:
            base = p.ctype.replace("const ", "").strip()
            k = self.kind_of(base)
            if p.kind == "del":
                if not k:
                    fail(where, f"{p.name}: `del` on a parameter that is not a handle")
                if not k.destroy:
                    k.destroy = f  # several may release it (destroy, abort): teardown= picks
                p.cls, p.handle = "handle", k
            elif not p.ptr:
                if p.kind:
                    fail(where, f"{p.name} is not a pointer: no kind needed")
                if k:
                    p.cls, p.handle = "handle", k
                elif base == "cudaStream_t":
                    p.cls = "stream"
                elif base in self.values:
                    p.cls = "value"
                elif base in INT_TYPES:
                    p.cls, p.wire = "int", INT_TYPES[base]
                elif base in self.enums:
                    p.cls, p.wire = "int", "i32"
                else:
                    fail(where, f"{p.name}: type {p.ctype} is not an integer, enum, handle or stream")
            else:
                if not p.kind:
                    fail(where, f"{f.name}: pointer parameter '{p.name}' ({p.ctype}) needs a kind "
                         f"({', '.join(KINDS)})")
                p.cls = "ptr"
                void = re.sub(r"\bconst\b", "", p.ctype).replace(" ", "") == "void*"
                if p.kind == "new":
                    k = self.kind_of(p.ctype.rstrip("* ").strip())
                    if not k or p.ctype.count("*") != 1:
                        fail(where, f"{p.name}: `new` needs a pointer to a handle type")
                    p.handle = k
                elif p.kind in ("in", "out", "scalar", "result") and p.expr is None:
                    if void or p.kind == "in":
                        fail(where, f"{p.name}: {p.kind} needs a size, {p.kind}(N)")
                    p.expr = f"sizeof(*{p.name})"
                elif p.kind == "dev" and p.expr:
                    fail(where, f"{p.name}: dev takes no size")
                if p.kind in ("scalar", "result"):
                    p.which = nscalar
                    nscalar += 1
                if p.kind in ("out",) and not f.sync:
                    fail(where, f"{p.name}: an async call cannot have host outputs")
                if p.kind == "result" and not f.sync:
                    fail(where, f"{p.name}: a call with a result is sync (async when the result is on the device)")
            if p.cls == "handle" and f.route is None:
                f.route = p  # its device's server gets the call
            if p.cls == "handle" and p.handle.mode and f.mode_src is None:
                f.mode_src = p
        if f.mode_param:
            # the pointer mode of this call's scalars is one of its integer
            # parameters (ncclRedOpCreatePreMulSum: residence)
            p = next((x for x in f.params if x.name == f.mode_param), None)
            if not p or p.cls != "int":
                fail(where, f"mode={f.mode_param}: not an integer parameter of {f.name}")
            f.mode_src = p
        if not f.status_ret and not f.sync:
            fail(where, f"{f.name} returns a value: it must be sync")
        f.rec_obj = next((p for p in f.params if p.kind == "new" or p.cls == "handle"), None)
        if f.record and (not f.rec_obj or f.rec_obj.kind == "del"):
            fail(where, f"{f.name}: `record` needs an object (a create's new handle, or a handle parameter)")
        if nscalar and not f.mode_src:
            fail(where, f"{f.name}: scalars, but no handle with a pointer mode (@handle ... mode)")
        f.results = [p for p in f.params if p.kind in ("out", "result")]
        if sum(p.kind == "result" for p in f.params) > 1:
            fail(where, "at most one `result` parameter")

    # ---- names
    def K(self, k):
        return f"{self.stem.upper()}_K_{k.tag.upper()}"

    def L(self, lib):
        return f"{self.stem.upper()}_LIB_{lib.name.upper()}"


# ---------------------------------------------------------------- client

def c_proto(f, name):
    params = ", ".join(f"{p.ctype} {p.name}" for p in f.params) or "void"
    return f"{f.ret} {name}({params})"


def wire_params(f):
    """Parameter name -> its index in the request; host outputs do not travel."""
    names = [p.name for p in f.params if p.kind != "out"]
    return {n: i for i, n in enumerate(names)}


def client_name(f):
    return f"fe_lib_{f.name}" if f.custom else f.name


def gen_client_h(d):
    g = d.stem.upper()
    out = [header(d), f"#ifndef FE_GEN_LIB_{g}_H\n#define FE_GEN_LIB_{g}_H\n\n#include <stdint.h>\n\n"]
    for l in d.libs:
        out.append(f"#include <{l.header}>\n")
    out.append("\n/* Client-side kinds of objects (lib.h: fe_lib_new). */\nenum {\n")
    for k in d.kinds:
        out.append(f"\tFE_{d.K(k)} = {k.index},\n")
    out.append("};\n\n")
    modes = mode_tags(d)
    if modes:
        out.append(f"/* Hand-written (frontend/src/lib_{d.stem}.c): 1 if scalar `which` of a call on\n"
                   f" * object id (or with that mode parameter) travels as a device address, else 0. */\n")
        for t in modes:
            out.append(f"int fe_{d.stem}_mode_{t}(uint64_t id, int which);\n")
    priv = [f for f in d.fns if f.private]
    if priv:
        out.append("\n/* Exported by the library but declared by no header (api: @proto). */\n")
        for f in priv:
            out.append(c_proto(f, f.name) + ";\n")
    out.append("\n/* The forwarding functions behind the entry points written by hand. */\n")
    for f in d.fns:
        if f.custom:
            out.append(c_proto(f, client_name(f)) + ";\n")
    out.append("\n#endif\n")
    return "".join(out)


def client_encode(d, f, p):
    if p.cls == "int":
        enc = "proto_msg_i64" if p.wire[0] == "i" else "proto_msg_u64"
        cast = "int64_t" if p.wire[0] == "i" else "uint64_t"
        return f"\t{enc}(&k_.m, ({cast}){p.name});\n"
    if p.cls == "handle":
        return f"\tproto_msg_u64(&k_.m, fe_lib_id({p.name}));\n"
    if p.cls == "stream":
        return f"\tproto_msg_u64(&k_.m, fe_rt_stream({p.name}));\n"
    if p.cls == "value":
        return f"\tproto_msg_bin(&k_.m, &{p.name}, sizeof({p.name}));\n"
    if p.kind == "dev":
        return f"\tproto_msg_u64(&k_.m, fe_lib_id({p.name}));\n"
    if p.kind == "in":
        return f"\tfe_lib_in(&k_, {p.name}, (size_t)({p.expr}));\n"
    if p.kind == "new":
        return f"\tproto_msg_u64(&k_.m, {p.name}_id);\n"
    if p.kind == "scalar":
        return f"\tfe_lib_scalar(&k_, {p.name}, (size_t)({p.expr}), {mode_call(d, f, p, 'fe')});\n"
    if p.kind == "result":
        return f"\tfe_lib_result(&k_, {p.name}, {p.name}_dev);\n"
    return ""  # out: nothing travels


def failed(d, var):
    """C condition: status var means no object was made. @status pending=: a
    status that still delivers one (NCCL's ncclInProgress: a nonblocking init)."""
    pending = d.status.get("pending")
    return f"{var} && {var} != {pending}" if pending else var


def mode_tag(src):
    """The name of the pointer-mode functions: the handle kind's tag, or the
    integer parameter's name (mode=PARAM)."""
    return src.name if src.cls == "int" else src.handle.tag


def mode_tags(d):
    return sorted({k.tag for k in d.kinds if k.mode} | {f.mode_param for f in d.fns if f.mode_param})


def mode_call(d, f, p, side):
    src = f.mode_src
    if src.cls == "int":
        return f"fe_{d.stem}_mode_{src.name}((uint64_t){src.name}, {p.which})"
    if side == "fe":
        return f"fe_{d.stem}_mode_{src.handle.tag}(fe_lib_id({src.name}), {p.which})"
    return f"be_{d.stem}_mode_{src.handle.tag}({src.name}, {p.which})"


def gen_client_c(d):
    st = f"{d.stem}_status"
    s = d.status
    out = [header(d), f"/* {d.stem}: entry points forwarded to the server (api/{d.stem}.api). */\n",
           f'#include "lib_{d.stem}.h" /* hand-written: lib.h, lib_{d.stem}_gen.h, helpers */\n\n',
           f"/* A channel or local failure as the library's own status (lib.h). */\n",
           f"static const fe_lib_statuses statuses = {{\"{d.stem}\", {s['no_server']}, {s['bad_arg']}, "
           f"{s['nomem']}, {s['channel']}, {s['missing']}}};\n\n",
           f"static {d.status_type} {st}(int st)\n{{\n",
           f"\treturn ({d.status_type})(st >= 0 ? st : fe_lib_fail(st, &statuses));\n}}\n"]
    for f in d.fns:
        out.append("\n" + c_proto(f, client_name(f)) + "\n{\n\tfe_lib_msg k_;\n\tint st_;\n")
        ret_fail = f"{st}(st_)" if f.status_ret else "0"
        bad = f"{st}(FE_LIB_EARG)" if f.status_ret else "0"
        # local checks first: nothing is sent for a call the library would refuse
        for p in f.params:
            if p.kind in ("new", "out", "result"):
                out.append(f"\tif (!{p.name})\n\t\treturn {bad};\n")
            elif p.kind == "in" and not p.expr.startswith("sizeof("):
                out.append(f"\tif ((size_t)({p.expr}) > FE_LIB_MAX_IN)\n\t\treturn {bad};\n")
        res = next((p for p in f.params if p.kind == "result"), None)
        if res:
            out.append(f"\tint {res.name}_dev = {mode_call(d, f, res, 'fe')};\n")
        route = f"fe_lib_id({f.route.name})" if f.route else "0"
        out.append(f"\tif ((st_ = fe_lib_begin(&k_, {f.enum}, {route}, {len(wire_params(f))})))\n\t\treturn {ret_fail};\n")
        for p in f.params:
            if p.kind == "new":
                out.append(f"\tuint64_t {p.name}_id = fe_lib_new(FE_{d.K(p.handle)}, k_.dev);\n"
                           f"\tif (!{p.name}_id) {{\n\t\tfe_lib_abort(&k_);\n\t\treturn {st}(FE_LIB_ENOMEM);\n\t}}\n")
        for p in f.params:
            out.append(client_encode(d, f, p))
            if f.record and p is f.rec_obj:
                out.append("\tsize_t rec_ = k_.m.len;\n")
        if f.record:
            obj = f"{f.rec_obj.name}_id" if f.rec_obj.kind == "new" else f"fe_lib_id({f.rec_obj.name})"
            out.append(f"\tfe_lib_record({obj}, {f.enum}, k_.m.data + rec_, k_.m.len - rec_);\n")
        news = [p for p in f.params if p.kind == "new"]
        dels = [p for p in f.params if p.kind == "del"]
        if not f.sync or res:
            if res:
                out.append(f"\tif ({res.name}_dev)\n\t\treturn {st}(fe_lib_post(&k_));\n")
            else:
                out.append("\tst_ = fe_lib_post(&k_);\n")
                for p in news:
                    out.append(f"\tif ({failed(d, 'st_')})\n\t\tfe_lib_forget({p.name}_id);\n"
                               f"\telse\n\t\t*{p.name} = ({p.ctype.rstrip('* ')})(uintptr_t){p.name}_id;\n")
                for p in dels:
                    out.append(f"\tfe_lib_forget(fe_lib_id({p.name}));\n")
                out.append(f"\treturn {st}(st_);\n}}\n")
                continue
        # sync: [status, return value?, outputs in parameter order]
        out.append("\tfe_reply r_;\n\tif ((st_ = fe_lib_call(&k_, &r_)) < 0)\n")
        out.append(f"\t\treturn {ret_fail};\n")
        i = 0
        if not f.status_ret:
            out.append(f"\tuint64_t ret_ = 0;\n\tif (fe_lib_ret(&r_, {i}, &ret_))\n\t\tst_ = FE_LIB_EPROTO;\n")
            i += 1
        for p in f.results:
            fn = "fe_lib_out" if p.kind == "out" else "fe_lib_result_out"
            out.append(f"\tif ({fn}(&r_, {i}, {p.name}, (size_t)({p.expr})))\n\t\tst_ = FE_LIB_EPROTO;\n")
            i += 1
        out.append("\tfe_reply_free(&r_);\n")
        for p in news:
            out.append(f"\tif ({failed(d, 'st_')})\n\t\tfe_lib_forget({p.name}_id);\n"
                       f"\telse\n\t\t*{p.name} = ({p.ctype.rstrip('* ')})(uintptr_t){p.name}_id;\n")
        for p in dels:
            out.append(f"\tfe_lib_forget(fe_lib_id({p.name}));\n")
        if f.status_ret:
            out.append(f"\treturn {st}(st_);\n}}\n")
        else:
            out.append(f"\treturn st_ < 0 ? ({f.ret})0 : ({f.ret})ret_;\n}}\n")
    return "".join(out)


# ---------------------------------------------------------------- server

def fnptr(d, f):
    return f"be_{d.stem}.{f.name}"


def gen_server_h(d):
    g = d.stem.upper()
    out = [header(d), f"#ifndef BE_GEN_LIB_{g}_H\n#define BE_GEN_LIB_{g}_H\n\n"]
    for l in d.libs:
        out.append(f"#include <{l.header}>\n")
    out.append('\n#include "lib.h"\n\n')
    priv = [f for f in d.fns if f.private]
    if priv:
        out.append("/* Exported by the library but declared by no header (api: @proto). */\n")
        for f in priv:
            out.append(c_proto(f, f.name) + ";\n")
        out.append("\n")
    out.append('/* The libraries, in load order. */\nenum {\n')
    for l in d.libs:
        out.append(f"\tBE_{d.L(l)} = {l.index},\n")
    out.append("};\n\n/* Handle kinds: per-session tables (lib.c). */\nenum {\n")
    for k in d.kinds:
        out.append(f"\tBE_{d.K(k)} = {k.index},\n")
    out.append(f"}};\n\n/* Every function of api/{d.stem}.api, resolved from the library when the first\n"
               f" * call needs it; NULL where the library lacks it. Typed from the header\n"
               f" * the api was generated from, so that an older header on the server (one\n"
               f" * that lacks the newest functions) still builds. */\nstruct be_{d.stem}_fns {{\n")
    for f in d.fns:
        out.append(f"\t{c_proto(f, '(*' + f.name + ')')};\n")
    out.append(f"}};\nextern struct be_{d.stem}_fns be_{d.stem};\nextern be_lib_def be_{d.stem}_lib;\n\n")
    modes = mode_tags(d)
    if modes:
        out.append(f"/* Hand-written (backend/src/lib_{d.stem}.c): 1 if scalar `which` of a call on\n"
                   f" * obj (or with that mode parameter, as a pointer) is a device address, else 0. */\n")
        for t in modes:
            out.append(f"int be_{d.stem}_mode_{t}(void *obj, int which);\n")
    charged = [k for k in d.kinds if k.charge]
    if charged:
        out.append(f"\n/* Hand-written (backend/src/lib_{d.stem}.c): device memory the library takes for\n"
                   f" * a new object of the kind (`charge`), which its tenant pays (lib.c). */\n")
        for k in charged:
            out.append(f"uint64_t be_{d.stem}_charge_{k.tag}(be_session *s);\n")
    if d.fixes:
        out.append(f"\n/* Hand-written (backend/src/lib_{d.stem}.c): make a host input from the client\n"
                   f" * safe to hand the library (@fix). */\n")
        for t, fn in sorted(d.fixes.items()):
            out.append(f"void {fn}({t} *p);\n")
    out.append("\n/* Handlers, one per function (op table: gen/dispatch.c). */\n")
    for f in d.fns:
        out.append(f"int be_gen_{f.name}(be_session *s, be_req *rq);\n")
    out.append("\n#endif\n")
    return "".join(out)


def server_decode(d, f, i, p):
    n = p.name
    if p.cls == "int":
        return f"\t{WIRE_CTYPE[p.wire]} {n} = be_lib_{p.wire}(&d_, {i});\n"
    if p.kind == "del":
        return f"\tvoid *{n} = be_lib_del(&d_, {i}, BE_{d.K(p.handle)});\n"
    if p.cls == "handle":
        return f"\tvoid *{n} = be_lib_obj(&d_, {i}, BE_{d.K(p.handle)});\n"
    if p.cls == "stream":
        return f"\tCUstream {n} = be_lib_stream(&d_, {i});\n"
    if p.cls == "value":
        return f"\t{p.ctype} {n};\n\tbe_lib_val(&d_, {i}, &{n}, sizeof({n}));\n"
    if p.kind == "dev":
        return f"\tuint64_t {n} = be_lib_u64(&d_, {i});\n"
    if p.kind == "new":
        return (f"\tuint64_t {n}_id = be_lib_new_id(&d_, {i}, BE_{d.K(p.handle)});\n"
                f"\t{p.pointee()} {n}_v = 0;\n")
    return None  # buffers: decoded once every value is known (their sizes use them)


def server_decode_buf(d, f, i, p):
    n = p.name
    if p.kind == "in":
        fix = d.fixes.get(re.sub(r"\bconst\b|\*", "", p.ctype).strip())
        mutable = " ".join(re.sub(r"\bconst\b", "", p.ctype).split())
        tail = f"\tif ({n})\n\t\t{fix}(({mutable})(uintptr_t){n});\n" if fix else ""
        return f"\tconst void *{n} = be_lib_in(&d_, {i}, (uint64_t)({p.expr}));\n" + tail
    if p.kind == "out" and p.expr == f"sizeof(*{n})":
        return f"\t{p.pointee()} {n}_v;\n\tmemset(&{n}_v, 0, sizeof({n}_v));\n"
    if p.kind == "out":
        return f"\tvoid *{n} = be_lib_out(&d_, (uint64_t)({p.expr}));\n"
    if p.kind == "scalar":
        return f"\tbe_lib_scalar {n}_s;\n\tconst void *{n} = be_lib_scalar_in(&d_, {i}, &{n}_s, {mode_arg(d, f, p)});\n"
    if p.kind == "result":
        return f"\tbe_lib_scalar {n}_s;\n\tvoid *{n} = be_lib_result(&d_, {i}, &{n}_s, {mode_arg(d, f, p)});\n"
    return ""


def mode_arg(d, f, p):
    src = f.mode_src
    obj = f"(void *)(intptr_t){src.name}" if src.cls == "int" else src.name
    return f"be_{d.stem}_mode_{mode_tag(src)}, {obj}, {p.which}"


def server_call_arg(p):
    n = p.name
    if p.cls == "int":
        return f"({p.ctype}){n}"
    if p.cls == "handle":
        return f"({p.ctype.replace('const ', '')}){n}"
    if p.cls == "stream":
        return f"(cudaStream_t){n}"
    if p.cls == "value":
        return n
    if p.kind == "dev":
        return f"({p.ctype})(uintptr_t){n}"
    if p.kind == "new" or (p.kind == "out" and p.expr == f"sizeof(*{n})"):
        return f"&{n}_v"
    return f"({p.ctype}){n}"


def server_encode_result(p):
    n = p.name
    if p.kind == "out" and p.expr == f"sizeof(*{n})":
        return f"\tproto_msg_bin(m_, &{n}_v, sizeof({n}_v));\n"
    if p.kind == "out":
        return f"\tproto_msg_bin(m_, {n}, (size_t)({p.expr}));\n"
    return f"\tbe_lib_put_result(m_, &{n}_s, {n});\n"


def gen_server_c(d):
    out = [header(d), f"/* {d.stem}: server handlers, function table, handle kinds (api/{d.stem}.api). */\n",
           f'#include "lib_{d.stem}_gen.h"\n\n#include <string.h>\n\n',
           f"struct be_{d.stem}_fns be_{d.stem};\n"]
    for f in d.fns:
        out.append(f"\nint be_gen_{f.name}(be_session *s_, be_req *rq_)\n{{\n\tbe_lib_dec d_;\n")
        out.append(f"\tbe_lib_dec_init(&d_, s_, rq_, &be_{d.stem}_lib, BE_{d.L(f.lib)}, (void **)&{fnptr(d, f)});\n")
        wire = wire_params(f)
        for p in f.params:
            out.append(server_decode(d, f, wire.get(p.name), p) or "")
        for p in f.params:
            if server_decode(d, f, wire.get(p.name), p) is None:
                out.append(server_decode_buf(d, f, wire.get(p.name), p))
        call = f"{fnptr(d, f)}({', '.join(server_call_arg(p) for p in f.params)})"
        out.append("\tint called_ = d_.st == 0;\n")
        if f.status_ret:
            out.append(f"\tif (called_)\n\t\td_.st = {call};\n")
        else:
            out.append(f"\t{f.ret} ret_ = 0;\n\tif (called_)\n\t\tret_ = {call};\n")
        for p in f.params:
            if p.kind == "new":
                out.append(f"\tif (called_ && !({failed(d, 'd_.st')}))\n"
                           f"\t\tbe_lib_add(&d_, BE_{d.K(p.handle)}, {p.name}_id, (void *){p.name}_v);\n")
        nres = len(f.results) + (0 if f.status_ret else 1)
        if not nres:
            out.append("\treturn be_lib_done(&d_);\n}\n")
            continue
        out.append("\tif (!called_ || !be_lib_wants_reply(&d_))\n\t\treturn be_lib_done(&d_);\n")
        out.append(f"\tproto_msg *m_ = be_lib_reply_begin(&d_, {nres});\n")
        if not f.status_ret:
            out.append("\tproto_msg_u64(m_, (uint64_t)ret_);\n")
        for p in f.results:
            out.append(server_encode_result(p))
        out.append("\treturn be_lib_reply_end(&d_, m_);\n}\n")
    # kinds and their destroy functions (session teardown)
    out.append("\n/* Destroy functions of the handle kinds, for the session teardown. */\n")
    for k in d.kinds:
        if k.destroy:
            f = k.destroy
            out.append(f"static int destroy_{k.tag}(void *o)\n{{\n\treturn {fnptr(d, f)} ? "
                       f"(int){fnptr(d, f)}(({k.ctype})o) : -1;\n}}\n\n")
    out.append(f"static const be_lib_kind kinds[] = {{\n")
    tags = {k.tag: k for k in d.kinds}
    for k in d.kinds:
        alias = f"BE_{d.K(tags[k.alias])}" if k.alias else "-1"
        destroy = f"destroy_{k.tag}" if k.destroy else "NULL"
        charge = f"be_{d.stem}_charge_{k.tag}" if k.charge else "NULL"
        out.append(f'\t[BE_{d.K(k)}] = {{"{k.ctype}", {k.unknown}, {alias}, {destroy}, {int(k.early)}, {charge}}},\n')
    out.append("};\n\nstatic be_lib_so libs[] = {\n")
    for l in d.libs:
        out.append(f'\t[BE_{d.L(l)}] = {{"{l.name}", "{l.soname}", "{l.option}", "{l.env}"}},\n')
    out.append("};\n\nstatic const be_lib_sym syms[] = {\n")
    for f in d.fns:
        out.append(f'\t{{"{f.name}", BE_{d.L(f.lib)}, (void **)&{fnptr(d, f)}}},\n')
    s = d.status
    out.append(f"}};\n\nbe_lib_def be_{d.stem}_lib = {{\n\t.name = \"{d.stem}\",\n"
               f"\t.libs = libs,\n\t.nlibs = {len(d.libs)},\n\t.syms = syms,\n\t.nsyms = {len(d.fns)},\n"
               f"\t.kinds = kinds,\n\t.nkinds = {len(d.kinds)},\n"
               f"\t.st_success = {s['success']},\n\t.st_bad_arg = {s['bad_arg']},\n"
               f"\t.st_unavailable = {s['no_server']},\n\t.st_missing = {s['missing']},\n"
               f"\t.st_nomem = {s['nomem']},\n\t.st_pending = {s.get('pending', -1)},\n}};\n")
    return "".join(out)


def header(d):
    return f"/* @generated by api/gen.py from api/{d.stem}.api. Do not edit. */\n"


# ---------------------------------------------------------------- entry points for gen.py

def parse_all(api_dir):
    descs = []
    for name in sorted(os.listdir(api_dir)):
        if name.endswith(".api") and name != "cuda.api":
            descs.append(LibDesc(os.path.join(api_dir, name)))
    return descs


def outputs(d):
    return {
        f"frontend/gen/lib_{d.stem}_gen.h": gen_client_h(d),
        f"frontend/gen/lib_{d.stem}.c": gen_client_c(d),
        f"backend/gen/lib_{d.stem}_gen.h": gen_server_h(d),
        f"backend/gen/lib_{d.stem}.c": gen_server_c(d),
    }
