#!/usr/bin/env python3
"""threads.py: where one system's CPU goes, thread by thread, per message.

Runs `zlink-bench --system SYSTEM` (64 sessions, 8 s measured by default)
and, over 3 s in the middle of the measured window, reads each thread's
user and system time (/proc/<pid>/task/<tid>/stat, in clock ticks) and,
with --syscalls, counts its epoll_wait, sendto and recvfrom calls and its
context switches (`perf stat --per-thread`; needs perf and tracepoints).
Prints each busy thread's CPU in µs per message (user, system) and, with
--syscalls, its calls per message, a message being one request the load
client sent in those 3 s. The tracepoints slow every system call down:
take the CPU figures from a run without --syscalls.

On a 2-vCPU machine the relay is bound by two threads near a full core
each (the load client and the node that holds the sessions) and by the
kernel's share of both; docs/PERFORMANCE.md "Where a cross-node message's
CPU goes" reads it.

usage: perf/threads.py BENCH_BINARY SYSTEM [--syscalls] [zlink-bench args...]
e.g.:  perf/threads.py target/release/zlink-bench zlink-epoll --syscalls
"""
import os
import re
import subprocess
import sys
import time

WINDOW_S = 3.0


def task_times(pid):
    """Each thread's name, user and system ticks."""
    times = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            times[tid] = (name, int(fields[11]), int(fields[12]))
        except (OSError, IndexError, ValueError):
            pass  # the thread ended meanwhile
    return times


def syscall_counts(pid):
    """Per thread name: calls and context switches over WINDOW_S."""
    events = ",".join(
        [
            "syscalls:sys_enter_epoll_wait",
            "syscalls:sys_enter_sendto",
            "syscalls:sys_enter_recvfrom",
            "context-switches",
        ]
    )
    out = subprocess.run(
        ["perf", "stat", "--per-thread", "-x,", "-p", str(pid), "-e", events,
         "--", "sleep", str(WINDOW_S)],
        capture_output=True, text=True, check=False,
    ).stderr
    counts = {}
    for line in out.splitlines():
        fields = line.split(",")
        if len(fields) < 4 or not fields[1].strip().isdigit():
            continue
        thread = re.sub(r"-\d+$", "", fields[0])
        event = fields[3].replace("syscalls:sys_enter_", "")
        counts.setdefault(thread, {})[event] = int(fields[1])
    return counts


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    binary, system = sys.argv[1], sys.argv[2]
    rest = sys.argv[3:]
    syscalls = "--syscalls" in rest
    rest = [a for a in rest if a != "--syscalls"]
    duration = 8.0
    args = [binary, "--system", system, "--sessions", "64", "--warmup", "0.5",
            "--duration", str(duration)] + rest
    bench = subprocess.Popen(args, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    # A zlink mesh takes about a second longer to start than a forwarder.
    time.sleep(3.5 if "zlink" in system else 2.0)
    before = task_times(bench.pid)
    started = time.monotonic()
    counts = syscall_counts(bench.pid) if syscalls else None
    if counts is None:
        time.sleep(WINDOW_S)
    after = task_times(bench.pid)
    elapsed = time.monotonic() - started
    output = bench.communicate()[0]
    found = re.search(r"zlink-bench:\s+(\d+) measured", output)
    if found is None:
        sys.exit("no measured count in zlink-bench's output:\n" + output)
    rate = int(found.group(1)) / duration
    messages = rate * elapsed
    tick_us = 1e6 / os.sysconf("SC_CLK_TCK")
    print(f"{system}: {rate:.0f} msg/s; CPU in µs per message over {elapsed:.1f} s")
    for tid, (name, user, system_ticks) in sorted(after.items(), key=lambda t: t[1][0]):
        if tid not in before:
            continue
        du = (user - before[tid][1]) * tick_us / messages
        ds = (system_ticks - before[tid][2]) * tick_us / messages
        if du + ds < 0.02:
            continue
        line = f"  {name:<18} user {du:5.2f}  system {ds:5.2f}  total {du + ds:5.2f}"
        if counts is not None:
            mine = counts.get(name, {})
            sent = counts.get("load-client", {}).get("sendto", 0)
            if sent:
                line += "  per message: " + " ".join(
                    f"{k} {v / sent:.3f}" for k, v in sorted(mine.items())
                )
        print(line)


if __name__ == "__main__":
    main()
