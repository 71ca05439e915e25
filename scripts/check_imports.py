#!/usr/bin/env python3
"""What import-linter cannot see: private-name reach-ins between kwire's packages, and dynamic imports.

    python scripts/check_imports.py              # exit 1 and one line per finding, or exit 0
    python scripts/check_imports.py --scope module   # stricter: also between modules of one package

A *package* here is a layer's unit: ``kwire_cli.codec``, ``kwire_cli.capture`` ... or a top-level
module such as ``kwire_cli.errors``. A name (or module) whose last part starts with one underscore
is private to its package: another package may not use it. Checked in every module of kwire_cli,
imports inside functions included:

KW001  ``from kwire_cli.x import _name`` (or a relative import) of another package's private name
       or private module
KW002  ``import kwire_cli.x._mod`` of another package's private module
KW003  ``mod._name`` where ``mod`` was bound by an import of another package's module (also a
       dotted ``kwire_cli.x.y._name``), ``getattr(mod, "_name")``/``setattr``/``hasattr``
KW004  ``obj._name`` where ``_name`` is defined only in other packages (a method, a class
       attribute or ``self._name = ...`` there, and nowhere in this one): a reach-in to an object
       of another package's class (``conv._remember(...)``). A heuristic: names of the standard
       library's underscore APIs (namedtuple ``_fields``/``_replace``/``_asdict``/``_make``, ...)
       are allowed.
KW005  ``importlib.import_module("kwire_cli.x")`` / ``__import__`` with a constant name that goes
       up the layers of the "layers" contract in pyproject.toml (import-linter sees ``import``
       statements, including those inside functions, but not these)
KW006  an import cycle between modules, imports inside functions and under ``TYPE_CHECKING``
       included (an import inside a function hides a cycle from Python, not from the design).
       An edge goes to the module named (``from pkg import sub`` to ``pkg.sub`` when ``sub`` is a
       module); a package's ``__init__`` importing its own submodules is not an edge back from them.

Python source generated at run time (strings exec'd by the codec) is not parsed.
"""
from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: import-linter depends on tomli there
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "kwire_cli"
# underscore names that are public APIs of the standard library's types
STDLIB_UNDERSCORE = {"_fields", "_field_defaults", "_replace", "_asdict", "_make", "_name_", "_value_",
                     "_missing_", "_generate_next_value_", "_ignore_", "_order_", "_getframe", "_exit"}


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    code: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.code} {self.message}"


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def unit(module: str, scope: str) -> str:
    """The package a module belongs to: kwire_cli.<first part> (or the module itself in scope 'module')."""
    if scope == "module":
        return module
    parts = module.split(".")
    return ".".join(parts[:2])


