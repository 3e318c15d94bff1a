"""The local sandbox's seccomp filter: a small classic-BPF program handed to ``bwrap --seccomp``.

The local backend shares the host's kernel with every sandboxed command. Namespaces, the
read-only root and the uid switch keep the command off the host's files and processes, but
some system calls reach kernel state that outlives the command and is shared by every
command running as the same uid: the kernel keyrings above all (a key stored by one trial's
verifier could be read by a later trial's agent). Docker's default seccomp profile denies
those calls; this filter does the same for the local backend.

The program is assembled here (no library is needed): an architecture check that kills the
process on any other ABI (32-bit entry points on a 64-bit host, x32 numbers), then ``EPERM``
for each denied call, ``ENOSYS`` for ``clone3`` (its flags live in memory a filter cannot
read; the C library falls back to ``clone``), and ``EPERM`` for ``clone`` asking for a new
namespace. Everything else is allowed: threads, sockets, ``ptrace`` of one's own children.
"""

from __future__ import annotations

import errno
import os
import platform
import struct

__all__ = ["DENIED", "SEALED", "filter_fd", "filter_program", "seal_program"]

# Classic BPF opcodes (linux/filter.h) and seccomp return values (linux/seccomp.h).
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06
_RET_KILL_PROCESS = 0x80000000
_RET_ERRNO = 0x00050000
_RET_ALLOW = 0x7FFF0000

# struct seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6].
_OFF_NR = 0
_OFF_ARCH = 4
_OFF_ARG0_LOW = 16  # little-endian: the low 32 bits of args[0] come first
_OFF_ARG1_LOW = 24

_X32_SYSCALL_BIT = 0x40000000

# CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET.
_CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000
_CLONE_NAMESPACES |= 0x10000000 | 0x20000000 | 0x40000000

DENIED: tuple[str, ...] = (
    # Kernel keyrings: per-uid state that outlives the command (the leak this filter closes).
    "add_key",
    "request_key",
    "keyctl",
    # New namespaces and joining others' (bwrap has already set up the sandbox's own).
    "unshare",
    "setns",
    # Mounts and the filesystem tree.
    "mount",
    "umount2",
    "pivot_root",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "open_tree",
    "move_mount",
    "mount_setattr",
    "open_by_handle_at",
    "quotactl",
    "quotactl_fd",
    "swapon",
    "swapoff",
    "acct",
    # Kernel code, kernel programs and kernel-wide observation.
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "lookup_dcookie",
    "nfsservctl",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    # The host's clock and power.
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "reboot",
)
"""System calls that fail with ``EPERM`` inside the local sandbox (names of the Linux ABI)."""

# Per machine: the audit arch of its native ABI, whether x32 numbers must be refused, and
# the number of every call named above plus clone and clone3.
_X86_64 = {
    "rt_sigaction": 13,
    "ptrace": 101,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
    "pidfd_getfd": 438,
    "add_key": 248,
    "request_key": 249,
    "keyctl": 250,
    "unshare": 272,
    "setns": 308,
    "mount": 165,
    "umount2": 166,
    "pivot_root": 155,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "open_tree": 428,
    "move_mount": 429,
    "mount_setattr": 442,
    "open_by_handle_at": 304,
    "quotactl": 179,
    "quotactl_fd": 443,
    "swapon": 167,
    "swapoff": 168,
    "acct": 163,
    "init_module": 175,
    "finit_module": 313,
    "delete_module": 176,
    "kexec_load": 246,
    "kexec_file_load": 320,
    "bpf": 321,
    "perf_event_open": 298,
    "userfaultfd": 323,
    "lookup_dcookie": 212,
    "nfsservctl": 180,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "settimeofday": 164,
    "clock_settime": 227,
    "clock_adjtime": 305,
    "reboot": 169,
    "clone": 56,
    "clone3": 435,
}
_AARCH64 = {
    "rt_sigaction": 134,
    "ptrace": 117,
    "process_vm_readv": 270,
    "process_vm_writev": 271,
    "pidfd_getfd": 438,
    "add_key": 217,
    "request_key": 218,
    "keyctl": 219,
    "unshare": 97,
    "setns": 268,
    "mount": 40,
    "umount2": 39,
    "pivot_root": 41,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "open_tree": 428,
    "move_mount": 429,
    "mount_setattr": 442,
    "open_by_handle_at": 265,
    "quotactl": 60,
    "quotactl_fd": 443,
    "swapon": 224,
    "swapoff": 225,
    "acct": 89,
    "init_module": 105,
    "finit_module": 273,
    "delete_module": 106,
    "kexec_load": 104,
    "kexec_file_load": 294,
    "bpf": 280,
    "perf_event_open": 241,
    "userfaultfd": 282,
    "lookup_dcookie": 18,
    "nfsservctl": 42,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "settimeofday": 170,
    "clock_settime": 112,
    "clock_adjtime": 266,
    "reboot": 142,
    "clone": 220,
    "clone3": 435,
}
_MACHINES: dict[str, tuple[int, bool, dict[str, int]]] = {
    "x86_64": (0xC000003E, True, _X86_64),
    "aarch64": (0xC00000B7, False, _AARCH64),
}


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def filter_program(machine: str | None = None) -> bytes:
    """Return the filter for ``machine`` (default: this host's) as ``struct sock_filter[]``.

    Raises:
        ValueError: no filter is known for the machine (the caller must fail closed).

    """
    name = machine or platform.machine()
    if name not in _MACHINES:
        raise ValueError(f"no seccomp filter for machine {name!r} (known: x86_64, aarch64)")
    arch, x32, numbers = _MACHINES[name]
    # Instructions that jump name their target; the three returns sit at the end.
    body: list[tuple[int, int, str | None, str | None]] = [(_LD_W_ABS, _OFF_NR, None, None)]
    if x32:
        body.append((_JGE_K, _X32_SYSCALL_BIT, "deny", None))
    body += [(_JEQ_K, numbers[call], "deny", None) for call in DENIED]
    body.append((_JEQ_K, numbers["clone3"], "enosys", None))
    body.append((_JEQ_K, numbers["clone"], None, "allow"))
    body.append((_LD_W_ABS, _OFF_ARG0_LOW, None, None))
    body.append((_JSET_K, _CLONE_NAMESPACES, "deny", None))
    head = [
        _insn(_LD_W_ABS, _OFF_ARCH),
        _insn(_JEQ_K, arch, jt=1),
        _insn(_RET_K, _RET_KILL_PROCESS),
    ]
    return _assemble(head, body, ("allow", "deny", "enosys"))


