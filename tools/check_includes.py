#!/usr/bin/env python3
"""Include and layer check for verl-cpp's C++ targets.

Bazel 4 with GCC has no layering_check, so this script does its job: for every
C++ target (cc_* rules and the bazel/defs.bzl macros) it reads the target's
sources and headers and fails when

  * a file includes a project header (`#include "verl/..."`, generated
    `.pb.h` included) whose owning target is neither the target itself nor a
    direct dependency;
  * a file includes a system header owned by a target of
    third_party/system_libs.BUILD (e.g. `absl/status/status.h`,
    `glog/logging.h`, `zlib.h`) that is not a direct dependency;
  * a dependency points up the layer list core -> profiler -> parallel -> ckpt
    -> models -> infer -> rl -> tools (and, inside verl/rl, trainer -> workers
    -> {algos, rewards, data}; the only sibling edges are rewards -> algos
    and data -> rewards, where verl has them: verl's MATH preprocessor
    extracts the ground truth with its reward_score helpers).

A dependency on a library with neither sources nor headers (an umbrella such
as @system//:absl) counts as a dependency on everything it depends on.

BUILD files are evaluated as Python with stub rules (Starlark BUILD files are
Python syntax); select() counts the values of every branch.

Usage: tools/check_includes.py [--root DIR] [--no_system] [--fix]
Prints one line per violation and exits 1 if there is any. --fix writes the
missing direct deps of include violations into the BUILD files (then run
buildifier); layer violations need a human.
"""

import argparse
import fnmatch
import os
import re
import sys
from collections import defaultdict

# The layer list: a package may depend only on its own layer or lower ones.
LAYERS = [
    "verl/core",
    "verl/profiler",
    "verl/parallel",
    "verl/ckpt",
    "verl/models",
    "verl/infer",
    "verl/rl",
    "tools",
    "examples",
]
# Inside verl/rl (DESIGN.md): trainer -> workers -> {algos, rewards, data}.
RL_SUBLAYERS = {
    "verl/rl/algos": 0,
    "verl/rl/rewards": 0,
    "verl/rl/data": 0,
    "verl/rl/workers": 1,
    "verl/rl/trainer": 2,
}
RL_ROOT_SUBLAYER = 3  # whatever stays directly in verl/rl sits above them all
# Edges between different packages of the same sublayer that are allowed.
SIBLING_EDGES = {("verl/rl/rewards", "verl/rl/algos"),
                 ("verl/rl/data", "verl/rl/rewards")}

CC_KINDS = {"cc_library", "cc_binary", "cc_test"}
HEADER_EXTS = (".h", ".hh", ".hpp", ".inc")
SOURCE_EXTS = HEADER_EXTS + (".c", ".cc", ".cpp", ".cxx")
BUILD_NAMES = ("BUILD.bazel", "BUILD")
# LibTorch's ATen/c10 headers are not declared as hdrs of @system//:torch (too
# many files for sandbox inputs); these prefixes belong to it all the same.
EXTRA_SYSTEM_PREFIXES = {
    "ATen/": "@system//:torch",
    "c10/": "@system//:torch",
    "caffe2/": "@system//:torch",
    "torch/": "@system//:torch",
}
# Multiarch include folder searched by the compiler after include/.
MULTIARCH_DIRS = ("include/", "include/x86_64-linux-gnu/")
# --fix adds these instead of an Abseil component: the project depends on the
# umbrella (one dependency for all of Abseil).
FIX_PREFERRED = [(re.compile(r"@system//:absl_\w+\Z"), "@system//:absl")]

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]')


def glob_regex(pattern):
    """Translates a Bazel glob pattern (with ** for any depth) to a regex."""
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out += "(?:.*/)?"
            i += 3
        elif pattern.startswith("**", i):
            out += ".*"
            i += 2
        elif pattern[i] == "*":
            out += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            out += "[^/]"
            i += 1
        else:
            out += re.escape(pattern[i])
            i += 1
    return re.compile(out + r"\Z")


class Select(list):
    """select(): the union of every branch (a list), or the default value."""


