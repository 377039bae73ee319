"""The C ABI's shared library (libzlink_c.so, what Unity's P/Invoke loads)
through Python's ctypes, against a zlink-node it starts: login, MOVE
requests answered by position, the player's tick push, a typed error, close.
The lobby's messages are MessagePack maps (docs/wire.md "The lobby game's
messages"), written here by hand for the few small values they carry.

    python3 clients/c/tests/ctypes_smoke.py $CARGO_TARGET_DIR/debug/libzlink_c.so \
        $CARGO_TARGET_DIR/debug/zlink-node

Every wait is bounded (WAIT_S) and waits on the node's output or the
client's events. Ends with "N passed, 0 failed".
"""

import ctypes as C
import os
import re
import selectors
import subprocess
import sys
import tempfile
import time

WAIT_S = 20.0
LOGIN, MOVE, TICK = 1, 2, 100
EVENT_LOGGED_IN, EVENT_REPLY, EVENT_PUSH, EVENT_CLOSED = 1, 2, 3, 4


def mp(fields):
    """A MessagePack map of short string keys to short strings or integers
    in 0..127: all the lobby's messages here need (fixmap, fixstr, fixint)."""
    out = bytes([0x80 | len(fields)])
    for key, value in fields.items():
        for item in (key, value):
            if isinstance(item, str):
                raw = item.encode()
                assert len(raw) < 32
                out += bytes([0xA0 | len(raw)]) + raw
            else:
                assert 0 <= item < 128
                out += bytes([item])
    return out


class Options(C.Structure):
    # The field order and types of zlink_options in include/zlink.h.
    _fields_ = [
        ("address", C.c_char_p),
        ("has_login", C.c_uint8),
        ("login_key", C.c_uint16),
        ("login_payload", C.c_char_p),
        ("login_payload_len", C.c_size_t),
        ("login_deadline_ms", C.c_uint32),
        ("request_deadline_ms", C.c_uint32),
        ("connect_timeout_ms", C.c_uint32),
        ("reconnect", C.c_uint8),
        ("reconnect_initial_ms", C.c_uint32),
        ("reconnect_max_ms", C.c_uint32),
        ("reconnect_multiplier", C.c_double),
        ("reconnect_jitter", C.c_double),
        ("reconnect_max_attempts", C.c_uint32),
        ("keepalive_interval_ms", C.c_uint32),
        ("keepalive_timeout_ms", C.c_uint32),
        ("frame_len_max", C.c_uint32),
        ("max_in_flight", C.c_uint32),
        ("outbound_max", C.c_uint32),
        ("max_events", C.c_uint32),
    ]


class Event(C.Structure):
    # zlink_event in include/zlink.h.
    _fields_ = [
        ("kind", C.c_uint32),
        ("request_id", C.c_uint64),
        ("key", C.c_uint16),
        ("payload", C.POINTER(C.c_uint8)),
        ("payload_len", C.c_size_t),
        ("error_kind", C.c_uint8),
        ("error_reason", C.c_uint8),
        ("remote", C.c_uint8),
        ("outcome_unknown", C.c_uint8),
        ("cause", C.c_uint8),
        ("close_reason", C.c_uint8),
        ("will_reconnect", C.c_uint8),
        ("reconnect", C.c_uint8),
        ("attempt", C.c_uint32),
        ("delay_ms", C.c_uint32),
    ]

    def data(self):
        return C.string_at(self.payload, self.payload_len) if self.payload_len else b""


def load(path):
    lib = C.CDLL(path)
    lib.zlink_options_default.argtypes = [C.POINTER(Options)]
    lib.zlink_client_new.argtypes = [C.POINTER(Options)]
    lib.zlink_client_new.restype = C.c_void_p
    for name in ("zlink_connect", "zlink_poll", "zlink_close", "zlink_client_free", "zlink_state"):
        getattr(lib, name).argtypes = [C.c_void_p]
    lib.zlink_wait.argtypes = [C.c_void_p, C.c_uint32]
    lib.zlink_next_event.argtypes = [C.c_void_p, C.POINTER(Event)]
    lib.zlink_request.argtypes = [C.c_void_p, C.c_uint16, C.c_char_p, C.c_size_t, C.c_uint32, C.POINTER(C.c_uint64)]
    lib.zlink_reason_name.restype = C.c_char_p
    lib.zlink_reason_name.argtypes = [C.c_uint8]
    return lib