def resolve_relative(current: str, is_package: bool, level: int, target: str | None) -> str:
    base = current.split(".")
    if not is_package:
        base = base[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def first_private(dotted: str) -> str | None:
    """The dotted prefix up to and including the first private part of a kwire_cli path, or None."""
    parts = dotted.split(".")
    for i, p in enumerate(parts):
        if is_private(p):
            return ".".join(parts[: i + 1])
    return None


def read_layers(root: Path) -> list[set[str]]:
    """The "layers" contract of pyproject.toml as sets of full module names, top first."""
    config = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["importlinter"]
    for contract in config["contracts"]:
        if contract.get("type") == "layers":
            containers = contract.get("containers") or [""]
            layers = []
            for layer in contract["layers"]:
                names: set[str] = set()
                for part in layer.replace(":", "|").split("|"):
                    tail = part.strip().strip("()")
                    names.update(f"{c}.{tail}" if c else tail for c in containers)
                layers.append(names)
            return layers
    return []


def layer_index(module: str, layers: list[set[str]]) -> int | None:
    for i, names in enumerate(layers):
        if any(module == n or module.startswith(n + ".") for n in names):
            return i
    return None


class PrivateDefinitions(ast.NodeVisitor):
    """Private names each package defines as class members (methods, class attributes, self._x = ...)."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for item in node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and is_private(item.name):
                self.names.add(item.name)
            elif isinstance(item, ast.Assign):
                self.names.update(t.id for t in item.targets if isinstance(t, ast.Name) and is_private(t.id))
            elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and is_private(item.target.id):
                self.names.add(item.target.id)
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if (isinstance(node.ctx, ast.Store) and isinstance(node.value, ast.Name)
                and node.value.id in ("self", "cls") and is_private(node.attr)):
            self.names.add(node.attr)
        self.generic_visit(node)


class Checker(ast.NodeVisitor):
    def __init__(self, path: str, module: str, is_package: bool, scope: str, layers: list[set[str]],
                 own_private: set[str], foreign_private: dict[str, set[str]]) -> None:
        self.path, self.module, self.is_package, self.scope = path, module, is_package, scope
        self.here = unit(module, scope)
        self.layers = layers
        self.own_private = own_private
        self.foreign_private = foreign_private  # private member name -> the other packages defining it
        self.aliases: dict[str, str] = {}  # local name -> kwire_cli module it stands for
        self.findings: list[Finding] = []

    def add(self, node: ast.AST, code: str, message: str) -> None:
        self.findings.append(Finding(self.path, getattr(node, "lineno", 0), code, message))

    def foreign(self, holder: str) -> bool:
        """Whether a private name of module `holder` is out of this module's reach."""
        if holder.split(".")[0] != PACKAGE:
            return False
        if self.scope == "module":  # a package's private names are its own modules' too
            return holder not in (self.module, self.module.rpartition(".")[0] if not self.is_package else self.module)
        return unit(holder, self.scope) != self.here

    # imports
    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            if a.name.split(".")[0] != PACKAGE:
                continue
            priv = first_private(a.name)
            if priv and self.foreign(priv.rpartition(".")[0]):
                self.add(node, "KW002", f"imports {a.name}: {priv} is private to {unit(priv, self.scope)}")
            if a.asname:
                self.aliases[a.asname] = a.name
            else:
                self.aliases.setdefault(PACKAGE, PACKAGE)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            target = resolve_relative(self.module, self.is_package, node.level, node.module)
        else:
            target = node.module or ""
        if target.split(".")[0] != PACKAGE:
            return
        priv = first_private(target)
        if priv and self.foreign(priv.rpartition(".")[0]):
            self.add(node, "KW001", f"imports from {target}: {priv} is private to {unit(priv, self.scope)}")
            return
        for a in node.names:
            full = f"{target}.{a.name}"
            if is_private(a.name) and self.foreign(target):
                self.add(node, "KW001", f"imports {a.name} from {target}: private to {unit(target, self.scope)}")
            self.aliases[a.asname or a.name] = full

    # attribute reach-ins
    def dotted(self, node: ast.expr) -> str | None:
        """The kwire_cli module path an expression names through the imports seen (or None)."""
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self.dotted(node.value)
            return f"{base}.{node.attr}" if base else None
        return None

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if is_private(node.attr) and node.attr not in STDLIB_UNDERSCORE:
            base = self.dotted(node.value)
            if base is not None:
                if self.foreign(base) and not first_private(base):
                    self.add(node, "KW003", f"{base}.{node.attr}: private to {unit(base, self.scope)}")
            elif self.reaches_in(node.value, node.attr):
                owners = ", ".join(sorted(self.foreign_private[node.attr]))
                self.add(node, "KW004", f".{node.attr}: a private member of a class in {owners}")
        self.generic_visit(node)

    def reaches_in(self, value: ast.expr, attr: str) -> bool:
        if isinstance(value, ast.Name) and value.id in ("self", "cls"):
            return False
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "super":
            return False
        return (attr not in STDLIB_UNDERSCORE and attr not in self.own_private
                and attr in self.foreign_private)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        args = node.args
        if (name in ("getattr", "setattr", "hasattr", "delattr") and len(args) >= 2
                and isinstance(args[1], ast.Constant) and isinstance(args[1].value, str)
                and is_private(args[1].value) and args[1].value not in STDLIB_UNDERSCORE):
            base = self.dotted(args[0])
            if base is not None and self.foreign(base):
                self.add(node, "KW003", f"{name}({base}, {args[1].value!r}): private to {unit(base, self.scope)}")
        if (name in ("import_module", "__import__") and args and isinstance(args[0], ast.Constant)
                and isinstance(args[0].value, str) and args[0].value.split(".")[0] == PACKAGE):
            self.dynamic_import(node, args[0].value)
        self.generic_visit(node)

    def dynamic_import(self, node: ast.AST, target: str) -> None:
        priv = first_private(target)
        if priv and self.foreign(priv.rpartition(".")[0]):
            self.add(node, "KW002", f"imports {target}: {priv} is private to {unit(priv, self.scope)}")
        mine, theirs = layer_index(self.module, self.layers), layer_index(target, self.layers)
        if mine is not None and theirs is not None and theirs < mine:
            self.add(node, "KW005", f"imports {target} (a higher layer) at run time")


class ImportEdges(ast.NodeVisitor):
    """The kwire_cli modules one module imports, anywhere in it."""

    def __init__(self, module: str, is_package: bool, modules: set[str]) -> None:
        self.module, self.is_package, self.modules = module, is_package, modules
        self.edges: dict[str, int] = {}  # target module -> first line

    def add(self, target: str, line: int) -> None:
        while target and target not in self.modules:
            target = target.rpartition(".")[0]
        if target and target != self.module and not (self.is_package and target.startswith(self.module + ".")):
            self.edges.setdefault(target, line)

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            if a.name.split(".")[0] == PACKAGE:
                self.add(a.name, node.lineno)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        target = resolve_relative(self.module, self.is_package, node.level, node.module) if node.level \
            else node.module or ""
        if target.split(".")[0] != PACKAGE:
            return
        for a in node.names:
            full = f"{target}.{a.name}"
            self.add(full if full in self.modules else target, node.lineno)


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on.add(start)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, {})))))
                elif nxt in on:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    m = stack.pop()
                    on.discard(m)
                    comp.append(m)
                    if m == node:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def cycle_findings(trees: dict[Path, ast.Module], root: Path) -> list[Finding]:
    names = {module_name(p, root): p for p in trees}
    graph: dict[str, dict[str, int]] = {}
    for module, path in names.items():
        v = ImportEdges(module, path.name == "__init__.py", set(names))
        v.visit(trees[path])
        graph[module] = v.edges
    findings = []
    for comp in cycles(graph):
        first = comp[0]
        inside = [t for t in graph[first] if t in comp]
        line = graph[first][inside[0]] if inside else 0
        findings.append(Finding(str(names[first].relative_to(root)), line, "KW006",
                                "import cycle: " + " <-> ".join(comp)))
    return findings