class Rule:
    def __init__(self, kind, pkg, build_file, attrs):
        self.kind = kind
        self.pkg = pkg
        self.build_file = build_file
        self.attrs = attrs
        self.name = attrs.get("name", "")

    @property
    def label(self):
        return "//%s:%s" % (self.pkg, self.name)


class Workspace:
    """All packages of one Bazel workspace (plus the @system repositories)."""

    def __init__(self, root, macro_deps):
        self.root = root
        self.macro_deps = macro_deps
        self.rules = {}  # label -> Rule
        self.build_lines = {}  # build file -> list of lines

    # --- BUILD evaluation -------------------------------------------------

    def eval_build(self, path, pkg, repo="", file_root=None):
        """Evaluates one BUILD file; rules are recorded under repo//pkg."""
        text = open(path).read()
        self.build_lines[path] = text.splitlines()
        pkg_dir = file_root if file_root is not None else os.path.join(
            self.root, pkg)
        ws = self

        def record(kind):
            def rule(*args, **attrs):
                if "name" not in attrs:
                    return None
                r = Rule(kind, pkg, path, attrs)
                r.repo = repo
                ws.rules["%s//%s:%s" % (repo, pkg, attrs["name"])] = r
                return None

            return rule

        def glob(include, exclude=(), **_):
            if repo:  # external repository: keep the patterns
                return ["glob:" + p for p in include]
            files = list_package_files(pkg_dir)
            inc = [glob_regex(p) for p in include]
            exc = [glob_regex(p) for p in exclude]
            return sorted(f for f in files if any(r.match(f) for r in inc)
                          and not any(r.match(f) for r in exc))

        def select(branches, **_):
            values = list(branches.values())
            if values and all(isinstance(v, list) for v in values):
                out = Select()
                for v in values:
                    out.extend(x for x in v if x not in out)
                return out
            return branches.get("//conditions:default",
                                values[0] if values else None)

        builtins_names = set(dir(__builtins__)) if isinstance(
            __builtins__, type(sys)) else set(__builtins__)

        class Env(dict):
            def __missing__(self, key):
                if key in builtins_names:
                    raise KeyError(key)
                if key.isupper():  # a loaded constant (e.g. AVX2_COPTS)
                    return []
                return record(key)

        env = Env(
            load=lambda *a, **k: None,
            package=lambda *a, **k: None,
            licenses=lambda *a, **k: None,
            exports_files=lambda *a, **k: None,
            glob=glob,
            select=select,
            package_name=lambda: pkg,
            repository_name=lambda: "@" + repo.lstrip("@"),
        )
        exec(compile(text, path, "exec"), {"__builtins__": __builtins__},
             env)

    # --- labels -----------------------------------------------------------

    def resolve(self, label, pkg, repo=""):
        """Normalizes a label written in package `pkg` of `repo`."""
        if label.startswith("@verl//"):
            label = label[len("@verl"):]
        if label.startswith("@"):
            r, _, rest = label.partition("//")
            return r + "//" + (rest if ":" in rest else
                               rest + ":" + rest.rsplit("/", 1)[-1])
        if label.startswith("//"):
            rest = label[2:]
            if ":" not in rest:
                rest += ":" + rest.rsplit("/", 1)[-1]
            return repo + "//" + rest
        return "%s//%s:%s" % (repo, pkg, label.lstrip(":"))

    def rule_files(self, rule, attr):
        """Workspace-relative paths of the files named in rule.attr."""
        out = []
        for f in rule.attrs.get(attr) or []:
            if not isinstance(f, str) or f.startswith("glob:"):
                continue
            lab = self.resolve(f, rule.pkg)
            if lab in self.rules:  # a rule (filegroup): its files
                out += self.rule_files(self.rules[lab], "srcs")
                continue
            pkg, _, name = lab[2:].partition(":")
            out.append(os.path.join(pkg, name) if pkg else name)
        return out

    def deps(self, rule):
        deps = list(rule.attrs.get("deps") or [])
        deps += self.macro_deps.get(rule.kind, [])
        return [self.resolve(d, rule.pkg, rule.repo) for d in deps
                if isinstance(d, str)]

    def is_cc(self, rule):
        return rule.kind in CC_KINDS or rule.kind in self.macro_deps


