"""Reading the student's cells before any of them runs, in the grader's own process.

The grading kernel is the student's: whatever runs there can be changed by the code
the student wrote. So the grader also reads that code, outside the kernel's reach,
for every way Python offers to reach the grader's objects or change what a checker
relies on: the interpreter's hooks (``sys.settrace``, ``sys.monitoring``,
``jax.monitoring``), the module table, the garbage collector and frames, dynamic code
(``eval``, ``exec``, ``__import__``, ``getattr`` with a computed name), and
assignments to an imported module's names (``np.allclose = ...``). A row whose
cells do any of it is flagged and never passes.
"""

import ast

# Modules no exercise needs and every reach into the grader's memory goes through.
MODULES = {
    "gc": "the garbage collector",
    "ctypes": "raw memory",
    "inspect": "frames and source",
    "importlib": "the import system",
    "builtins": "the builtins",
    "sys": "the interpreter",
    "threading": "threads",
    "multiprocessing": "other processes",
    "signal": "signal handlers",
    "atexit": "exit hooks",
    "jax.monitoring": "JAX's compile events",
    "jax._src": "JAX's internals",
    "jitbook.exercises": "the checkers",
    "jitbook.classroom": "the grader",
    "_jitbook_grader": "the grader",
    "IPython": "the kernel's shell",
    "ipykernel": "the kernel",
    "jupyter_client": "the kernel's messaging",
    "zmq": "the kernel's messaging",
}
# sys's names an honest answer may use.
SYS_OK = {
    "stdout",
    "stderr",
    "version",
    "version_info",
    "float_info",
    "maxsize",
    "platform",
    "getsizeof",
    "getrecursionlimit",
    "setrecursionlimit",
}
NAMES = {
    "eval": "runs code from a string",
    "exec": "runs code from a string",
    "compile": "compiles code from a string",
    "__import__": "imports by a computed name",
    "globals": "reaches the module's globals",
    "breakpoint": "starts a debugger",
    "__builtins__": "reaches the builtins",
    "_REGISTRY": "reaches the checkers' registry",
    "GRADER": "reaches the grader",
    "_jitbook_grader": "reaches the grader",
    "get_ipython": "reaches the kernel's shell and its hooks",
}
ATTRIBUTES = {
    "settrace": "sets a trace hook",
    "setprofile": "sets a profile hook",
    "monitoring": "uses sys.monitoring or jax.monitoring",
    "modules": "reaches the module table",
    "meta_path": "changes the import system",
    "path_hooks": "changes the import system",
    "_getframe": "reads frames",
    "f_back": "reads frames",
    "f_locals": "reads frames",
    "f_globals": "reads frames",
    "tb_frame": "reads frames",
    "gi_frame": "reads frames",
    "cr_frame": "reads frames",
    "__globals__": "reaches a function's globals",
    "__code__": "reaches a function's code",
    "__closure__": "reaches a function's closure",
    "__subclasses__": "walks the class tree",
    "__dict__": "reaches an object's namespace",
    "__builtins__": "reaches the builtins",
    "_REGISTRY": "reaches the checkers' registry",
    "GRADER": "reaches the grader",
    "addaudithook": "sets an audit hook",
    "get_referrers": "walks the garbage collector",
    "get_objects": "walks the garbage collector",
}
DYNAMIC = {"getattr", "setattr", "delattr", "vars"}


def _imported(tree: ast.AST) -> dict[str, str]:
    """Local name -> module for every ``import`` and ``from ... import`` of a cell."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                names[(a.asname or a.name).split(".")[0]] = (
                    a.name if a.asname else a.name.split(".")[0]
                )
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                names[a.asname or a.name] = f"{node.module}.{a.name}"
    return names


def _module_hit(module: str) -> str:
    for name, what in MODULES.items():
        if module == name or module.startswith(name + "."):
            return f"imports {module} ({what})"
    return ""


def _handout_import(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.ImportFrom)
        and node.module == "jitbook.exercises"
        and [(a.name, a.asname) for a in node.names] == [("check", None)]
    )


def _root(node: ast.AST) -> str | None:
    while isinstance(node, ast.Attribute | ast.Subscript):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def findings(source: str, modules: dict[str, str]) -> list[str]:
    """What a cell does that could change the grading, one phrase per finding (with
    its line); ``modules`` names the notebook's imported modules, local name first.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []  # it cannot run either
    found = []

    def note(node: ast.AST, text: str) -> None:
        found.append(f"{text} (line {getattr(node, 'lineno', '?')})")

    for node in ast.walk(tree):
        if _handout_import(node):
            continue  # `from jitbook.exercises import check`, as the set-up has it
        if isinstance(node, ast.Import | ast.ImportFrom):
            full = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            for module in [*full, *_imported(node).values()]:
                hit = _module_hit(module)
                if hit and module != "sys" and hit not in " ".join(found):
                    note(node, hit)
        elif isinstance(node, ast.Name) and node.id in NAMES:
            note(node, f"{NAMES[node.id]} ({node.id})")
        elif isinstance(node, ast.Attribute):
            if node.attr in ATTRIBUTES:
                note(node, f"{ATTRIBUTES[node.attr]} (.{node.attr})")
            elif getattr(node.value, "id", None) == "sys" and node.attr not in SYS_OK:
                note(node, f"uses sys.{node.attr}")
        elif isinstance(node, ast.Call) and getattr(node.func, "id", "") in DYNAMIC:
            name = node.args[1] if len(node.args) > 1 else None
            first = _root(node.args[0]) if node.args else None
            if node.func.id == "vars" or not isinstance(name, ast.Constant):
                note(node, f"uses {node.func.id} with a computed name")
            elif node.func.id != "getattr" and first in modules:
                note(node, f"changes {modules[first]}.{name.value}")
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete):
            targets = node.targets if hasattr(node, "targets") else [node.target]
            for target in targets:
                root = _root(target)
                if isinstance(target, ast.Attribute) and root in modules:
                    note(node, f"changes {ast.unparse(target)}")
    return found


def scan(sources: list[tuple[int, str]], handout_imports: str = "") -> list[str]:
    """Findings for the cells a student wrote or changed, ``(cell number, source)``,
    each naming its cell; ``handout_imports`` is the handed-out code whose imports
    count too (``import numpy as np`` in the set-up makes ``np`` a module).
    """
    modules = {}
    for text in [handout_imports, *(s for _, s in sources)]:
        try:
            modules.update(_imported(ast.parse(text)))
        except SyntaxError:
            continue
    return [
        f"cell {number}: {finding}"
        for number, source in sources
        for finding in findings(source, modules)
    ]