def python_files(root: Path) -> Iterator[Path]:
    yield from sorted((root / PACKAGE).rglob("*.py"))


def check(scope: str = "package", root: Path = ROOT) -> list[Finding]:
    """Every finding in the kwire_cli package under `root` (layers from root/pyproject.toml)."""
    trees = {}
    for path in python_files(root):
        trees[path] = ast.parse(path.read_text(), str(path))
    defined: dict[str, set[str]] = {}  # package -> private member names its classes define
    for path, tree in trees.items():
        v = PrivateDefinitions()
        v.visit(tree)
        defined.setdefault(unit(module_name(path, root), "package"), set()).update(v.names)
    layers = read_layers(root)
    findings: list[Finding] = []
    for path, tree in trees.items():
        module = module_name(path, root)
        here = unit(module, "package")
        foreign: dict[str, set[str]] = {}
        for pkg, names in defined.items():
            if pkg != here:
                for n in names:
                    foreign.setdefault(n, set()).add(pkg)
        c = Checker(str(path.relative_to(root)), module, path.name == "__init__.py", scope, layers,
                    defined.get(here, set()), foreign)
        c.visit(tree)
        findings.extend(c.findings)
    findings.extend(cycle_findings(trees, root))
    return findings


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scope", choices=("package", "module"), default="package",
                    help="what a private name is private to (default: its package)")
    args = ap.parse_args(argv)
    findings = check(args.scope)
    for f in findings:
        print(f)
    if findings:
        print(f"check_imports: {len(findings)} finding(s)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