def list_package_files(pkg_dir):
    """Files of a package: everything below it but not in a subpackage."""
    out = []
    for dirpath, dirnames, filenames in os.walk(pkg_dir):
        rel = os.path.relpath(dirpath, pkg_dir)
        if rel != "." and any(n in filenames for n in BUILD_NAMES):
            dirnames[:] = []
            continue
        for f in filenames:
            out.append(f if rel == "." else os.path.join(rel, f))
    return out


def find_packages(root):
    """Package paths of the workspace at root (nested workspaces skipped)."""
    ignored = set()
    ignore_file = os.path.join(root, ".bazelignore")
    if os.path.exists(ignore_file):
        ignored = {l.strip().rstrip("/") for l in open(ignore_file)
                   if l.strip() and not l.startswith("#")}
    pkgs = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        rel = "" if rel == "." else rel
        dirnames[:] = sorted(
            d for d in dirnames
            if not d.startswith((".", "bazel-"))
            and os.path.join(rel, d) not in ignored
            and not os.path.exists(os.path.join(dirpath, d, "WORKSPACE"))
            and os.path.join(rel, d) != "third_party")
        for n in BUILD_NAMES:
            if n in filenames:
                pkgs.append((rel, os.path.join(dirpath, n)))
                break
    return pkgs


def read_macro_deps(root):
    """bazel/defs.bzl: which macros are C++ rules, and deps they add."""
    path = os.path.join(root, "bazel", "defs.bzl")
    out = {}
    if not os.path.exists(path):
        return out
    text = open(path).read()
    for m in re.finditer(r"^def (\w+)\(.*?(?=^def |\Z)", text, re.S | re.M):
        body = m.group(0)
        if not re.search(r"native\.cc_(library|binary|test)\(", body):
            continue
        added = re.search(r"deps\s*=\s*deps\s*\+\s*\[([^\]]*)\]", body)
        out[m.group(1)] = re.findall(r'"([^"]+)"', added.group(1)) \
            if added else []
    return out


def layer_of(pkg):
    """(layer index, rl sublayer, group) of a package, or None if free."""
    best = None
    for i, prefix in enumerate(LAYERS):
        if pkg == prefix or pkg.startswith(prefix + "/"):
            best = (i, prefix)
    if best is None:
        return None
    i, prefix = best
    if prefix != "verl/rl":
        return (i, 0, prefix)
    for sub, rank in RL_SUBLAYERS.items():
        if pkg == sub or pkg.startswith(sub + "/"):
            return (i, rank, sub)
    return (i, RL_ROOT_SUBLAYER, "verl/rl")


def layer_violation(pkg, dep_pkg):
    a, b = layer_of(pkg), layer_of(dep_pkg)
    if a is None or b is None or a[2] == b[2]:
        return None
    if b[0] > a[0]:
        return "%s is above %s" % (b[2], a[2])
    if b[0] < a[0]:
        return None
    if b[1] > a[1]:
        return "%s is above %s" % (b[2], a[2])
    if b[1] == a[1] and (a[2], b[2]) not in SIBLING_EDGES:
        return "%s and %s are siblings (allowed sibling edges: %s)" % (
            a[2], b[2], ", ".join("%s -> %s" % e for e in sorted(SIBLING_EDGES)))
    return None


