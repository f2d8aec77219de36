# trace_py.py: calls cudaMalloc through ctypes, from Python, for run_obs.sh's
# trace test (REMOTE_GPU_TRACE=cudaMalloc=1, libremote.so preloaded).
#
# PyDLL keeps the GIL during the call, so the trace must show these Python
# frames; CDLL releases it, so the trace must say that the thread does not hold
# the GIL (and show none). Prints "ok" when both calls succeeded.
import ctypes
import sys

MIB = 1 << 20


def alloc_with_gil(size):
    lib = ctypes.PyDLL(None)
    p = ctypes.c_void_p()
    rc = lib.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(size))  # TRACED: the trace must name this line
    return rc, p


def alloc_without_gil(size):
    lib = ctypes.CDLL(None)
    p = ctypes.c_void_p()
    rc = lib.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(size))
    return rc, p


def main():
    rc1, p1 = alloc_with_gil(MIB)
    rc2, p2 = alloc_without_gil(MIB)
    lib = ctypes.CDLL(None)
    lib.cudaFree(p1)
    lib.cudaFree(p2)
    print("ok" if rc1 == 0 and rc2 == 0 else "cudaMalloc failed: %d %d" % (rc1, rc2))
    sys.stdout.flush()
    return 0 if rc1 == 0 and rc2 == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
