#!/usr/bin/env python3
"""Runs the command-line steps of docs/guide.md in the order written, as a new user would.

    guide_walkthrough.py GUIDE.md BIN_DIR

Every `$ build/bin/<program> ...` line of the guide's plain code blocks is run with
build/bin/ replaced by BIN_DIR and /tmp by a fresh temporary folder. A step passes when
it exits with status 0 and prints the output lines the guide shows under it, in that
order. Lines that the guide elides (`...`) or that hold figures which change from run to
run (times, latencies, file sizes) are not compared.
"""

import os
import re
import shlex
import subprocess
import sys
import tempfile

VARYING = re.compile(r"\d+(\.\d+)? ms\b|latency|bytes|steps/s")


def steps(guide_text):
    """(command, expected output lines) for each `$ build/bin/` line, in order."""
    out = []
    in_block = plain = False
    for line in guide_text.splitlines():
        if line.startswith("```"):
            in_block = not in_block
            plain = in_block and line.strip() == "```"
            if out:
                out[-1][2] = False  # a block ends: the last step's output ends too
            continue
        if not plain:
            continue
        if line.startswith("$ build/bin/"):
            out.append([line[2:], [], True])
        elif line.startswith("$ "):
            continue
        elif out and out[-1][2]:
            out[-1][1].append(line.rstrip())
    return [(cmd, expected) for cmd, expected, _ in out]


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    guide, bin_dir = sys.argv[1], sys.argv[2]
    with open(guide, encoding="utf-8") as f:
        todo = steps(f.read())
    if not todo:
        print(f"guide_walkthrough: no '$ build/bin/' steps in {guide}", file=sys.stderr)
        return 1
    failures = 0
    with tempfile.TemporaryDirectory(prefix="ms_guide_") as tmp:
        for cmd, expected in todo:
            argv = shlex.split(cmd.replace("/tmp", tmp), comments=True)
            argv[0] = os.path.join(bin_dir, argv[0][len("build/bin/"):])
            print(f"$ {cmd}", flush=True)
            try:
                r = subprocess.run(argv, capture_output=True, text=True, timeout=600)
            except (OSError, subprocess.TimeoutExpired) as e:
                print(f"  FAILED: {e}")
                failures += 1
                continue
            got = [l.rstrip() for l in r.stdout.replace(tmp, "/tmp").splitlines()]
            if r.returncode != 0:
                print(f"  FAILED: exit status {r.returncode}\n{r.stdout}{r.stderr}")
                failures += 1
                continue
            # The guide's lines must appear in the output, in order.
            pos, missing = 0, []
            for want in expected:
                if not want.strip() or want.strip() == "..." or VARYING.search(want):
                    continue
                try:
                    pos = got.index(want, pos) + 1
                except ValueError:
                    missing.append(want)
            if missing:
                print("  FAILED: the output lacks these lines of the guide (or has them out of order):")
                for m in missing:
                    print(f"    {m}")
                print("  output was:\n" + "\n".join("    " + l for l in got))
                failures += 1
            else:
                print(f"  ok ({len(expected)} lines in the guide)")
    print(f"guide_walkthrough: {len(todo) - failures} of {len(todo)} steps passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
