#!/usr/bin/env python3
"""placement.py: where the scheduler puts one system's threads, vCPU by vCPU.

Runs `zlink-bench --system SYSTEM` (64 sessions, 4 s measured by default)
and records 0.3 s of scheduler events in the middle of the measured window
(`perf record -a -e sched:sched_switch,sched:sched_wakeup`; needs perf and
tracepoints). Prints the run's msg/s, each thread's share of each vCPU
(`swapper/N` is that vCPU idle), and how each wake-up between the busy
threads was placed: on the waker's own vCPU ("same") or the other one, and
what the target vCPU was running then.

Floating, the relay's throughput on a 2-vCPU machine follows where three
busy threads land (the load client, the sessions' node or hop A, the
players' node or hop B): docs/PERFORMANCE.md "Cross-node: floating against
pinned" reads it. Recording every switch costs the threads a little: take
msg/s from runs without it.

usage: perf/placement.py BENCH_BINARY SYSTEM [zlink-bench args...]
e.g.:  perf/placement.py target/release/zlink-bench zlink-epoll
"""
import collections
import os
import re
import subprocess
import sys
import tempfile
import time

WINDOW_S = 0.3
BUSY = ("shard", "raw-", "load-client")
EVENT = re.compile(r"\s*(.+?)\s+\d+\s+\[(\d+)\]\s+([\d.]+):\s+sched:(\w+):\s+(.*)")
WAKEUP = re.compile(r"comm=(.+?) pid=\d+ prio=\d+ target_cpu=(\d+)")
SWITCH = re.compile(r"prev_comm=(.+?) prev_pid=.*next_comm=(.+?) next_pid=")


def record(pid, data):
    subprocess.run(
        ["perf", "record", "-q", "-a", "-o", data, "-e",
         "sched:sched_switch,sched:sched_wakeup", "--", "sleep", str(WINDOW_S)],
        capture_output=True, check=False,
    )
    return subprocess.run(["perf", "script", "-i", data],
                          capture_output=True, text=True, check=False).stdout


def read(script):
    """Each (thread, vCPU)'s time on it, and the wake-ups between busy threads."""
    on_cpu = collections.Counter()
    wakeups = collections.Counter()
    running = {}  # vCPU -> (thread, since)
    first = last = None
    for line in script.splitlines():
        found = EVENT.match(line)
        if found is None:
            continue
        waker, cpu, at, event, rest = found.groups()
        cpu, at = int(cpu), float(at)
        first = at if first is None else first
        last = at
        if event == "sched_switch":
            names = SWITCH.search(rest)
            if names is None:
                continue
            if cpu in running:
                thread, since = running[cpu]
                on_cpu[(thread, cpu)] += at - since
            running[cpu] = (names.group(2), at)
        elif event == "sched_wakeup":
            woken = WAKEUP.search(rest)
            if woken is None or not any(b in woken.group(1) for b in BUSY):
                continue
            target = int(woken.group(2))
            where = "same" if target == cpu else "other"
            busy_there = running.get(target, ("?", 0))[0]
            wakeups[(waker, woken.group(1), where, busy_there)] += 1
    span = (last - first) if first is not None else 0.0
    return on_cpu, wakeups, span


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    binary, system = sys.argv[1], sys.argv[2]
    args = [binary, "--system", system, "--sessions", "64", "--warmup", "1",
            "--duration", "4"] + sys.argv[3:]
    bench = subprocess.Popen(args, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    # A zlink mesh takes about a second longer to start than a forwarder.
    time.sleep(3.0 if "zlink" in system else 2.0)
    with tempfile.TemporaryDirectory() as scratch:
        script = record(bench.pid, os.path.join(scratch, "sched.data"))
    output = bench.communicate()[0]
    found = re.search(r"zlink-bench:\s+(\d+) measured", output)
    rate = f"{int(found.group(1)) / 4:.0f} msg/s" if found else "no measured count"
    on_cpu, wakeups, span = read(script)
    if span <= 0:
        sys.exit("no scheduler events recorded (perf and its tracepoints needed)")
    print(f"{system}: {rate}; {span:.2f} s of scheduler events")
    print("  share of each vCPU (swapper: idle)")
    for (thread, cpu), time_on in sorted(on_cpu.items(), key=lambda t: -t[1]):
        share = time_on / span
        if share >= 0.01:
            print(f"    vCPU {cpu}  {thread:<20} {share:.2f}")
    print("  wake-ups of busy threads: count, waker -> woken, vCPU, running there")
    for (waker, woken, where, there), count in wakeups.most_common(10):
        print(f"    {count:6}  {waker} -> {woken}  {where}  ({there})")


if __name__ == "__main__":
    main()
