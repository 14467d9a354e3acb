#!/usr/bin/env python3
"""Checks the include graph of lcm's product code against the layering of docs/design.md.

The product is the folders of LAYERS (tests/, bench/, fuzz/, examples/ may include anything).
A unit is a file without its extension (a .hpp/.cpp pair, a .cuh/.cu pair is one unit); an edge
is a `#include "path"` that names a file of the checkout (paths are relative to the root, or to
include/ for the public headers). The check fails (exit 1, one line per problem) when:
  - units form a cycle (a strongly connected component of two or more units) that is not inside
    an entry of ALLOWED_CYCLES, or an entry of ALLOWED_CYCLES is no longer a cycle (remove it);
  - a file includes a file of a higher layer, or of another folder of its own layer that is not
    one of PEERS;
  - an include breaks a narrower rule: OUTGOING_ONLY (what a folder may include of other folders),
    PAIR_ONLY (what one folder may include of another), INCOMING_ONLY (what other folders may
    include of a folder).
`--self-test` runs the check on small generated trees (a cycle, an upward arrow, each narrower
rule, a stale allowed cycle, a clean tree) and fails when a verdict is not the expected one.
Standard library only (python3 >= 3.8).

Usage: check_include_graph.py [ROOT]      (ROOT defaults to the checkout holding this script)
       check_include_graph.py --self-test
"""
import os
import re
import sys
import tempfile

# The layers, lowest first (docs/design.md "Layout and what each layer may include" says the
# same). A file may include files of its own folder and of lower layers; two folders of one
# layer include each other only where PEERS says so.
LAYERS = {
    "util": 0,  # atomic files, run locks, JSON parsing of lcm's files, the log sink
    "engine": 1,  # tensors, tape, ops, optimizers, safetensors, device switch
    "kernels": 1,  # CUDA kernels and their emulated twins, beside the engine
    "data": 2,
    "model": 3,
    "config": 4,  # binds keys to the option types that data/ and model/ declare
    "train": 5,
    "serve": 6,
    "lib": 7,  # liblcm
    "include": 7,  # liblcm's public headers
    "tools": 8,
}

# Arrows between two folders of one layer that are allowed (subject to the rules below).
PEERS = {("engine", "kernels"), ("kernels", "engine"), ("lib", "include")}

# What a folder may include of the other folders, whatever their layer ('*' stays within one
# path component). The kernels see only the engine's __host__ __device__ formula headers; the
# public headers and the utilities include nothing else of lcm.
OUTGOING_ONLY = {
    "kernels": ["engine/rng.hpp", "engine/hd.hpp", "engine/ops/*_math.hpp"],
    "include": [],
    "util": [],
}

# What one folder may include of another: config/ sees only the options headers of data/ and
# model/, not their implementations.
PAIR_ONLY = {
    ("config", "data"): ["data/options.hpp"],
    ("config", "model"): ["model/options.hpp"],
}

# What other folders may include of a folder: the kernels only through their plain C++ headers
# (no CUDA types, no emulation internals).
INCOMING_ONLY = {
    "kernels": ["kernels/*.hpp"],
}

# Unit cycles tolerated for now, each a set of units; a cycle passes when all its units lie in
# one entry. An entry that is no longer a cycle is an error, so the list only shrinks.
ALLOWED_CYCLES = []

SOURCE_EXT = (".hpp", ".cpp", ".h", ".cu", ".cuh")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)


def glob_match(pattern, path):
    """fnmatch-like, but '*' never crosses a '/'."""
    rx = "".join("[^/]*" if ch == "*" else re.escape(ch) for ch in pattern)
    return re.fullmatch(rx, path) is not None


def unit(path):
    return os.path.splitext(path)[0]


def folder(path):
    return path.split("/", 1)[0]


