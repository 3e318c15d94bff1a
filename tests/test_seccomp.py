"""The seccomp programs, run by a small classic-BPF interpreter (what the kernel would return)."""

from __future__ import annotations

import errno
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.sandbox import _seccomp

ALLOW, EPERM, ENOSYS = 0x7FFF0000, 0x00050000 | errno.EPERM, 0x00050000 | errno.ENOSYS
KILL = 0x80000000
MACHINES = sorted(_seccomp._MACHINES)
NUMBERS = st.one_of(
    st.sampled_from(
        sorted({n for _, _, names in _seccomp._MACHINES.values() for n in names.values()})
    ),
    st.integers(0, 1000),
)
WORDS = st.one_of(
    st.sampled_from([0, 1, 1 << 32, (1 << 32) | 1, 2**64 - 1]), st.integers(0, 2**64 - 1)
)


def run(program: bytes, arch: int, nr: int, args: tuple[int, ...] = (0,) * 6) -> int:
    """Evaluate ``program`` on ``struct seccomp_data`` (only the opcodes the harness uses)."""
    data = struct.pack("=iIQ6Q", nr, arch, 0, *args)
    insns = [struct.unpack("=HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]
    pc, acc = 0, 0
    for _ in range(len(insns) + 1):
        code, jt, jf, k = insns[pc]
        if code == 0x20:  # ld w abs
            acc = struct.unpack_from("=I", data, k)[0]
            pc += 1
        elif code in (0x15, 0x35, 0x45):  # jeq, jge, jset
            hit = {0x15: acc == k, 0x35: acc >= k, 0x45: bool(acc & k)}[code]
            pc += 1 + (jt if hit else jf)
        elif code == 0x06:
            return k
        else:
            raise AssertionError(f"opcode {code:#x} not expected")
    raise AssertionError("the program ran off its end")


@pytest.mark.parametrize("machine", MACHINES)
@given(nr=NUMBERS, arg=WORDS)
def test_the_guards_seal_refuses_its_calls_and_new_signal_handlers_only(machine, nr, arg):
    arch, _, numbers = _seccomp._MACHINES[machine]
    program = _seccomp.seal_program(machine)
    sealed = {numbers[name] for name in _seccomp.SEALED}
    got = run(program, arch, nr, (2, arg, 0, 8, 0, 0))
    if nr in sealed or (nr == numbers["rt_sigaction"] and arg != 0):
        assert got == EPERM
    else:
        assert got == ALLOW
    assert run(program, arch ^ 1, nr) == EPERM  # another ABI
    if machine == "x86_64":
        assert run(program, arch, nr | 0x40000000) == EPERM  # x32 numbers


@pytest.mark.parametrize("machine", MACHINES)
def test_a_signal_action_is_refused_in_either_half_of_its_pointer(machine):
    arch, _, numbers = _seccomp._MACHINES[machine]
    program = _seccomp.seal_program(machine)
    for act, want in ((0, ALLOW), (1, EPERM), (1 << 32, EPERM), (2**64 - 1, EPERM)):
        assert run(program, arch, numbers["rt_sigaction"], (2, act, 0, 8, 0, 0)) == want, act
    for name in _seccomp.SEALED:
        assert run(program, arch, numbers[name]) == EPERM, name


@pytest.mark.parametrize("machine", MACHINES)
@given(nr=NUMBERS, flags=WORDS)
def test_the_sandbox_filter_refuses_shared_kernel_state(machine, nr, flags):
    arch, _, numbers = _seccomp._MACHINES[machine]
    program = _seccomp.filter_program(machine)
    denied = {numbers[name] for name in _seccomp.DENIED}
    got = run(program, arch, nr, (flags, 0, 0, 0, 0, 0))
    low = flags & 0xFFFFFFFF  # the filter reads the low word of clone's flags
    if nr == numbers["clone3"]:
        assert got == ENOSYS
    elif nr in denied or (nr == numbers["clone"] and low & _seccomp._CLONE_NAMESPACES):
        assert got == EPERM
    else:
        assert got == ALLOW
    assert run(program, arch ^ 1, nr) == KILL
