"""Per-exec overhead of the Docker backend vs bare ``docker run --rm`` of the same commands.

Usage: python bench/docker_overhead.py [--runs N]
Prints seconds per command for both, side by side, and the ratio (target <= 1.3). The
session-open cost (host tmpfs, or volumes + holder with HARNESS_DOCKER_FILES=volumes) is
reported separately and amortised over the runs.
"""

from __future__ import annotations

import argparse
import statistics
import time

from harness._proc import run
from harness.cases.model import PhaseContract
from harness.sandbox.docker import DEFAULT_IMAGE, DockerSandbox

COMMANDS = (["true"], ["python3", "-c", "print(sum(range(10**5)))"], ["sh", "-c", "ls -la /"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args()
    contract = PhaseContract(memory_mb=512, pids=128, disk_mb=64, timeout_seconds=60)
    sandbox = DockerSandbox(run_id="bench")
    t0 = time.monotonic()
    session = sandbox.open(contract, label="bench")
    open_s = time.monotonic() - t0
    bare_flags = [
        "--rm",
        "--init",
        "--network",
        "none",
        "--read-only",
        "--memory",
        "512m",
        "--memory-swap",
        "512m",
        "--pids-limit",
        "128",
        "--tmpfs",
        "/tmp:size=64m",
    ]
    print(
        f"session open ({type(session).__name__}): {open_s:.3f}s, amortised over "
        f"{args.runs * len(COMMANDS)} execs"
    )
    print(f"{'command':40} {'backend s':>10} {'bare s':>10} {'ratio':>7}")
    ratios = []
    try:
        for cmd in COMMANDS:
            ours, bare = [], []
            for _ in range(args.runs):  # interleaved so drift hits both alike
                t = time.monotonic()
                assert session.exec(cmd).ok
                ours.append(time.monotonic() - t)
                t = time.monotonic()
                assert run(["docker", "run", *bare_flags, DEFAULT_IMAGE, *cmd], timeout=60).ok
                bare.append(time.monotonic() - t)
            o, b = statistics.median(ours), statistics.median(bare)
            o_amortised = o + open_s / (args.runs * len(COMMANDS))
            ratios.append(o_amortised / b)
            print(f"{' '.join(cmd)[:40]:40} {o_amortised:10.3f} {b:10.3f} {o_amortised / b:7.2f}")
    finally:
        session.close()
    print(f"geometric-mean ratio: {statistics.geometric_mean(ratios):.2f} (target <= 1.3)")


if __name__ == "__main__":
    main()
