#!/usr/bin/env python3
"""Redis load and checks for the e2e tests (a minimal RESP client; no packages needed).

  redis_load.py write PORT PROGRESS_FILE PREFIX
      Transactions i = 1, 2, ...: MULTI; SET PREFIX:i i; SET PREFIX:last i; EXEC, each awaited,
      until killed. After each one, PROGRESS_FILE holds "ACKED SENT": the last
      transaction Redis confirmed and the last one sent. A snapshot taken between two
      readings of the file holds a prefix of them: last = L with ACKED-before <= L <=
      SENT-after, every PREFIX:j for j <= L equal to j, none above.
  redis_load.py check PORT PREFIX LOW HIGH
      Checks exactly that on the Redis at PORT; prints "dataset ok: last L" or what
      differs, exit status 0 or 1.
  redis_load.py survive PORT SECONDS PREFIX [STOP_FILE]
      For SECONDS (or until STOP_FILE exists), half writes (the transactions of `write`) and half reads (GET of an
      acknowledged PREFIX:j, checked), as YCSB A mixes them; a failed request (the
      server went away: a migration's switch) is retried on a new connection to the
      same port, every 10 ms. Prints one JSON line: acked and sent (as `write`'s
      file), the reads checked and wrong, the errors, and the windows without service
      (unix seconds from the first failure to the next success).
  redis_load.py clients PORT N
      N connections at once, each writing and reading back its own 100 keys, over
      interleaved requests; prints "N clients ok" or the first difference.
"""
import json
import os
import random
import socket
import sys
import time


class Redis:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.buf = b""

    def send(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.sock.sendall(out)

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("connection closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind in (b"+", b":"):
            return rest.decode()
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                chunk = self.sock.recv(65536)
                if not chunk:
                    raise ConnectionError("connection closed")
                self.buf += chunk
            data, self.buf = self.buf[:n], self.buf[n + 2:]
            return data.decode()
        if kind == b"*":
            return [self.reply() for _ in range(int(rest))]
        raise RuntimeError("bad reply %r" % line)

    def call(self, *args):
        self.send(*args)
        return self.reply()


def write(port, progress, prefix):
    r = Redis(port)
    f = open(progress, "w")
    acked = 0
    i = 0
    while True:
        i += 1
        f.seek(0)
        f.write("%d %d          \n" % (acked, i))
        f.flush()
        for cmd in (("MULTI",), ("SET", "%s:%d" % (prefix, i), i), ("SET", prefix + ":last", i),
                    ("EXEC",)):
            r.send(*cmd)
        for _ in range(4):
            r.reply()
        acked = i
        f.seek(0)
        f.write("%d %d          \n" % (acked, i))
        f.flush()


class Survivor:
    """A client that reconnects to the same port and retries what failed."""

    def __init__(self, port):
        self.port, self.r, self.errors, self.windows, self.down = port, None, 0, [], None

    def run(self, *cmds):
        while True:
            try:
                if self.r is None:
                    self.r = Redis(self.port)
                for cmd in cmds:
                    self.r.send(*cmd)
                out = [self.r.reply() for _ in cmds]
                if self.down is not None:
                    self.windows.append((self.down, time.time()))
                    self.down = None
                return out
            except (ConnectionError, OSError, RuntimeError):
                self.errors += 1
                if self.down is None:
                    self.down = time.time()
                if self.r is not None:
                    self.r.sock.close()
                    self.r = None
                time.sleep(0.01)


def survive(port, seconds, prefix, stop=None):
    c = Survivor(port)
    acked = sent = checked = wrong = 0
    end = time.time() + seconds
    while time.time() < end and not (stop and os.path.exists(stop)):
        sent += 1
        c.run(("MULTI",), ("SET", "%s:%d" % (prefix, sent), sent), ("SET", prefix + ":last", sent),
              ("EXEC",))
        acked = sent
        j = random.randint(1, acked)
        if c.run(("GET", "%s:%d" % (prefix, j)))[0] != str(j):
            wrong += 1
        checked += 1
    print(json.dumps({"acked": acked, "sent": sent, "reads": checked, "wrong": wrong,
                      "errors": c.errors, "windows": c.windows}))
    return 0


def check(port, prefix, low, high):
    r = Redis(port)
    last = r.call("GET", prefix + ":last")
    if last is None:
        print("no '%s:last' key: the dataset is empty" % prefix)
        return 1
    last = int(last)
    if not low <= last <= high:
        print("last %d is outside [%d, %d]: not the snapshot instant" % (last, low, high))
        return 1
    for start in range(1, last + 1, 500):
        nums = range(start, min(last, start + 499) + 1)
        vals = r.call("MGET", *["%s:%d" % (prefix, j) for j in nums])
        for j, v in zip(nums, vals):
            if v != str(j):
                print("%s:%d is %r, want %d (written before the snapshot)" % (prefix, j, v, j))
                return 1
    later = ["%s:%d" % (prefix, j) for j in range(last + 1, high + 2)]
    if later and int(r.call("EXISTS", *later)) != 0:
        print("keys written after the snapshot instant are present")
        return 1
    print("dataset ok: last %d (in [%d, %d]), %d keys checked, none later" % (last, low, high, last))
    return 0


def clients(port, n):
    conns = [Redis(port) for _ in range(n)]
    for k in range(100):
        for c, r in enumerate(conns):
            r.send("SET", "c%d:%d" % (c, k), "%d-%d" % (c, k * k))
        for r in conns:
            if r.reply() != "OK":
                print("SET failed")
                return 1
    for c, r in enumerate(conns):
        r.send("MGET", *["c%d:%d" % (c, k) for k in range(100)])
    for c, r in enumerate(conns):
        vals = r.reply()
        want = ["%d-%d" % (c, k * k) for k in range(100)]
        if vals != want:
            print("client %d reads back %r..., want %r..." % (c, vals[:2], want[:2]))
            return 1
    print("%d clients ok" % n)
    return 0


def main():
    mode, port = sys.argv[1], int(sys.argv[2])
    if mode == "write":
        try:
            write(port, sys.argv[3], sys.argv[4])
        except (ConnectionError, OSError, RuntimeError):
            return 0  # the VM went away: the test decides what that means
    if mode == "check":
        return check(port, sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    if mode == "clients":
        return clients(port, int(sys.argv[3]))
    if mode == "survive":
        return survive(port, float(sys.argv[3]), sys.argv[4],
                       sys.argv[5] if len(sys.argv) > 5 else None)
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