class Node:
    """A zlink-node on a config written here; its stdout read line by line."""

    def __init__(self, binary):
        self.dir = tempfile.mkdtemp(prefix="zlink-c-ctypes-")
        config = os.path.join(self.dir, "node.toml")
        with open(config, "w") as f:
            f.write(
                '[node]\nrid = 1\nmeshes = ["lobby"]\nlog_level = "warn"\nshards = 1\n'
                'pin_cores = false\n\n[listen]\nstream = "127.0.0.1:0"\n\n'
                '[store]\nurl = "embedded"\n\n[timeouts]\nshutdown_deadline_ms = 1000\n'
            )
        self.proc = subprocess.Popen([binary, "--config", config], stdout=subprocess.PIPE)
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.proc.stdout, selectors.EVENT_READ)
        self.buf = b""
        end = time.monotonic() + WAIT_S
        while True:
            line = self.line(end)
            m = re.search(r"^zlink-node ready: .* stream=127\.0\.0\.1:(\d+) ", line)
            if m:
                self.port = int(m.group(1))
                return

    def line(self, end):
        while b"\n" not in self.buf:
            left = end - time.monotonic()
            assert left > 0, "zlink-node printed no line in time"
            if self.sel.select(left):
                chunk = os.read(self.proc.stdout.fileno(), 4096)
                assert chunk, "zlink-node exited"
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode()

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=WAIT_S)


def next_event(lib, client, ev):
    end = time.monotonic() + WAIT_S
    while lib.zlink_next_event(client, C.byref(ev)) == 0:
        assert time.monotonic() < end, "no event in time"
        assert lib.zlink_wait(client, 100) >= 0
    return ev


def main():
    lib = load(sys.argv[1])
    node = Node(sys.argv[2])
    passed = 0
    try:
        o = Options()
        assert lib.zlink_options_default(C.byref(o)) == 0
        o.address = f"127.0.0.1:{node.port}".encode()
        o.has_login, o.login_key = 1, LOGIN
        login = mp({"player": "py-player"})
        o.login_payload, o.login_payload_len = login, len(login)
        client = lib.zlink_client_new(C.byref(o))
        assert client
        assert lib.zlink_connect(client) == 0
        ev = Event()
        next_event(lib, client, ev)
        assert (ev.kind, ev.reconnect, ev.data()) == (EVENT_LOGGED_IN, 0, login), (ev.kind, ev.data())
        passed += 1

        pushes, replies = [], []
        for i in range(1, 5):
            rid = C.c_uint64()
            step = mp({"player": "py-player", "dx": 1, "dy": 0})
            assert lib.zlink_request(client, MOVE, step, len(step), 0, C.byref(rid)) == 0
            while True:
                next_event(lib, client, ev)
                if ev.kind == EVENT_PUSH:
                    pushes.append((ev.key, ev.data()))
                    continue
                assert ev.kind == EVENT_REPLY and ev.request_id == rid.value and ev.error_kind == 0
                replies.append(ev.data())
                break
        assert replies == [mp({"x": x, "y": 0}) for x in range(1, 5)], replies
        while not pushes:
            next_event(lib, client, ev)
            if ev.kind == EVENT_PUSH:
                pushes.append((ev.key, ev.data()))
        assert pushes == [(TICK, mp({"moves": 4}))], pushes
        passed += 1

        rid = C.c_uint64()
        assert lib.zlink_request(client, 999, b"x", 1, 0, C.byref(rid)) == 0
        next_event(lib, client, ev)
        assert ev.kind == EVENT_REPLY and ev.remote == 1
        assert lib.zlink_reason_name(ev.error_reason) == b"NoPacketHandler"
        passed += 1

        assert lib.zlink_close(client) == 0
        next_event(lib, client, ev)
        assert ev.kind == EVENT_CLOSED and ev.will_reconnect == 0
        assert lib.zlink_client_free(client) == 0
        passed += 1
    finally:
        node.stop()
    print(f"ctypes: {passed} passed, 0 failed")


if __name__ == "__main__":
    main()
