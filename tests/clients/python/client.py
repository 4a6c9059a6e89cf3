"""pymemcache or pylibmc driven the way an application would, printing a JSON summary.

The same modes and summary as the Go, Java and Node programs beside this one (see
tests/clients/README.md): `script` (a fixed sequence whose answers are compared between
memcached and memrelay), `load` (a timed loop with a per-100-ms timeline and the last
acknowledged write of each key) and `probe` (two sets against a fake server answering one fixed
line). Run: python client.py --lib pymemcache|pylibmc [--binary] --addr HOST:PORT --mode MODE
"""

from __future__ import annotations

import argparse
import json
import sys
import time


class Pymemcache:
    name = "pymemcache"

    def __init__(self, addr: str, binary: bool, timeout_s: float = 1.0):
        from pymemcache.client.base import Client

        host, port = addr.rsplit(":", 1)
        # default_noreply=False: an application that wants to know its writes landed.
        self.c = Client((host, int(port)), connect_timeout=timeout_s, timeout=timeout_s, default_noreply=False)

    def set(self, k, v):
        return self.c.set(k, v)

    def get(self, k):
        v = self.c.get(k)
        return None if v is None else v.decode()

    def get_multi(self, ks):
        return {k: v.decode() for k, v in self.c.get_many(ks).items()}

    def delete(self, k):
        return self.c.delete(k)

    def add(self, k, v):
        return self.c.add(k, v)

    def replace(self, k, v):
        return self.c.replace(k, v)

    def incr(self, k, n):
        return self.c.incr(k, n)

    def decr(self, k, n):
        return self.c.decr(k, n)

    def gets(self, k):
        v, token = self.c.gets(k)
        return (None if v is None else v.decode()), token

    def cas(self, k, v, token):
        return self.c.cas(k, v, token)

    def touch(self, k, exp):
        return self.c.touch(k, exp)


class Pylibmc(Pymemcache):
    name = "pylibmc"

    def __init__(self, addr: str, binary: bool, timeout_s: float = 1.0):
        import pylibmc

        self.name = "pylibmc-binary" if binary else "pylibmc"
        behaviors = {
            "cas": True,
            "connect_timeout": int(timeout_s * 1000),  # ms
            "receive_timeout": int(timeout_s * 1_000_000),  # us
            "send_timeout": int(timeout_s * 1_000_000),  # us
            "_poll_timeout": int(timeout_s * 1000),  # ms, libmemcached waits this long for a reply
            "tcp_nodelay": True,
        }
        self.c = pylibmc.Client([addr], binary=binary, behaviors=behaviors)

    def get(self, k):
        v = self.c.get(k)
        return None if v is None else (v.decode() if isinstance(v, bytes) else str(v))

    def get_multi(self, ks):
        return {k: (v.decode() if isinstance(v, bytes) else str(v)) for k, v in self.c.get_multi(ks).items()}

    def incr(self, k, n):
        import pylibmc

        try:
            return self.c.incr(k, n)
        except pylibmc.NotFound:
            return None

    def decr(self, k, n):
        import pylibmc

        try:
            return self.c.decr(k, n)
        except pylibmc.NotFound:
            return None

    def gets(self, k):
        v, token = self.c.gets(k)
        return (None if v is None else (v.decode() if isinstance(v, bytes) else str(v))), token


def kind(exc: BaseException) -> str:
    name = type(exc).__name__
    text = str(exc).lower()
    if "timed out" in text or "timeout" in text or isinstance(exc, TimeoutError):
        return "timeout"
    if isinstance(exc, ConnectionRefusedError) or "refused" in text:
        return "refused"
    if isinstance(exc, (ConnectionError, BrokenPipeError)) or "closed" in text:
        return "conn_closed"
    return name