SEALED: tuple[str, ...] = ("ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd")
"""What the verifier's guard also refuses, from the test run on: reaching another process's
memory or descriptors (a process the candidate left running, and a pytest it starts later)."""


def seal_program(machine: str | None = None) -> bytes:
    """Return the verifier guard's own filter for ``machine`` (default: this host's).

    Installed by the guard in a guarded pytest process (``harness.trial.evidence``) before
    any code of the candidate's runs, on every thread and inherited by every child: a new
    signal handler (``rt_sigaction`` with an action; reading one still works) and the
    calls of :data:`SEALED` fail with ``EPERM``, as does any other ABI.

    Raises:
        ValueError: no filter is known for the machine.

    """
    name = machine or platform.machine()
    if name not in _MACHINES:
        raise ValueError(f"no seccomp filter for machine {name!r} (known: x86_64, aarch64)")
    arch, x32, numbers = _MACHINES[name]
    body: list[tuple[int, int, str | None, str | None]] = [(_LD_W_ABS, _OFF_NR, None, None)]
    if x32:
        body.append((_JGE_K, _X32_SYSCALL_BIT, "deny", None))
    body += [(_JEQ_K, numbers[call], "deny", None) for call in SEALED]
    body.append((_JEQ_K, numbers["rt_sigaction"], None, "allow"))
    body.append((_LD_W_ABS, _OFF_ARG1_LOW, None, None))  # the new action: NULL only reads
    body.append((_JEQ_K, 0, None, "deny"))
    body.append((_LD_W_ABS, _OFF_ARG1_LOW + 4, None, None))
    body.append((_JEQ_K, 0, "allow", "deny"))
    head = [
        _insn(_LD_W_ABS, _OFF_ARCH),
        _insn(_JEQ_K, arch, jt=1),
        _insn(_RET_K, _RET_ERRNO | errno.EPERM),
    ]
    return _assemble(head, body, ("allow", "deny"))


def _assemble(
    head: list[bytes], body: list[tuple[int, int, str | None, str | None]], ends: tuple[str, ...]
) -> bytes:
    """Lay out ``body`` after ``head``, its jumps resolved to the returns ``ends`` (in order)."""
    start = len(head)
    target = {name: start + len(body) + i for i, name in enumerate(ends)}
    out = list(head)
    for i, (code, k, jt, jf) in enumerate(body):
        here = start + i
        out.append(
            _insn(
                code,
                k,
                jt=target[jt] - here - 1 if jt else 0,
                jf=target[jf] - here - 1 if jf else 0,
            )
        )
    returns = {
        "allow": _RET_ALLOW,
        "deny": _RET_ERRNO | errno.EPERM,
        "enosys": _RET_ERRNO | errno.ENOSYS,
    }
    out += [_insn(_RET_K, returns[name]) for name in ends]
    return b"".join(out)


def filter_fd(machine: str | None = None) -> int:
    """Return a memfd holding :func:`filter_program`, positioned at 0, for ``--seccomp``."""
    program = filter_program(machine)
    fd = os.memfd_create("harness-seccomp", 0)
    try:
        os.write(fd, program)
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError:
        os.close(fd)
        raise
    return fd
