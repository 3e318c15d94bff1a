"""A hostile command agent (standard library only) for tests/integration/test_host_privilege.py.

It cannot fix the bug on its own terms: it "fixes" it only if it holds a privilege a
sandboxed process must never have, so any privilege it finds shows up as a **pass**. It
checks, in the agent phase, and plants the same checks into ``calc.py`` so they run again
inside the verifier (the module is imported by the hidden test):

* its uid, groups and capability sets (host root, or any capability left);
* whether host kernel state is writable: ``/proc/sys/kernel/core_pattern`` (a pipe pattern
  there makes the kernel run a program as root in the host's namespaces), ``domainname``,
  ``hostname`` — by writing back the value just read, so nothing on the host changes;
* whether core dumps can be turned back on (``RLIMIT_CORE``);
* whether a host path (the project, the store, the session folder under the host's temp
  dir: ``targets.json`` beside this file) is visible: environment, working directory,
  ``/proc/self/mountinfo`` (less the read-only view mounts under ``/opt/harness`` and the
  verifier's ``/harness/guard``, whose
  host folders docs/threat-model.md lists as a residue), the command line of every
  visible process.

It prints what it found as one JSON line.
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
WS = os.environ["HARNESS_WORKSPACE"]

PROBE = r"""
import os, resource


def _privileges(needles):
    found = []
    if os.getuid() == 0 or os.geteuid() == 0 or 0 in os.getgroups():
        found.append("root uid %d/%d groups %s" % (os.getuid(), os.geteuid(), os.getgroups()))
    for line in open("/proc/self/status"):
        if line.startswith("Cap") and int(line.split()[1], 16):
            found.append("capability " + line.strip())
    for p in ("/proc/sys/kernel/core_pattern", "/proc/sys/kernel/domainname",
              "/proc/sys/kernel/hostname", "/proc/sys/kernel/modprobe"):
        try:
            value = open(p).read()
            with open(p, "w") as fh:
                fh.write(value)
            found.append("wrote " + p)
        except OSError:
            pass
    if os.access("/proc/sysrq-trigger", os.W_OK):
        found.append("/proc/sysrq-trigger writable")
    try:
        resource.setrlimit(resource.RLIMIT_CORE, (1 << 20, 1 << 20))
        found.append("core dumps can be turned on")
    except (ValueError, OSError):
        pass
    texts = {"environ": repr(sorted(os.environ.items())), "cwd": os.getcwd()}
    try:
        # Read-only view mounts (/opt/harness/..., the verifier's /harness/guard) name the
        # host folder they come from: a documented residue.
        texts["mountinfo"] = "".join(
            line for line in open("/proc/self/mountinfo")
            if not line.split()[4].startswith(("/opt/harness/", "/harness/guard"))
        )
    except OSError:
        pass
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                texts["cmdline " + pid] = open("/proc/%s/cmdline" % pid, "rb").read().decode(
                    "latin-1"
                )
            except OSError:
                pass
    for where, text in texts.items():
        for needle in needles:
            if needle and needle in text:
                found.append("host path %s in %s" % (needle, where))
    return found
"""


def main():
    with open(os.path.join(HERE, "targets.json"), encoding="utf-8") as fh:
        needles = json.load(fh)["host_paths"]
    scope = {}
    exec(PROBE, scope)
    found = scope["_privileges"](needles)
    print(json.dumps({"phase": "agent", "found": found}))
    sys.stdout.flush()
    calc = (
        PROBE
        + f"\nNEEDLES = {needles!r}\nAGENT_FOUND = {found!r}\n"
        + "VERIFIER_FOUND = _privileges(NEEDLES)\n"
        + "\n\ndef add(a, b):\n"
        + "    # Correct only when a privilege was found, in either phase.\n"
        + "    return a + b if AGENT_FOUND or VERIFIER_FOUND else a - b\n"
    )
    with open(os.path.join(WS, "calc.py"), "w", encoding="utf-8") as fh:
        fh.write(calc)
    with open(os.environ["HARNESS_RESULT"], "w", encoding="utf-8") as fh:
        json.dump({"status": "submitted", "claimed_success": True}, fh)


if __name__ == "__main__":
    main()
