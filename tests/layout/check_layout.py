#!/usr/bin/env python3
"""Checks the layout rules of include/ms (docs/layout.md):

  * a folder includes only the folders below it (the table ALLOWED), never one above;
  * no include cycle between headers;
  * no header over MAX_LINES lines, no function (or lambda) body over MAX_FUNCTION lines.

Usage: check_layout.py <include dir> [--report N]   (--report prints the N longest functions)
Exits 1 and names each violation when a rule is broken.
"""
import os
import re
import sys

MAX_LINES = 900
MAX_FUNCTION = 120

# Who may include whom, by folder under include/ms ("." is include/ms itself: the umbrella
# headers ms.hpp, jit.hpp, dist.hpp, onnx.hpp). A folder may always include itself.
# Read bottom-up: core knows nothing of ops, ops nothing of graphs, graph nothing of
# backends, backends nothing of training.
ALLOWED = {
    "core": set(),
    # The CPU backend's kernel room: the SIMD facade, the block-kernel ABI, the affine
    # kernels and the kernels bound by name, compiled per CPU level; the registry, the
    # elementwise ops, the convolutions and pooling are built on it.
    "backend/cpu/kernels": {"core"},
    "ops": {"core", "ops/nn", "backend/cpu/kernels"},  # ops/nn.hpp gathers the families of ops/nn/
    "ops/nn": {"core", "ops", "backend/cpu/kernels"},  # the direct convolution and max pooling kernels
    "autograd": {"core", "ops"},
    "graph": {"core", "ops"},
    "backend": {"core", "ops", "graph"},
    "backend/cpu": {"core", "ops", "graph", "backend", "backend/cpu/kernels"},
    "backend/ascend": {"core", "ops", "graph", "backend"},
    "data": {"core"},
    "nn": {"core", "ops", "autograd"},
    "optim": {"core", "ops", "autograd", "nn"},
    "tools": {"core", "ops", "graph", "backend"},
    "dist": {"core", "ops", "autograd", "graph", "backend", "backend/ascend", "nn", "optim", "data", "."},
    "onnx": {"core", "ops", "autograd", "graph", "backend", "backend/cpu", "."},
    ".": {"core", "ops", "autograd", "graph", "backend", "backend/cpu", "backend/ascend", "data", "nn", "optim",
          "tools", "dist", "onnx"},
}

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def headers(root):
    for dp, _, fs in os.walk(os.path.join(root, "ms")):
        for f in sorted(fs):
            if f.endswith(".hpp"):
                yield os.path.relpath(os.path.join(dp, f), root)


def folder(rel):  # "ms/backend/cpu/x.hpp" -> "backend/cpu"; "ms/ms.hpp" -> "."
    d = os.path.dirname(rel)
    return "." if d == "ms" else d[len("ms/"):]


def strip_comments_and_strings(src):
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * src.count("\n", i, j))
            i = j
        elif src.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', src[i:])
            end = ")" + m.group(1) + '"'
            j = src.find(end, i)
            j = n if j < 0 else j + len(end)
            out.append('""' + "\n" * src.count("\n", i, j))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and src[j] != c:
                j += 2 if src[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def function_lengths(path):
    """(lines, first line, name) of each brace block that is a function or lambda body."""
    src = strip_comments_and_strings(open(path, encoding="utf-8").read())
    src = re.sub(r"^\s*#.*$", "", src, flags=re.M)  # preprocessor lines
    result, stack, line = [], [], 1
    for i, c in enumerate(src):
        if c == "\n":
            line += 1
        elif c == "{":
            head = src[max(0, i - 300):i]
            # A body follows ")" plus qualifiers (const, noexcept, override, mutable, -> type, ...).
            m = re.search(r"\)\s*(?:const|noexcept(?:\([^)]*\))?|override|final|mutable|constexpr|&|&&|\s|"
                          r"->\s*[\w:<>,\s*&]+)*$", head)
            is_fn = m is not None
            name = ""
            if is_fn:
                k = m.start()
                depth, j = 0, k
                while j > 0:
                    ch = head[j]
                    depth += ch == ")"
                    depth -= ch == "("
                    if depth == 0 and ch == "(":
                        break
                    j -= 1
                mm = re.search(r"([\w:~<>\]\[]+)\s*$", head[:j])
                name = mm.group(1) if mm else "?"
                is_fn = name not in ("if", "for", "while", "switch", "catch")  # a statement's block
            stack.append((line, is_fn, name))
        elif c == "}" and stack:
            start, is_fn, name = stack.pop()
            if is_fn:
                result.append((line - start + 1, start, name))
    return result


def main():
    root = sys.argv[1]
    report = int(sys.argv[sys.argv.index("--report") + 1]) if "--report" in sys.argv else 0
    errors, graph, longest = [], {}, []
    for rel in headers(root):
        path = os.path.join(root, rel)
        text = open(path, encoding="utf-8").read()
        nlines = text.count("\n")
        if nlines > MAX_LINES:
            errors.append(f"{rel}: {nlines} lines (at most {MAX_LINES})")
        deps = []
        for inc in INCLUDE.findall(text):
            target = os.path.normpath(os.path.join(os.path.dirname(rel), inc))
            if not target.startswith("ms/") or not os.path.exists(os.path.join(root, target)):
                continue
            deps.append(target)
            a, b = folder(rel), folder(target)
            if a != b and b not in ALLOWED.get(a, set()):
                errors.append(f"{rel}: includes {inc}: {a}/ may not include {b}/ (see ALLOWED in {__file__})")
        graph[rel] = deps
        for n, start, name in function_lengths(path):
            longest.append((n, f"{rel}:{start}", name))
            if n > MAX_FUNCTION:
                errors.append(f"{rel}:{start}: function {name} is {n} lines (at most {MAX_FUNCTION})")
    for a in ALLOWED:  # the table names folders that exist
        if a != "." and not os.path.isdir(os.path.join(root, "ms", a)):
            errors.append(f"ALLOWED names {a}/, which is not a folder of {root}/ms")
    # Cycles: depth-first search over the header graph.
    state = {}

    def visit(h, path):
        state[h] = 1
        for d in graph.get(h, []):
            if state.get(d) == 1:
                cyc = path[path.index(d):] + [d]
                errors.append("include cycle: " + " -> ".join(cyc))
            elif d not in state:
                visit(d, path + [d])
        state[h] = 2

    for h in sorted(graph):
        if h not in state:
            visit(h, [h])
    if report:
        longest.sort(reverse=True)
        print(f"the {report} longest functions:")
        for n, where, name in longest[:report]:
            print(f"  {n:4d} lines  {where}  {name}")
    for e in errors:
        print("layout:", e)
    print(f"layout: {len(graph)} headers, {len(errors)} violations")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
