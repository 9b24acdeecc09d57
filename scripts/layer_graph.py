#!/usr/bin/env python3
"""Check the engine crate's imports against the layer table of docs/ARCHITECTURE.md.

Why this exists: docs/ARCHITECTURE.md promises that the modules of `hyflow` form layers (each
row of the table under "## Layers of `hyflow`" calls only the rows below it), but nothing in
the build enforces it, and one convenient `use crate::sim::costs::CostModel` from a lower
layer quietly turns the layering into a tangle. This script computes the crate's import graph
from the source text alone (no cargo, no rustc: stdlib Python) and reports
  * upward imports: a file of a lower row referring to a file of a higher row ("layer N" is
    the table's N-th row, 1-based from the top);
  * cycles: each strongly connected component of the module graph with several modules (the
    count in the summary), with the file-level cycles inside it and every import between its
    modules, which are the edges to cut. Rank checks miss cycles inside one row; this does not.

  * the table's last column ("imports"), which must name exactly the modules each row's files
    import from other rows, so the table is the import graph and cannot drift from it.

Usage: scripts/layer_graph.py [--check] [--include-tests] [--dot FILE]
  --check          exit 1 on any upward import, cycle or layer-table error
  --include-tests  also count references inside #[cfg(test)] modules (off by default)
  --dot FILE       write the module graph in Graphviz dot (upward edges red)
"""
import argparse
import glob
import os
import re
import sys
from collections import defaultdict

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
CRATE = os.path.join(ROOT, "crates", "hyflow")
SRC = os.path.join(CRATE, "src")
DOC = os.path.join(ROOT, "docs", "ARCHITECTURE.md")

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
# A path in code: `crate::a::B`, `super::super::x`, `self::x` or `name::x` (the last kind
# only counts when `name` is a child module or a `use`d module, see `references`). The
# look-behind keeps us from starting in the middle of a longer path.
PATH_RE = re.compile(r"(?<![\w:$])(%s(?:\s*::\s*%s)+)" % (IDENT, IDENT))
USE_RE = re.compile(r"\buse\s+([^;]*);")
MOD_RE = re.compile(r"\bmod\s+(%s)\s*\{" % IDENT)
# What `strip` blanks, in the order a lexer meets it: line and doc comments, the start of a
# block comment (they nest: ended by hand), raw strings (r#".."#, br".."), strings, and char
# literals ('x', '\n', '\u{..}'; a lifetime 'a has no closing quote).
LITERAL_RE = re.compile(r"//[^\n]*|/\*|(?<!\w)b?r(#*)\".*?\"\1|(?:(?<!\w)b)?\"(?:\\.|[^\"\\])*\""
                        r"|'(?:\\(?:u\{[0-9a-fA-F]+\}|x[0-9a-fA-F]{2}|.)|[^\\'\n])'", re.S)
BLOCK_RE = re.compile(r"/\*|\*/")


def blank(s):
    """Spaces for every character but newlines (so offsets and line numbers stay)."""
    return re.sub(r"[^\n]", " ", s)


def strip(text):
    """Blank out comments, string and char literals."""
    out, pos = [], 0
    while True:
        m = LITERAL_RE.search(text, pos)
        if not m:
            return "".join(out) + text[pos:]
        end, depth = m.end(), int(m.group() == "/*")
        while depth:  # a block comment: find its end, counting the ones nested in it
            b = BLOCK_RE.search(text, end)
            if not b:
                end, depth = len(text), 0
            else:
                end, depth = b.end(), depth + (1 if b.group() == "/*" else -1)
        out += [text[pos : m.start()], blank(text[m.start() : end])]
        pos = end


def expand_use(tree):
    """`a::{b::{c, d as e}, self, *}` -> [[a, b, c], [a, b, d], [a], [a, *]]."""
    tree = re.sub(r"\s", "", re.sub(r"\s+as\s+\w+", "", tree))  # a rename keeps the target
    if "{" not in tree:
        segs = tree.split("::")
        return [segs[:-1] if segs[-1] == "self" else segs]
    head, body = tree[: tree.index("{")], tree[tree.index("{") + 1 : tree.rindex("}")]
    found, depth, start = [], 0, 0
    for i, c in enumerate(body + ","):  # split the group at its own commas
        depth += {"{": 1, "}": -1}.get(c, 0)
        if c == "," and depth == 0:
            found += expand_use(head + body[start:i]) if body[start:i] else []
            start = i + 1
    return found


