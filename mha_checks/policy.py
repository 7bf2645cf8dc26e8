"""PLACEHOLDER until the checks branch lands."""
import ast


def violations(source: str, function=None) -> list[str]:
    out = []
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return out
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and node.attr != "__init__":
            out.append(f"line {node.lineno}: {node.attr} is private")
        if isinstance(node, ast.Import | ast.ImportFrom):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if any(m.split(".")[0] in {"mha_lib", "mha_checks", "mha_grader", "os", "sys"} for m in mods):
                out.append(f"line {node.lineno}: import of {mods[0]} is not allowed")
    return out
