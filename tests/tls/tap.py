#!/usr/bin/env python3
"""tap.py: a TCP proxy that records every byte the client sends.

    tap.py LISTEN_PORT_FILE TARGET_PORT CAPTURE_FILE [HOST]

Listens on HOST (default 127.0.0.1; any free port, written to LISTEN_PORT_FILE),
forwards each connection to HOST:TARGET_PORT both ways, and appends what clients send to
CAPTURE_FILE: what anyone on the path would see. Runs until killed.
"""
import socket
import sys
import threading


def pump(src, dst, capture, lock):
    try:
        while True:
            b = src.recv(65536)
            if not b:
                break
            if capture is not None:
                with lock:
                    capture.write(b)
                    capture.flush()
            dst.sendall(b)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def main():
    port_file, target, cap_path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    host = sys.argv[4] if len(sys.argv) > 4 else "127.0.0.1"
    lock = threading.Lock()
    capture = open(cap_path, "ab")
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((host, 0))
    srv.listen(16)
    with open(port_file + ".tmp", "w") as f:
        f.write("%d\n" % srv.getsockname()[1])
    import os
    os.rename(port_file + ".tmp", port_file)
    while True:
        c, _ = srv.accept()
        u = socket.create_connection((host, target))
        for s in (c, u):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=pump, args=(c, u, capture, lock), daemon=True).start()
        threading.Thread(target=pump, args=(u, c, None, lock), daemon=True).start()


if __name__ == "__main__":
    main()
