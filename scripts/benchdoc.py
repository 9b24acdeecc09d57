"""BENCHMARKS.md's generated blocks: how a benchmark script writes its tables and how its quick
check proves that the committed figures still reproduce.

A script owns blocks delimited in BENCHMARKS.md by

    <!-- generated: ID -->
    _Produced by `COMMAND` at commit C on HOST, DATE._
    ...markdown...
    <!-- end generated: ID -->

`write_block` replaces one (the provenance line is written with it, so a block always says
which command, commit and machine made it). `check_tables` compares tables a script
recomputed in its quick mode (fewer rows or columns, same titles and labels) with the
committed block, cell by cell, and returns what differs: the deterministic figures
(simulator, hit rates, precision) must reproduce exactly, so a code change that moves one
fails the test command until the block is regenerated.
"""
import datetime
import os
import platform
import re
import subprocess

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
BENCHMARKS = os.path.join(ROOT, "BENCHMARKS.md")


def _git(*args):
    return subprocess.run(["git", "-C", ROOT, *args], capture_output=True, text=True).stdout.strip()


def host():
    """The machine, as a reader comparing figures needs it: CPU model and cores."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return "%s, %d cores" % (model, os.cpu_count() or 1)


def provenance(command):
    """The line every generated block starts with."""
    commit = _git("rev-parse", "--short=10", "HEAD") or "unknown"
    # Uncommitted changes to the code that produced the figures would make the commit a lie.
    dirty = _git("status", "--porcelain", "--untracked-files=no", "--", "crates", "scripts", "Cargo.lock")
    if dirty:
        commit += " with uncommitted changes"
    return "_Produced by `%s` at commit %s on %s, %s._" % (
        command, commit, host(), datetime.date.today().isoformat())


def _markers(block_id):
    return "<!-- generated: %s -->" % block_id, "<!-- end generated: %s -->" % block_id


def committed_block(block_id, path=BENCHMARKS):
    """The text of block `block_id` as committed (without its markers)."""
    begin, end = _markers(block_id)
    with open(path) as f:
        text = f.read()
    i, j = text.find(begin), text.find(end)
    if i < 0 or j < i:
        raise SystemExit("%s has no block %r (markers %s ... %s)" % (path, block_id, begin, end))
    return text[i + len(begin):j]


def write_block(block_id, body, command, path=BENCHMARKS):
    """Replaces block `block_id` with `body` under a fresh provenance line."""
    begin, end = _markers(block_id)
    committed_block(block_id, path)
    with open(path) as f:
        text = f.read()
    i, j = text.find(begin), text.find(end)
    fresh = "%s\n%s\n\n%s\n%s" % (begin, provenance(command), body.strip("\n"), end)
    with open(path, "w") as f:
        f.write(text[:i] + fresh + text[j + len(end):])


def tables(markdown):
    """Every table of `markdown` as (title, header cells, rows of cells); a table's title is the
    last non-blank line before it other than the provenance line, numbered when several
    tables share it (`title #2`)."""
    found, title, lines, seen = [], "", markdown.splitlines(), {}
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if line.startswith("|") and i + 1 < len(lines) and re.match(r"^\|(\s*:?-+:?\s*\|)+$", lines[i + 1].strip()):
            header = _cells(line)
            rows = []
            i += 2
            while i < len(lines) and lines[i].strip().startswith("|"):
                rows.append(_cells(lines[i].strip()))
                i += 1
            seen[title] = seen.get(title, 0) + 1
            found.append((title if seen[title] == 1 else "%s #%d" % (title, seen[title]), header, rows))
            continue
        if line and not line.startswith("_Produced by"):
            title = line
        i += 1
    return found


def _cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def check_tables(block_id, fresh_markdown, path=BENCHMARKS):
    """Differences between the tables of `fresh_markdown` and the committed block's tables of
    the same titles, for the rows (by their leading cells, as many as tell the committed rows
    apart) and columns (by header) the fresh ones have; a fresh table, row or column the block lacks is a difference too. Returns the
    differences and the number of cells compared."""
    committed = {t: (h, r) for t, h, r in tables(committed_block(block_id, path))}
    problems, compared = [], 0
    for title, header, rows in tables(fresh_markdown):
        if title not in committed:
            problems.append("%s: no table %r" % (block_id, title))
            continue
        old_header, old_rows = committed[title]
        n = _label_cells(old_rows)
        by_label = {tuple(r[:n]): r for r in old_rows}
        for row in rows:
            old = by_label.get(tuple(row[:n]))
            if old is None:
                problems.append("%s: %r has no row %r" % (block_id, title, " | ".join(row[:n])))
                continue
            for column, cell in zip(header[1:], row[1:]):
                if column not in old_header:
                    problems.append("%s: %r has no column %r" % (block_id, title, column))
                    continue
                was = old[old_header.index(column)] if old_header.index(column) < len(old) else ""
                compared += 1
                if was != cell:
                    problems.append("%s: %r, %s, %s: committed %s, now %s" % (
                        block_id, title, row[0], column, was, cell))
    return problems, compared


def _label_cells(rows):
    """How many leading cells tell a table's rows apart (a pipeline and a locality, say)."""
    for n in range(1, max((len(r) for r in rows), default=1) + 1):
        if len({tuple(r[:n]) for r in rows}) == len(rows):
            return n
    return 1


def finish_check(results):
    """Prints a check's outcome and exits non-zero on any difference; `results` is a list of
    (problems, cells compared)."""
    problems = [p for ps, _ in results for p in ps]
    compared = sum(n for _, n in results)
    for p in problems:
        print("MISMATCH " + p)
    if problems or compared == 0:
        raise SystemExit("%d of %d committed figures no longer reproduce (regenerate with --write)"
                         % (len(problems), compared) if compared else "nothing was compared")
    print("%d committed figures reproduce" % compared)
