"""A hostile command agent (standard library only) for tests/integration/test_agent_mess.py.

It cannot fix the bug (but for ``hard-links``); it tries to make its own failure the
harness's instead: block the gate, crash a parser or a walk, exhaust memory, disk or time
on the harness side. ``argv[1]``
names the mechanism:

* ``fifo-result``: the result file is a FIFO (a blocking open never returns);
* ``sparse-result``: the result file is a 1 GiB sparse file (read whole, it fills memory);
* ``fifo-junit``: candidate code replaces the verifier's JUnit report by a FIFO at exit;
* ``deep``: a folder 1,200 levels deep in the workspace and in /tmp (recursive walks);
* ``disk MB``: the workspace filled to just under the verifier's quota of MB MiB;
* ``exit127``: candidate code exits 127 under the tests ("command not found"'s status);
* ``outside-link``: a symlink out of the tree, recorded in the candidate (for a replay);
* ``fifo-link``: a FIFO and a hard link to it (the FIFO is no part of a snapshot);
* ``long-path``: 20 nested folders of 250-byte names and a file (a path over PATH_MAX);
* ``hard-links MB N``: the fix, then one file of MB MiB and N hard links to it (free on the
  agent's disk, N x MB MiB for every step that reads the tree path by path): the one mode
  that fixes the bug, so only the candidate's size bound can fail it;
* ``small-files N``: N files of one byte (within the candidate's byte bound, a block each
  on the verifier's disk).
"""

import os
import sys

WS = os.environ["HARNESS_WORKSPACE"]
RESULT = os.environ["HARNESS_RESULT"]
SUBMIT = '{"status": "submitted", "claimed_success": true}'


def submit():
    with open(RESULT, "w", encoding="utf-8") as fh:
        fh.write(SUBMIT)


def deep(top, n=1200):
    # os.makedirs recurses once per level: build it with relative chdir steps instead.
    here = os.getcwd()
    os.chdir(top)
    for _ in range(n):
        os.mkdir("d")
        os.chdir("d")
    with open("bottom.txt", "w", encoding="utf-8") as fh:
        fh.write("deep\n")
    os.chdir(here)


def calc(extra):
    with open(os.path.join(WS, "calc.py"), "w", encoding="utf-8") as fh:
        fh.write(extra + "\n\ndef add(a, b):\n    return a - b\n")


def main():
    mode = sys.argv[1]
    if mode == "fifo-result":
        if os.path.exists(RESULT):
            os.remove(RESULT)
        os.mkfifo(RESULT)
    elif mode == "sparse-result":
        with open(RESULT, "w", encoding="utf-8") as fh:
            fh.write(SUBMIT)
            fh.truncate(1 << 30)
    elif mode == "fifo-junit":
        calc(
            "import atexit, os\n"
            "def _swap():\n"
            "    p = 'reports/junit.xml'\n"
            "    if os.path.exists(p):\n"
            "        os.remove(p)\n"
            "    os.mkfifo(p)\n"
            "atexit.register(_swap)"
        )
        submit()
    elif mode == "deep":
        deep(WS)
        deep("/tmp")
        submit()
    elif mode == "disk":
        # Just under the verifier's quota (sys.argv[2] MiB): the candidate passes its size
        # bound, and then the verifier's copy of it and its own files cannot all fit.
        calc("# nothing here")
        with open(os.path.join(WS, "fill.bin"), "wb") as fh:
            fh.write(b"\1" * ((int(sys.argv[2]) << 20) - 16384))
        submit()
    elif mode == "exit127":
        calc("import os\nos._exit(127)")
        submit()
    elif mode == "outside-link":
        os.symlink("/etc/passwd", os.path.join(WS, "passwd-link"))
        os.symlink("../../outside", os.path.join(WS, "up-link"))
        submit()
    elif mode == "fifo-link":
        calc("# nothing here")
        os.mkfifo(os.path.join(WS, "a.fifo"))
        os.link(os.path.join(WS, "a.fifo"), os.path.join(WS, "b.fifo"))
        submit()
    elif mode == "long-path":
        # About 5,000 bytes, only 20 deep: built with relative steps (no call sees it whole).
        here = os.getcwd()
        os.chdir(WS)
        for i in range(20):
            name = f"{i:02d}" + "n" * 248
            os.mkdir(name)
            os.chdir(name)
        with open("bottom.txt", "w", encoding="utf-8") as fh:
            fh.write("far\n")
        os.chdir(here)
        submit()
    elif mode == "hard-links":
        with open(os.path.join(WS, "calc.py"), "w", encoding="utf-8") as fh:
            fh.write("def add(a, b):\n    return a + b\n")
        big = os.path.join(WS, "big.bin")
        with open(big, "wb") as fh:
            fh.write(b"\1" * (int(sys.argv[2]) << 20))
        for i in range(int(sys.argv[3])):
            os.link(big, os.path.join(WS, f"big{i}.bin"))
        submit()
    elif mode == "small-files":
        # sys.argv[2] files of one byte: a few KiB of content, a block each once copied.
        calc("# nothing here")
        os.mkdir(os.path.join(WS, "many"))
        for i in range(int(sys.argv[2])):
            with open(os.path.join(WS, "many", f"{i:05d}"), "wb") as fh:
                fh.write(b"\1")
        submit()
    elif mode == "chmod-root":
        # The workspace's own folder made unreadable: the candidate's root travels into
        # the next attempt's and the feedback command's sessions.
        calc("# nothing here")
        submit()
        os.chmod(WS, 0)
    elif mode == "fill":
        # The workspace filled to the brim (its tmpfs), and no result written (its page is
        # the workspace's): the next session the harness hands this tree to must still take
        # the harness's own files, one more (the feedback) than this attempt had.
        calc("# nothing here")
        fd = os.open(os.path.join(WS, "fill.bin"), os.O_WRONLY | os.O_CREAT, 0o644)
        for size in (1 << 20, 4096, 1):  # to the last byte
            try:
                while os.write(fd, b"\1" * size):
                    pass
            except OSError:
                pass
        os.close(fd)
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main()
