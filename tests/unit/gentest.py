"""What the generator's tests share (tests/unit/gen_*.py): api/ on the import
path, and checks counted, failing the test at the end."""
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
API = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "api")
sys.path.insert(0, API)

failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what)


def finish(name):
    if failures:
        sys.exit(f"{failures} check(s) failed")
    print(f"{name}: ok")