class Crate:
    """The crate's files, keyed by module path: ('sim', 'costs') -> 'src/sim/costs.rs'."""

    def __init__(self):
        self.files = {}
        for path in sorted(glob.glob(os.path.join(SRC, "**", "*.rs"), recursive=True)):
            rel = os.path.relpath(path, SRC).replace(os.sep, "/")
            parts = rel[:-3].split("/")
            if parts[-1] == "mod":  # a mod.rs is its directory's module
                parts.pop()
            if parts != ["lib"]:  # the crate root is ignored
                self.files[tuple(parts)] = "src/" + rel

    def resolve(self, segs):
        """The longest prefix of segs naming a file, and the rest (item names)."""
        for k in range(len(segs), 0, -1):
            if tuple(segs[:k]) in self.files:
                return self.files[tuple(segs[:k])], segs[k:]
        return None, segs  # the crate root (lib.rs) or outside the crate

    def references(self, modpath, text, include_tests):
        """Yield (target file, item name) for every reference in one file's source text."""
        code = strip(text)
        # Inline `mod name { .. }` blocks: their spans, to know each offset's module path
        # (for `super`) and whether it lies in a #[cfg(test)] module.
        inline = []
        for m in MOD_RE.finditer(code):
            depth, j = 0, m.end() - 1
            for j in range(m.end() - 1, len(code)):
                depth += {"{": 1, "}": -1}.get(code[j], 0)
                if depth == 0:
                    break
            before = code[: m.start()]
            head = before[max(before.rfind(c) for c in ";{}") + 1 :]
            inline.append((m.start(), j, m.group(1), "cfg(test)" in head.replace(" ", "")))

        def context(at):  # (module path at offset, inside a test module?)
            spans = [s for s in inline if s[0] <= at <= s[1]]
            return list(modpath) + [s[2] for s in spans], any(s[3] for s in spans)

        scope = {}  # names usable as a path's first segment: `use`d modules, child modules

        def absolute(segs, here):  # a path as written -> a path from the crate root
            if segs[0] == "crate":
                return segs[1:]
            if segs[0] in ("self", "super"):
                here = list(here)
                while segs and segs[0] in ("self", "super"):
                    if segs.pop(0) == "super" and here:
                        here.pop()
                return here + segs
            if tuple(here + segs[:1]) in self.files:  # 2018 uniform path: a child module
                return here + segs
            return scope[segs[0]] + segs[1:] if segs[0] in scope else None

        found = []
        for m in USE_RE.finditer(code):
            here, test = context(m.start())
            for segs in expand_use(m.group(1)):
                full = absolute(list(segs), here) if segs else None
                if full is None or (test and not include_tests):
                    continue
                found.append(full)
                target, rest = self.resolve(full)
                if target and not rest and segs[-1] != "*":
                    scope[full[-1]] = full  # `use crate::a::b;` then `b::C` in code
        # Inline paths, with the `use` declarations blanked out first.
        code = USE_RE.sub(lambda m: blank(m.group(0)), code)
        for m in PATH_RE.finditer(code):
            here, test = context(m.start())
            full = absolute(re.split(r"\s*::\s*", m.group(1)), here)
            if full is not None and not (test and not include_tests):
                found.append(full)
        for full in found:
            target, rest = self.resolve(full)
            if target:
                yield target, rest[0] if rest else full[-1] + " (module)"


def read_layers(crate):
    """Layer table -> ({entry's module path: row, 1-based from the top},
    {row: modules its last cell says the row imports}, [errors])."""
    lines = open(DOC, encoding="utf-8").read().splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith("## Layers of `hyflow`"))
    entries, rows, errors, imports = {}, 0, [], {}
    for line in lines[start + 1 :]:
        if line.startswith("## "):
            break
        if not line.startswith("|") or line.startswith("|---") or "| module |" in line:
            continue
        cells = line.split("|")
        names = re.findall(r"`([^`]+)`", cells[1])
        rows += 1
        # The last cell names the modules the row imports ("—": none): checked below.
        imports[rows] = set(re.findall(r"`(\w+)`", cells[-2]))
        for name in names:
            path = tuple(name.split("::"))
            if path not in crate.files:
                errors.append("%s (row %d of the table) is not a module" % (name, rows))
            entries[path] = rows  # 1-based: row 1 is the top layer
    for path in crate.files:
        if path[:1] not in entries:
            errors.append("module %s is in no layer of docs/ARCHITECTURE.md" % path[0])
    return entries, imports, sorted(set(errors))