def read_includes(root):
    """[(from_file, to_file)] over the product's files, paths relative to root."""
    edges = []
    for top in sorted(LAYERS):
        for dirpath, dirnames, files in os.walk(os.path.join(root, top)):
            dirnames.sort()
            for name in sorted(files):
                if not name.endswith(SOURCE_EXT):
                    continue
                full = os.path.join(dirpath, name)
                src = os.path.relpath(full, root).replace(os.sep, "/")
                with open(full, encoding="utf-8", errors="replace") as f:
                    text = f.read()
                for m in INCLUDE_RE.finditer(text):
                    target = m.group(1)
                    for base in ("", "include/"):
                        if os.path.isfile(os.path.join(root, base + target)):
                            edges.append((src, base + target))
                            break
    return edges


def strongly_connected(graph):
    """Tarjan's algorithm without recursion: the components of two or more nodes."""
    index, low, on_stack, stack, result = {}, {}, set(), [], []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    advanced = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    result.append(sorted(comp))
    return result


def arrow_problem(src, dst):
    """Why the include src -> dst breaks the layering, or None."""
    a, b = folder(src), folder(dst)
    if a == b:
        return None
    if LAYERS[b] > LAYERS[a]:
        return f"upward: {a}/ (layer {LAYERS[a]}) includes {b}/ (layer {LAYERS[b]})"
    if LAYERS[b] == LAYERS[a] and (a, b) not in PEERS:
        return f"{a}/ and {b}/ share layer {LAYERS[a]} but are not peers"
    if a in OUTGOING_ONLY and not any(glob_match(p, dst) for p in OUTGOING_ONLY[a]):
        if not OUTGOING_ONLY[a]:
            return f"{a}/ may include nothing of other folders"
        return f"{a}/ may include only {', '.join(OUTGOING_ONLY[a])} of other folders"
    if (a, b) in PAIR_ONLY and not any(glob_match(p, dst) for p in PAIR_ONLY[(a, b)]):
        return f"{a}/ may include only {', '.join(PAIR_ONLY[(a, b)])} of {b}/"
    if b in INCOMING_ONLY and not any(glob_match(p, dst) for p in INCOMING_ONLY[b]):
        return f"other folders may include only {', '.join(INCOMING_ONLY[b])} of {b}/"
    return None


def check(root, allowed_cycles=None):
    """The problems of the tree at root, one line each (empty when it passes)."""
    allowed_cycles = ALLOWED_CYCLES if allowed_cycles is None else allowed_cycles
    problems = []
    graph = {}
    for src, dst in read_includes(root):
        why = arrow_problem(src, dst)
        if why:
            problems.append(f"{src} includes {dst}: {why}")
        if unit(src) != unit(dst):
            graph.setdefault(unit(src), set()).add(unit(dst))
    cycles = strongly_connected(graph)
    used = set()
    for comp in cycles:
        holder = next((i for i, a in enumerate(allowed_cycles) if set(comp) <= a), None)
        if holder is None:
            problems.append("unit cycle: " + " <-> ".join(comp))
        else:
            used.add(holder)
    for i, a in enumerate(allowed_cycles):
        if i not in used:
            problems.append("allowed cycle no longer a cycle, remove it from ALLOWED_CYCLES: " +
                            ", ".join(sorted(a)))
    return problems


