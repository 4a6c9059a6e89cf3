"""A fake memcached that answers every request with one fixed line, for tests/clients.

Used only for what no real server shows: how a client library reacts to a write answered with
`SERVER_ERROR ...`, `NOT_STORED`, `ERROR` or `CLIENT_ERROR ...` (the candidate replies for
"too few replicas succeeded"). It parses just enough of the text protocol to answer once per
request (a storage command's data block is skipped) and counts the connections it accepted, so
a test can see whether the client reconnected. `version` is answered as memcached would, since
some clients ask for it when they connect.
"""

from __future__ import annotations

import socket
import threading


class FakeServer:
    def __init__(self, reply: bytes):
        self.reply = reply
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.requests: list[bytes] = []
        self._lock = threading.Lock()
        self._closed = False
        self._conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
                self._conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        buf = b""
        try:
            while True:
                while b"\r\n" not in buf:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    buf += chunk
                line, buf = buf.split(b"\r\n", 1)
                words = line.split()
                if not words:
                    continue
                with self._lock:
                    self.requests.append(line)
                cmd = words[0].lower()
                if cmd in (b"set", b"add", b"replace", b"append", b"prepend", b"cas") and len(words) >= 5:
                    need = int(words[4]) + 2
                    while len(buf) < need:
                        chunk = conn.recv(65536)
                        if not chunk:
                            return
                        buf += chunk
                    buf = buf[need:]
                if cmd == b"version":
                    conn.sendall(b"VERSION 1.6.21\r\n")
                elif b"noreply" in words:
                    continue
                else:
                    conn.sendall(self.reply)
        except OSError:
            return

    def close(self) -> None:
        self._closed = True
        self.sock.close()
        with self._lock:
            for c in self._conns:
                try:
                    c.close()
                except OSError:
                    pass