class Run:
    def __init__(self, lib, mode: str):
        self.lib = lib
        self.s = {
            "client": lib.name, "mode": mode, "ops": 0, "ok": 0, "errors": {},
            "reconnects": None, "seconds": 0.0, "throughput": 0.0, "reads": {},
        }
        if mode == "script":
            self.s["answers"] = []

    def call(self, what: str, fn, *args):
        """Calls fn; its result, or None after counting the exception by kind."""
        self.s["ops"] += 1
        try:
            result = fn(*args)
        except Exception as exc:  # every library error is an outcome to count, not a crash
            k = kind(exc)
            self.s["errors"][k] = self.s["errors"].get(k, 0) + 1
            if "answers" in self.s:
                self.s["answers"].append(f"{what}: error {k}")
            return exc
        self.s["ok"] += 1
        if "answers" in self.s:
            self.s["answers"].append(f"{what}: {normalise(result)}")
        return result

    def script(self, prefix: str):
        lib, reads = self.lib, self.s["reads"]
        key = lambda i: f"{prefix}k{i}"  # noqa: E731
        for i in range(20):
            self.call(f"set {key(i)}", lib.set, key(i), f"v{i}")
        for i in range(22):
            v = self.call(f"get {key(i)}", lib.get, key(i))
            if isinstance(v, str):
                reads[key(i)] = v
        keys = [key(i) for i in range(0, 25, 2)]
        self.call("getmulti", lambda: dict(sorted(lib.get_multi(keys).items())))
        self.call("delete k3", lib.delete, key(3))
        self.call("delete k3 again", lib.delete, key(3))
        self.call("get k3 after delete", lib.get, key(3))
        self.call("add k3", lib.add, key(3), "added")
        self.call("add k4 (exists)", lib.add, key(4), "x")
        self.call("replace k30 (missing)", lib.replace, key(30), "x")
        self.call("set counter", lib.set, key(100), "10")
        self.call("incr counter 5", lib.incr, key(100), 5)
        self.call("decr counter 20", lib.decr, key(100), 20)
        self.call("incr missing", lib.incr, key(101), 1)
        got = self.call("gets k5", lib.gets, key(5))
        if isinstance(got, tuple):
            self.call("cas k5 fresh", lib.cas, key(5), "cas1", got[1])
            self.call("cas k5 stale", lib.cas, key(5), "cas2", got[1])
        v = self.call("get k5", lib.get, key(5))
        if isinstance(v, str):
            reads[key(5)] = v
        self.call("touch k6", lib.touch, key(6), 100)
        self.call("touch missing", lib.touch, key(31), 100)
        self.call("set 2 MiB", lib.set, key(40), "x" * (2 << 20))

    def load(self, prefix: str, keys: int, seconds: float, max_ops: int = 0):
        lib, s = self.lib, self.s
        s["acked"], s["attempted"], s["acked_at"], s["stale_reads"] = {}, {}, {}, 0
        buckets: dict[int, list[int]] = {}
        deadline = time.monotonic() + seconds
        seq = 0
        while time.monotonic() < deadline and (max_ops == 0 or seq < max_ops):
            i = seq % keys
            k = f"{prefix}k{i}"
            op = (seq + seq // keys) % 10  # shifts each round: every key sees every op
            write = op in (0, 1, 2, 3, 9)
            if op <= 3:
                v = f"{k}#{seq}"
                s["attempted"].setdefault(k, []).append(v)
                r = self.call("", lib.set, k, v)
                ok = r is True
            elif op == 9:
                s["attempted"].setdefault(k, []).append("")
                r = self.call("", lib.delete, k)
                ok = not isinstance(r, Exception)
            elif op == 5:
                ks = [k, f"{prefix}k{(i + 1) % keys}", f"{prefix}k{(i + 2) % keys}"]
                r = self.call("", lib.get_multi, ks)
                ok = not isinstance(r, Exception)
            else:
                r = self.call("", lib.get, k)
                ok = not isinstance(r, Exception)
                if isinstance(r, str):
                    s["reads"][k] = r
                if ok and k in s["acked"] and (r or "") not in s["attempted"][k][s["acked"][k]:]:
                    s["stale_reads"] += 1  # older than the last acknowledged write
            seq += 1
            if ok and write:  # the index of the key's last acknowledged write
                s["acked"][k] = len(s["attempted"][k]) - 1
                s["acked_at"][k] = int(time.time() * 1000)
            b = int(time.time() * 10) * 100
            bucket = buckets.setdefault(b, [b, 0, 0])
            bucket[1 if ok else 2] += 1
            if not ok:
                time.sleep(0.001)  # an application would not spin on a failing call
        s["timeline"] = sorted(buckets.values())

    def probe(self, prefix: str):
        s = self.s
        s["answers"] = []
        for _ in range(2):
            s["ops"] += 1
            try:
                r = self.lib.set(prefix + "probe", "v")
                s["answers"].append(f"returned {r!r}")
            except Exception as exc:
                s["answers"].append(f"raised {type(exc).__name__}: {exc}")


def normalise(result):
    if isinstance(result, tuple):  # gets: the token differs between servers
        return f"({result[0]!r}, token)" if result[0] is not None else "(None, None)"
    if isinstance(result, int) and not isinstance(result, bool):
        return str(result)
    return repr(result)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--lib", choices=("pymemcache", "pylibmc"), required=True)
    p.add_argument("--binary", action="store_true", help="pylibmc: the binary protocol")
    p.add_argument("--addr", default="127.0.0.1:11211")
    p.add_argument("--mode", choices=("script", "load", "probe"), default="script")
    p.add_argument("--prefix", default="py:")
    p.add_argument("--keys", type=int, default=50)
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--ops", type=int, default=0, help="load: stop after this many operations (0: none)")
    p.add_argument("--timeout", type=float, default=1.0, help="the library's connect/receive timeout, s")
    a = p.parse_args()
    lib = (Pymemcache if a.lib == "pymemcache" else Pylibmc)(a.addr, a.binary, a.timeout)
    run = Run(lib, a.mode)
    start = time.monotonic()
    if a.mode == "script":
        run.script(a.prefix)
    elif a.mode == "load":
        run.load(a.prefix, a.keys, a.seconds, a.ops)
    else:
        run.probe(a.prefix)
    run.s["seconds"] = time.monotonic() - start
    run.s["throughput"] = run.s["ops"] / run.s["seconds"] if run.s["seconds"] else 0.0
    json.dump(run.s, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