class Checker:
    def __init__(self, root, check_system=True):
        self.root = os.path.abspath(root)
        self.ws = Workspace(self.root, read_macro_deps(self.root))
        self.check_system = check_system
        for pkg, path in find_packages(self.root):
            self.ws.eval_build(path, pkg)
        self.system_patterns = []  # (regex, label)
        self.load_system()
        self.owners = defaultdict(set)  # header path -> labels
        self.index_owners()
        self.violations = []
        self.missing = defaultdict(set)  # rule label -> labels to add

    def load_system(self):
        """@system and @com_google_protobuf: header patterns per target."""
        ws_file = os.path.join(self.root, "WORKSPACE")
        if not os.path.exists(ws_file):
            return
        text = open(ws_file).read()
        self.repo_paths = {}
        for m in re.finditer(
                r'new_local_repository\(\s*name\s*=\s*"(\w+)",\s*'
                r'build_file\s*=\s*"//third_party:([\w.]+)",\s*'
                r'path\s*=\s*"([^"]+)"', text):
            repo, build = "@" + m.group(1), m.group(2)
            self.repo_paths[repo] = m.group(3)
            path = os.path.join(self.root, "third_party", build)
            if os.path.exists(path):
                self.ws.eval_build(path, "", repo=repo, file_root="")
        for label, rule in self.ws.rules.items():
            if not label.startswith("@"):
                continue
            incs = ["include/"] + [d.rstrip("/") + "/"
                                   for d in rule.attrs.get("includes") or []]
            for h in rule.attrs.get("hdrs") or []:
                pat = h[len("glob:"):] if h.startswith("glob:") else h
                self.system_patterns.append(
                    (glob_regex(pat), label, incs,
                     self.repo_paths.get(label.partition("//")[0], "/")))
        for prefix, label in EXTRA_SYSTEM_PREFIXES.items():
            self.system_patterns.append(
                (glob_regex("include/" + prefix + "**"), label, ["include/"],
                 self.repo_paths.get(label.partition("//")[0], "/")))

    def system_owners(self, inc):
        """Targets of the system repositories that declare the header the
        compiler finds for `#include <inc>` (it must exist there)."""
        out = set()
        for regex, label, incs, repo_path in self.system_patterns:
            for d in set(incs) | set(MULTIARCH_DIRS):
                if regex.match(d + inc) and os.path.exists(
                        os.path.join(repo_path, d + inc)):
                    out.add(label)
        return out

    def index_owners(self):
        ws = self.ws
        for label, rule in ws.rules.items():
            if label.startswith("@"):
                continue
            if ws.is_cc(rule):
                for attr in ("hdrs", "srcs", "textual_hdrs"):
                    for f in ws.rule_files(rule, attr):
                        if f.endswith(HEADER_EXTS):
                            self.owners[f].add(label)
            elif rule.kind == "cc_proto_library":
                for d in ws.deps(rule):
                    proto = ws.rules.get(d)
                    if proto is None:
                        continue
                    for f in ws.rule_files(proto, "srcs"):
                        if f.endswith(".proto"):
                            self.owners[f[:-len(".proto")] + ".pb.h"].add(
                                label)

    def provided(self, rule):
        """Labels whose headers `rule` may include: itself, its direct deps,
        and what umbrella deps (no srcs, no hdrs) forward."""
        out = {self.ws.resolve(rule.name, rule.pkg, rule.repo)}
        todo = list(self.ws.deps(rule))
        while todo:
            d = todo.pop()
            if d in out:
                continue
            out.add(d)
            r = self.ws.rules.get(d)
            if r is None:
                continue
            if r.kind == "alias" and isinstance(r.attrs.get("actual"), str):
                todo.append(self.ws.resolve(r.attrs["actual"], r.pkg, r.repo))
            elif (r.kind in CC_KINDS or r.kind in self.ws.macro_deps) and \
                    not r.attrs.get("srcs") and not r.attrs.get("hdrs"):
                todo += self.ws.deps(r)
        return out

    def dep_line(self, rule, needle):
        """BUILD file line of `needle` inside the rule, else the rule's."""
        lines = self.ws.build_lines[rule.build_file]
        start = 0
        for i, line in enumerate(lines):
            if re.search(r'\bname\s*=\s*"%s"' % re.escape(rule.name), line):
                start = i
                break
        for i in range(start, len(lines)):
            if i > start and re.match(r"^\S", lines[i]):
                break
            if needle and '"%s"' % needle in lines[i]:
                return i + 1
        return start + 1

    def check(self):
        ws = self.ws
        for label, rule in sorted(ws.rules.items()):
            if label.startswith("@") or not ws.is_cc(rule):
                continue
            provided = self.provided(rule)
            for raw in rule.attrs.get("deps") or []:
                if not isinstance(raw, str):
                    continue
                dep = ws.resolve(raw, rule.pkg)
                if dep.startswith("@"):
                    continue
                why = layer_violation(rule.pkg, dep[2:].partition(":")[0])
                if why:
                    self.violations.append(
                        "%s:%d: %s depends on %s, a layer violation: %s" % (
                            os.path.relpath(rule.build_file, self.root),
                            self.dep_line(rule, raw), label, dep, why))
            files = []
            for attr in ("srcs", "hdrs", "textual_hdrs"):
                files += [f for f in ws.rule_files(rule, attr)
                          if f.endswith(SOURCE_EXTS)]
            for f in files:
                path = os.path.join(self.root, f)
                if os.path.exists(path):
                    self.check_file(f, path, label, provided)

    def check_file(self, rel, path, label, provided):
        for n, line in enumerate(open(path, errors="replace"), 1):
            m = INCLUDE_RE.match(line)
            if not m:
                continue
            inc = m.group(2)
            owners = self.owners.get(inc)
            if owners is None and m.group(1) == '"':
                local = os.path.normpath(os.path.join(os.path.dirname(rel),
                                                      inc))
                owners = self.owners.get(local)
                if owners is not None:
                    inc = local
            if owners is None:
                if inc.startswith("verl/") or os.path.exists(
                        os.path.join(self.root, inc)):
                    self.violations.append(
                        "%s:%d: includes %s owned by no target" % (rel, n, inc))
                    continue
                if not self.check_system:
                    continue
                owners = self.system_owners(inc)
                if not owners:
                    continue  # the C/C++ standard library and the OS
            if owners & provided:
                continue
            self.missing[label].add(sorted(owners)[0])
            self.violations.append(
                "%s:%d: includes %s owned by %s, not a dep of %s" % (
                    rel, n, inc, " or ".join(sorted(owners)), label))