def self_test():
    """Runs check() on generated trees; returns the failures (empty when all verdicts hold)."""
    cases = [
        # (name, files {path: text}, allowed cycles, expected substring or None for a pass)
        ("clean", {"util/a.hpp": "", "engine/t.hpp": '#include "util/a.hpp"\n',
                   "engine/t.cpp": '#include "engine/t.hpp"\n',
                   "data/d.hpp": '#include "engine/t.hpp"\n',
                   "kernels/k.cu": '#include "engine/ops/lstm_math.hpp"\n',
                   "engine/ops/lstm_math.hpp": "",
                   "engine/ops/lstm.cpp": '#include "kernels/cuda_ops.hpp"\n',
                   "kernels/cuda_ops.hpp": "",
                   "config/c.cpp": '#include "data/options.hpp"\n#include "engine/t.hpp"\n',
                   "data/options.hpp": "", "lib/l.cpp": '#include "lcm/lcm.hpp"\n',
                   "include/lcm/lcm.hpp": "#include <string>\n"}, [], None),
        ("unit cycle", {"data/x.hpp": '#include "data/y.hpp"\n',
                        "data/y.cpp": '#include "data/x.hpp"\n', "data/y.hpp": ""}, [],
         "unit cycle: data/x <-> data/y"),
        ("pair is one unit", {"data/x.hpp": "", "data/x.cpp": '#include "data/x.hpp"\n'}, [],
         None),
        ("upward", {"engine/t.cpp": '#include "data/d.hpp"\n', "data/d.hpp": ""}, [], "upward"),
        ("data includes config", {"data/d.cpp": '#include "config/config.hpp"\n',
                                  "config/config.hpp": ""}, [], "upward"),
        ("kernels beyond formulas", {"kernels/k.cu": '#include "engine/tensor.hpp"\n',
                                     "engine/tensor.hpp": ""}, [], "kernels/ may include only"),
        ("util includes engine", {"util/u.cpp": '#include "engine/tensor.hpp"\n',
                                  "engine/tensor.hpp": ""}, [], "upward"),
        ("public header includes lcm", {"include/lcm/lcm.hpp": '#include "util/log.hpp"\n',
                                        "util/log.hpp": ""}, [],
         "include/ may include nothing of other folders"),
        ("config beyond options", {"config/c.hpp": '#include "model/cost_model.hpp"\n',
                                   "model/cost_model.hpp": ""}, [],
         "config/ may include only model/options.hpp"),
        ("kernel internals", {"engine/e.cpp": '#include "kernels/reduce.cuh"\n',
                              "kernels/reduce.cuh": ""}, [], "other folders may include only"),
        ("same layer, not peers", {"lib/l.cpp": '#include "include/x.hpp"\n',
                                   "include/x.hpp": '#include "lib/l.hpp"\n', "lib/l.hpp": ""},
         [], "include/ and lib/ share layer 7 but are not peers"),
        ("allowed cycle", {"train/a.hpp": '#include "train/b.hpp"\n',
                           "train/b.hpp": '#include "train/a.hpp"\n'},
         [{"train/a", "train/b", "train/c"}], None),
        ("cycle beyond allowed", {"train/a.hpp": '#include "train/b.hpp"\n',
                                  "train/b.hpp": '#include "train/z.hpp"\n',
                                  "train/z.hpp": '#include "train/a.hpp"\n'},
         [{"train/a", "train/b"}], "unit cycle: train/a <-> train/b <-> train/z"),
        ("stale allowed cycle", {"train/a.hpp": "", "train/b.hpp": '#include "train/a.hpp"\n'},
         [{"train/a", "train/b"}], "no longer a cycle"),
    ]
    failures = []
    for name, files, allowed, expected in cases:
        with tempfile.TemporaryDirectory(prefix="lcm-incgraph-") as root:
            for path, text in files.items():
                os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
                with open(os.path.join(root, path), "w") as f:
                    f.write(text)
            problems = check(root, allowed)
        if expected is None and problems:
            failures.append(f"{name}: expected a pass, got {problems}")
        elif expected is not None and not any(expected in p for p in problems):
            failures.append(f"{name}: expected a problem with '{expected}', got {problems}")
    return failures


def main(argv):
    if argv[1:] == ["--self-test"]:
        failures = self_test()
        for line in failures:
            print("check_include_graph self-test: " + line, file=sys.stderr)
        if failures:
            return 1
        print("check_include_graph self-test: every verdict as expected")
        return 0
    if len(argv) > 2 or (len(argv) == 2 and argv[1].startswith("-")):
        print(__doc__.strip().splitlines()[-2], file=sys.stderr)
        return 2
    root = argv[1] if len(argv) == 2 else os.path.dirname(os.path.dirname(os.path.abspath(
        __file__)))
    if not os.path.isdir(os.path.join(root, "engine")):
        print(f"check_include_graph: {root} is not an lcm checkout (no engine/)", file=sys.stderr)
        return 2
    problems = check(root)
    for line in problems:
        print("check_include_graph: " + line, file=sys.stderr)
    if problems:
        return 1
    print("check_include_graph: no unit cycle outside ALLOWED_CYCLES, every include follows "
          "the layers")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
