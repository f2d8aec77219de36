#!/usr/bin/env python3
"""api/gen.py's device ranges (`dptr[N] name`): the checks the generated
dispatch runs before the driver call, and the descriptions the generator
refuses (ctest api.gen_ranges)."""
from gentest import check, finish
import gen  # noqa: E402  (api/, put on the path by gentest)


def refused(line):
    try:
        gen.Op(line, 1)
    except SystemExit as e:
        return str(e)
    return None


# Two ranges of one length on a stream: the length computed once, an empty
# range answered before the checks, each check named by its argument and
# falling back to the capture's answer on that stream.
o = gen.Op("cp | async | dptr[len] dst, dptr[len] src, u64 len, stream stream | | cuCp(dst, src, len, stream)", 1)
c = gen.server_ranges(o)
check("\tif (len == 0)\n\t\treturn CUDA_SUCCESS;\n" in c, "an empty copy does nothing")
check('be_capture_unchecked(s, stream, "cp (dst)", dst, len)' in c, "dst checked, named, capture fallback")
check('be_capture_unchecked(s, stream, "cp (src)", src, len)' in c, "src checked, named, capture fallback")
check(c.index("len == 0") < c.index("be_ranges_check"), "the empty range before the checks")
check(c.index("(dst)") < c.index("(src)"), "ranges checked in the order of the arguments")

# A product: computed without wrapping; one range: named by the op alone.
o = gen.Op("ms | async | dptr[count*elemsize] dst, u32 elemsize, u64 count, stream stream | | cuMs(dst, count, stream)", 1)
c = gen.server_ranges(o)
check("__builtin_mul_overflow((uint64_t)count, (uint64_t)elemsize, &dst_range)" in c, "the product checked")
check("\t\treturn CUDA_ERROR_INVALID_VALUE;\n\tif (dst_range == 0)" in c, "a wrapping product refused first")
check('"ms", dst, dst_range' in c, "one range: the op's name alone")

# No stream: nothing a capture could record, so a bad range is refused.
o = gen.Op("q | sync | dptr[n*k*4] p, u32 n, u64 k | | cuQ(p, n)", 1)
c = gen.server_ranges(o)
check('be_bad_range(s, "q", p, p_range)' in c, "no stream: be_bad_range")
check("__builtin_mul_overflow(p_range, 4, &p_range)" in c, "three factors chained")

# What the generator refuses.
check(refused("a | async | dptr dst, u64 n | | cuA(dst, n)"), "a driver op's dptr without a length")
check(refused("a | async | dptr[n] dst, u64 n | | custom"), "a range on a custom op")
check(refused("a | async+loop | dptr[n] dst, u64 n | | cuA(dst, n)"), "a range on a +loop op")
check(refused("a | async | dptr[n+1] dst, u64 n | | cuA(dst, n)"), "a sum")
check(refused("a | async | dptr[x] dst, f64 x | | cuA(dst, x)"), "a non-integer length")
check(refused("a | async | dptr[m] dst, u64 n | | cuA(dst, n)"), "an unknown name")
check(refused("a | async | u64[n] dst, u64 n | | cuA(dst, n)"), "a range on a non-dptr")
check(refused("a | sync | u64 n | dptr[n] r | cuA(&r, n)"), "a range on a result")
check(refused("a | async | dptr[n] err, u64 n | | cuA(err, n)"), "a name the dispatch uses")
try:
    gen.server_ranges(gen.Op("a | async | dptr[n] p, u64 n, stream x, stream y | | cuA(p, n, x, y)", 1))
    check(False, "ranges on an op with two streams")
except SystemExit:
    pass

# The description itself: every op generates (memcpy_dtod is one of these).
ops = gen.parse()
dtod = [op for op in ops if op.name == "memcpy_dtod"][0]
check(dtod.server.startswith("cuMemcpyDtoDAsync("), "memcpy_dtod is a driver call")
check('"memcpy_dtod (dst)"' in gen.server_ranges(dtod), "memcpy_dtod's dst named as its handler named it")

finish("gen_ranges")