def tarjan(graph):
    """Strongly connected components of {node: successors} (Tarjan; the graphs are small)."""
    index, low, stack, sccs = {}, {}, [], []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:  # v is the root of a component: all above it on the stack
            sccs.append(sorted(stack[stack.index(v) :]))
            del stack[stack.index(v) :]

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sccs


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--include-tests", action="store_true")
    ap.add_argument("--dot", metavar="FILE")
    args = ap.parse_args()

    crate = Crate()
    entries, listed, errors = read_layers(crate)
    mod_of = {f: p[0] for p, f in crate.files.items()}
    # A file's layer entry: the most specific one (`sim::costs` before `sim`).
    entry_of = {f: max((p[:k] for k in range(1, len(p) + 1) if p[:k] in entries),
                       key=len, default=None) for p, f in crate.files.items()}

    edges = defaultdict(set)  # (from file, to file) -> item names
    for p, f in sorted(crate.files.items(), key=lambda x: x[1]):
        text = open(os.path.join(CRATE, f), encoding="utf-8").read()
        for target, item in crate.references(p, text, args.include_tests):
            if target != f:
                edges[(f, target)].add(item)

    def where(f):
        e = entry_of[f]
        return "%s, layer %s" % ("::".join(e), entries[e]) if e else "%s, no layer" % mod_of[f]

    # The table's last column must be the import graph itself, row by row.
    imported = defaultdict(set)
    for a, b in edges:
        if entry_of[a] and entry_of[b] and entries[entry_of[a]] != entries[entry_of[b]]:
            imported[entries[entry_of[a]]].add(mod_of[b])
    for row in sorted(listed):
        if listed[row] != imported[row]:
            errors.append("row %d of the layer table lists imports of %s, but its files import %s"
                          % (row, sorted(listed[row]) or "nothing", sorted(imported[row]) or "nothing"))
    for e in errors:
        print("error:", e)
    upward = [(a, b) for a, b in sorted(edges) if entry_of[a] and entry_of[b]
              and entries[entry_of[b]] < entries[entry_of[a]]]
    for a, b in upward:
        print("upward: %s (%s) -> %s (%s): %s"
              % (a, where(a), b, where(b), ", ".join(sorted(edges[(a, b)]))))

    file_graph, mod_graph = defaultdict(set), defaultdict(set)
    for a, b in edges:
        file_graph[a].add(b)
        if mod_of[a] != mod_of[b]:
            mod_graph[mod_of[a]].add(mod_of[b])
    file_cycles = [c for c in tarjan(file_graph) if len({mod_of[f] for f in c}) > 1]
    mod_cycles = [c for c in tarjan(mod_graph) if len(c) > 1]
    # A module cycle, the file cycles inside it, and every import between two of its modules.
    for mods in mod_cycles:
        print("cycle: modules %s" % ", ".join(mods))
        for c in file_cycles:
            if mod_of[c[0]] in mods:
                print("  files in a cycle: %s" % ", ".join(c))
        for a, b in sorted(edges):
            if mod_of[a] != mod_of[b] and mod_of[a] in mods and mod_of[b] in mods:
                print("  %s -> %s: %s%s" % (a, b, ", ".join(sorted(edges[(a, b)])),
                                            " (upward)" * ((a, b) in upward)))

    between = sum(1 for a, b in edges if mod_of[a] != mod_of[b])
    print("%d files, %d imports between modules, %d upward imports, %d cycles"
          % (len(crate.files), between, len(upward), len(mod_cycles)))

    if args.dot:  # one rank per layer row; upward edges red
        up = {(mod_of[a], mod_of[b]) for a, b in upward}
        dot = ["digraph hyflow {", "  node [shape=box];"]
        for i in sorted(set(entries.values())):
            mods = sorted({m for m in mod_of.values() if entries.get((m,)) == i})
            dot.append("  { rank=same; %s }" % " ".join('"%s";' % m for m in mods))
        dot += ['  "%s" -> "%s"%s;' % (a, b, " [color=red]" * ((a, b) in up))
                for a in sorted(mod_graph) for b in sorted(mod_graph[a])]
        with open(args.dot, "w") as out:
            out.write("\n".join(dot + ["}"]) + "\n")
    if args.check and (upward or mod_cycles or errors):
        sys.exit(1)


if __name__ == "__main__":
    main()