def add_deps(checker):
    """Writes the missing direct deps into the BUILD files (--fix)."""
    edits = defaultdict(dict)  # build file -> rule name -> labels
    for label, adds in checker.missing.items():
        rule = checker.ws.rules[label]
        labels = set()
        for a in adds:
            for regex, preferred in FIX_PREFERRED:
                if regex.match(a):
                    a = preferred
            if a.startswith("//%s:" % rule.pkg):
                a = ":" + a.partition(":")[2]
            labels.add(a)
        edits[rule.build_file][rule.name] = labels
    for path, rules in sorted(edits.items()):
        lines = open(path).read().split("\n")
        for name, labels in rules.items():
            start = next(i for i, l in enumerate(lines)
                         if re.search(r'\bname\s*=\s*"%s"' % re.escape(name),
                                      l))
            end = start + 1
            while end < len(lines) and not re.match(r"^\S", lines[end]):
                end += 1
            new = ['        "%s",' % l for l in sorted(labels)]
            for i in range(start, end):
                m = re.match(r'^(\s*)deps = \[(.*)\],$', lines[i])
                if m:  # one-line list
                    old = [x.strip() for x in m.group(2).split(",") if x.strip()]
                    lines[i] = "%sdeps = [%s]," % (m.group(1), ", ".join(
                        old + ['"%s"' % l for l in sorted(labels)]))
                    break
                if re.match(r"^\s*deps = \[$", lines[i]):
                    lines[i + 1:i + 1] = new
                    break
            else:
                lines[end:end] = ["    deps = ["] + new + ["    ],"]
        open(path, "w").write("\n".join(lines))
        print("check_includes: added deps in %s (run buildifier)" %
              os.path.relpath(path, checker.root), file=sys.stderr)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), ".."),
        help="workspace root (default: this script's repository)")
    parser.add_argument("--no_system", action="store_true",
                        help="check project headers only, not @system ones")
    parser.add_argument("--fix", action="store_true",
                        help="add the missing direct deps to the BUILD files")
    args = parser.parse_args(argv)
    checker = Checker(args.root, check_system=not args.no_system)
    checker.check()
    if args.fix:
        add_deps(checker)
    for v in sorted(set(checker.violations)):
        print(v)
    n_cc = sum(1 for l, r in checker.ws.rules.items()
               if not l.startswith("@") and checker.ws.is_cc(r))
    print("check_includes: %d C++ targets, %d violations" % (
        n_cc, len(set(checker.violations))), file=sys.stderr)
    return 1 if checker.violations else 0


if __name__ == "__main__":
    sys.exit(main())
