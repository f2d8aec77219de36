#!/usr/bin/env python3
"""Records the seed corpus of fuzz_ops from real sessions: a proxy between
libremote.so and remote-gpud (on the driver test double) that writes the
request frames of each session after its hello, as they travelled, into one
file of OUT (frames whose payload would make the file larger than MAX_BYTES
are left out, so that seeds stay small).

    record_ops.py OUT BUILD PROGRAM...   (each PROGRAM: an e2e test program)

RECORD_OPS_DEVICES (default 0) is the server's --device: with FAKECUDA_DEVICES=2
and "all", a program's frames name two devices (multi_gpu's seed).

Run it again when the protocol's shapes change; the files are committed in
tests/fuzz/corpus_ops/ (regression seeds of fixed bugs live there too).
"""
import os, socket, struct, subprocess, sys, tempfile, threading, time

HDR = struct.Struct("<IHHIIQQii")
OP_HELLO = 1
MAX_BYTES = 256 << 10
MAX_FRAMES = 256


def pump(src, dst, record):
    buf = b""
    try:
        while True:
            data = src.recv(1 << 20)
            if not data:
                break
            dst.sendall(data)
            if record is None:
                continue
            buf += data
            while len(buf) >= HDR.size:
                _, _, _, hl, op, pl, _, _, _ = HDR.unpack_from(buf)
                n = HDR.size + hl + pl
                if len(buf) < n:
                    break
                record(op, buf[:n])
                buf = buf[n:]
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def main():
    out, build, programs = sys.argv[1], sys.argv[2], sys.argv[3:]
    os.makedirs(out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="record_ops.")
    pf = os.path.join(work, "port")
    srv = subprocess.Popen([f"{build}/backend/remote-gpud", "--listen", "127.0.0.1:0", "--port-file", pf,
                            "--driver", f"{build}/tests/fakecuda/libcuda.so.1", "--isolation", "thread",
                            "--device", os.environ.get("RECORD_OPS_DEVICES", "0"),
                            "--cubin-store", os.path.join(work, "store")], stderr=subprocess.DEVNULL)
    while not (os.path.exists(pf) and open(pf).read().strip()):
        time.sleep(0.05)
    port = int(open(pf).read())
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(8)
    for prog in programs:
        frames, size = [], [0]

        def record(op, frame):
            if op == OP_HELLO or len(frames) >= MAX_FRAMES or size[0] + len(frame) > MAX_BYTES:
                return
            frames.append(frame)
            size[0] += len(frame)

        env = dict(os.environ, REMOTE_GPU=f"127.0.0.1:{lsock.getsockname()[1]}", RGTEST_FAKE="1",
                   LD_PRELOAD=f"{build}/frontend/libremote.so", LD_LIBRARY_PATH=f"{build}/frontend/driver")
        cl = subprocess.Popen([prog], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        threads = []
        lsock.settimeout(30)
        try:
            while cl.poll() is None:
                lsock.settimeout(0.5)
                try:
                    c, _ = lsock.accept()
                except socket.timeout:
                    continue
                s = socket.create_connection(("127.0.0.1", port))
                for a, b, r in ((c, s, record), (s, c, None)):
                    t = threading.Thread(target=pump, args=(a, b, r), daemon=True)
                    t.start()
                    threads.append(t)
        finally:
            cl.wait(timeout=120)
        for t in threads:
            t.join(timeout=10)
        if frames:
            with open(os.path.join(out, os.path.basename(prog)), "wb") as f:
                f.write(b"".join(frames))
        print(f"{os.path.basename(prog)}: {len(frames)} frames, {size[0]} bytes")
    srv.terminate()
    srv.wait()


if __name__ == "__main__":
    main()
