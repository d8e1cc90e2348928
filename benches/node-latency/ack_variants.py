"""A minimal Content-Length JSON-RPC server that answers every request at once, with one
of several ACK strategies, to compare them under the same Node SDK client (see run.sh,
ACK_VARIANTS=1). Linux only (TCP_QUICKACK).

    python3 ack_variants.py --mode none|once|after-write|after-read

Prints `listening on port N` (a free port on 127.0.0.1), then serves until killed. Every
request gets `{"protocolVersion": 3, "message": "pong", "timestamp": ms}`, which is enough
for CopilotClient.start() (`connect`) and `ping`. Modes:

* none: TCP_NODELAY only (what agentwire did before);
* once: TCP_QUICKACK set once, right after accept;
* after-write: TCP_QUICKACK set again after every reply is written;
* after-read: TCP_QUICKACK set again after every read that returned data.
"""

import argparse
import json
import socket
import threading
import time

TCP_QUICKACK = getattr(socket, "TCP_QUICKACK", 12)


def quickack(sock):
    sock.setsockopt(socket.IPPROTO_TCP, TCP_QUICKACK, 1)


def serve(conn, mode):
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if mode == "once":
        quickack(conn)
    buf = b""
    while True:
        data = conn.recv(65536)
        if not data:
            return
        if mode == "after-read":
            quickack(conn)
        buf += data
        while True:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                break
            length = int(buf[:end].split(b":", 1)[1])
            if len(buf) < end + 4 + length:
                break
            msg = json.loads(buf[end + 4 : end + 4 + length])
            buf = buf[end + 4 + length :]
            if "id" not in msg:
                continue
            result = {
                "protocolVersion": 3,
                "message": "pong",
                "timestamp": int(time.time() * 1000),
            }
            body = json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}).encode()
            conn.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)
            if mode == "after-write":
                quickack(conn)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=["none", "once", "after-write", "after-read"])
    args = parser.parse_args()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    print(f"listening on port {listener.getsockname()[1]}", flush=True)
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=serve, args=(conn, args.mode), daemon=True).start()


if __name__ == "__main__":
    main()
