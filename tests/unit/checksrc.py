#!/usr/bin/python3
"""Source checks (as curl's checksrc) over lib/ and handlers/, printed as TAP,
one test per rule; each failure lists the offending places.

  - no banned function: sprintf strcpy strcat strtok atoi gets (word boundary:
    snprintf, ah_sprintf or strtoll never trip it);
  - strtol and friends get an end pointer: without one "12abc" reads as 12;
  - the result of chmod, fchmod, fcntl or write is looked at: each of them
    fails in ways a caller must know about (a mode not set, a short write);
  - no file over 500 lines, no function over 80 (a function body opens with
    "{" and closes with "}" in column 0, as everywhere here);
  - layers: the include graph of lib/'s modules (which module's files include
    which module's headers) has no circle, and nothing in lib/ includes a
    header of handlers/;
  - declared order: each module includes only the modules its
    lib/<module>/meson.build names (an ah_<m>_dep, <m>_dep or inc_<m>) and
    what those name in turn, and the top-level meson.build enters every
    module's subdir after the modules it names (the per-library include
    paths make the build refuse the rest; this says where).

Comments are not exempt: a banned name in a comment is rare and cheap to
reword, and exempting comments would need a C lexer.
Usage: checksrc.py [SOURCE_ROOT]   (default: the repository this file is in)
"""
import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                       os.path.join(os.path.dirname(__file__), "..", ".."))
MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 80


def sources():
    for top in ("lib", "handlers"):
        for dirpath, _, names in os.walk(os.path.join(ROOT, top)):
            for n in sorted(names):
                if n.endswith((".c", ".h")):
                    p = os.path.join(dirpath, n)
                    yield os.path.relpath(p, ROOT), open(p, encoding="utf-8").read().split("\n")


FILES = sorted(sources())


def grep(pattern):
    rx = re.compile(pattern)
    return [f"{p}:{i + 1}: {line.strip()}" for p, lines in FILES
            for i, line in enumerate(lines) if rx.search(line)]


def banned():
    return grep(r"(^|[^A-Za-z0-9_])(sprintf|strcpy|strcat|strtok|atoi|gets)\s*\(")


def strtol_without_end():
    return grep(r"\bstrto(l|ll|ul|ull|d|f|ld|imax|umax)\s*\([^;]*,\s*NULL\s*[,)]")


def ignored_results():
    # The call is the whole statement: nothing reads what it returned.
    return grep(r"^\s*(chmod|fchmod|fcntl|write)\s*\(.*\)\s*;\s*$")


def long_files():
    return [f"{p}: {len(lines) - 1} lines" for p, lines in FILES if len(lines) - 1 > MAX_FILE_LINES]


def long_functions():
    out = []
    for p, lines in FILES:
        start = None
        for i, line in enumerate(lines):
            if line == "{":
                start = i
            elif line == "}" and start is not None:
                if i - start + 1 > MAX_FUNCTION_LINES:
                    out.append(f"{p}:{start}: {lines[start - 1].strip()} ({i - start + 1} lines)")
                start = None
    return out


def lib_modules():
    return {d for d in os.listdir(os.path.join(ROOT, "lib"))
            if os.path.isdir(os.path.join(ROOT, "lib", d))}


INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def layers():
    edges, bad = {}, []
    inc = INCLUDE
    modules = lib_modules()
    for p, lines in FILES:
        parts = p.split(os.sep)
        if parts[0] != "lib":
            continue
        mod = parts[1]
        for i, line in enumerate(lines):
            m = inc.match(line)
            if not m:
                continue
            target = m.group(1).split("/")
            if len(target) == 1:
                if not os.path.exists(os.path.join(ROOT, "lib", mod, target[0])):
                    bad.append(f"{p}:{i + 1}: includes \"{m.group(1)}\", not a header of lib/{mod}")
                continue
            if target[0] not in modules:
                bad.append(f"{p}:{i + 1}: includes \"{m.group(1)}\", outside lib/")
            elif target[0] != mod:
                edges.setdefault(mod, set()).add(target[0])
    # A circle: a module that reaches itself.
    def reach(a, seen):
        for b in edges.get(a, ()):
            if b not in seen:
                seen.add(b)
                reach(b, seen)
        return seen
    for mod in sorted(edges):
        if mod in reach(mod, set()):
            bad.append(f"lib/{mod}: in a circle of includes ({mod} -> "
                       f"{', '.join(sorted(edges[mod]))})")
    return bad


def read(path):
    try:
        return open(os.path.join(ROOT, path), encoding="utf-8").read()
    except OSError:
        return None


def declared_deps(modules):
    """Each module's meson.build: the modules it names (comments left out)."""
    deps = {}
    for mod in modules:
        text = re.sub(r"#[^\n]*", "", read(f"lib/{mod}/meson.build") or "")
        names = set(re.findall(r"\b(?:ah_)?([a-z0-9_]+?)_dep\b", text))
        names |= set(re.findall(r"\binc_([a-z0-9_]+)\b", text))
        deps[mod] = {n for n in names if n in modules and n != mod}
    return deps


def declared_order():
    modules = lib_modules()
    deps, bad = declared_deps(modules), []

    def closure(mod, seen):
        for d in deps.get(mod, ()):
            if d not in seen:
                seen.add(d)
                closure(d, seen)
        return seen
    for p, lines in FILES:
        parts = p.split(os.sep)
        if parts[0] != "lib":
            continue
        allowed = closure(parts[1], set())
        for i, line in enumerate(lines):
            m = INCLUDE.match(line)
            target = m.group(1).split("/")[0] if m and "/" in m.group(1) else None
            if target in modules and target != parts[1] and target not in allowed:
                bad.append(f"{p}:{i + 1}: includes \"{m.group(1)}\"; lib/{parts[1]}/meson.build "
                           f"does not name {target} (nor does anything it names)")
    top = read("meson.build")
    if top is not None:
        order = re.findall(r"^subdir\('lib/([a-z0-9_]+)'\)", top, re.M)
        for mod in order:
            for d in sorted(deps.get(mod, ())):
                if d in order and order.index(d) > order.index(mod):
                    bad.append(f"meson.build: subdir('lib/{mod}') comes before subdir('lib/{d}'), "
                               f"which it depends on")
    return bad


RULES = [
    ("no banned function in lib/ or handlers/", banned),
    ("strtol and friends get an end pointer", strtol_without_end),
    ("results of chmod, fchmod, fcntl and write are looked at", ignored_results),
    (f"no file over {MAX_FILE_LINES} lines", long_files),
    (f"no function over {MAX_FUNCTION_LINES} lines", long_functions),
    ("lib/ modules include each other without a circle, never handlers/", layers),
    ("lib/ modules include only what their meson.build declares, in order", declared_order),
]


def main():
    if not FILES:
        print("1..1\nnot ok 1 - no sources found under " + ROOT)
        return 1
    print(f"1..{len(RULES)}")
    failed = 0
    for n, (desc, rule) in enumerate(RULES, 1):
        hits = rule()
        print(f"{'not ok' if hits else 'ok'} {n} - {desc}")
        for h in hits:
            print(f"# {h}")
        failed |= bool(hits)
    return failed


if __name__ == "__main__":
    sys.exit(main())
