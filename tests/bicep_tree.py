"""Reading the Azure deployment (bicep/) for the tests: pycep's tree (the parser Checkov
uses), a few accessors, and a small evaluator for the Bicep expressions the checks need (the
cloud-init the Linux agent pool renders). Never touches the network or Azure."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

from pycep import BicepParser

ROOT = Path(__file__).resolve().parent.parent
BICEP = ROOT / "bicep"
MODULES = BICEP / "modules"
DEPLOY_DOC = ROOT / "docs" / "deploy.md"
BICEP_FILES = sorted(BICEP.rglob("*.bicep"))
Node = Any  # pycep's JSON-like tree
SECRETISH = re.compile(r"password|secret", re.IGNORECASE)


@cache
def _parser() -> BicepParser:
    """One parser for every file (it keeps no state between files; building its grammar
    costs about 60 ms, 18 times over in the unit lane)."""
    return BicepParser()


@cache
def parse(path: Path) -> dict[str, Any]:
    tree: dict[str, Any] = dict(_parser().parse(file_path=path))
    return tree


def module(name: str) -> dict[str, Any]:
    return parse(MODULES / f"{name}.bicep")


def body(resource: dict[str, Any]) -> dict[str, Any]:
    """A resource's or module's declaration, looped, conditional or neither."""
    config: dict[str, Any] = resource["config"]
    looped_or_conditional = "loop_type" in config or set(config) == {"condition", "config"}
    return config["config"] if looped_or_conditional else config


def resources_of_type(tree: dict[str, Any], rtype: str) -> dict[str, dict[str, Any]]:
    return {n: r for n, r in tree["resources"].items() if r["type"] == rtype}


def walk(node: Node) -> Iterator[Node]:
    yield node
    if isinstance(node, dict):
        for v in node.values():
            yield from walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from walk(v)


# ---- a small evaluator for the Bicep expressions the tests need ---------------------------
# pycep keeps an identifier (a parameter, variable or loop variable) as a bare string, the
# same as a string literal; a string naming a known identifier is taken as a reference.
# String literals keep Bicep's escapes (\n, \\, \', \$, \u{...}) and their interpolations
# as text: both are resolved here; an interpolation may be a name with .property and [index]
# accessors (the templates keep function calls out of interpolations for that reason).
ACCESSOR = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*|\[[A-Za-z0-9_.]+\])*"
IN_STRING = re.compile(r"\\(u\{[0-9A-Fa-f]+\}|.)|\$\{(" + ACCESSOR + r")\}")
ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", "'": "'", "$": "$"}
FORMAT_ITEM = re.compile(r"\{(\d+)\}")


def _lookup(expr: str, env: dict[str, Any]) -> Any:
    steps = re.findall(r"\.?([A-Za-z_][A-Za-z0-9_]*)|\[([A-Za-z0-9_.]+)\]", expr)
    value = env[steps[0][0]]
    for name, index in steps[1:]:
        if name:
            value = value[name]
        else:
            value = value[int(index) if index.isdigit() else _lookup(index, env)]
    return value


def _to_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def _string(literal: str, env: dict[str, Any]) -> str:
    def one(m: re.Match[str]) -> str:
        escape = m.group(1)
        if escape is None:
            return _to_text(_lookup(m.group(2), env))
        return chr(int(escape[2:-1], 16)) if escape.startswith("u{") else ESCAPES[escape]

    return IN_STRING.sub(one, literal)


def evaluate(node: Node, env: dict[str, Any], base: Path) -> Any:
    if node is None or isinstance(node, bool | int | float):
        return node
    if isinstance(node, str):
        return env[node] if node in env else _string(node, env)
    if isinstance(node, list):
        return [evaluate(v, env, base) for v in node]
    if "loop_type" in node:
        detail = node["loop_type"]["detail"]
        items = evaluate(detail["array_name"], env, base)
        out = []
        for i, item in enumerate(items):
            scope = {**env, detail["item_name"]: item}
            if "index_name" in detail:
                scope[detail["index_name"]] = i
            out.append(evaluate(node["config"], scope, base))
        return out
    if set(node) == {"operator"}:
        op, operands = node["operator"]["type"], node["operator"]["operands"]
        if op == "property_accessor":
            target = evaluate(operands["operand_1"], env, base)
            return target[operands["operand_2"]]
        if op == "index_accessor":
            target = evaluate(operands["operand_1"], env, base)
            return target[evaluate(operands["operand_2"], env, base)]
        if op == "conditional":
            taken = "true_value" if evaluate(operands["condition"], env, base) else "false_value"
            return evaluate(operands[taken], env, base)
        if op == "and":
            return all(evaluate(operands[k], env, base) for k in ("operand_1", "operand_2"))
        raise NotImplementedError(op)
    if set(node) == {"function"}:
        fn = node["function"]["type"]
        args = {k: v for k, v in node["function"]["parameters"].items() if v is not None}
        if fn == "load_text_content":
            return (base / args["file_path"]).read_text()
        values = [evaluate(v, env, base) for v in args.values()]
        if fn == "replace":
            return values[0].replace(values[1], values[2])
        if fn == "string":
            return _to_text(values[0])
        if fn == "json":
            return json.loads(values[0])
        if fn == "join":
            return values[1].join(values[0])
        if fn == "union":
            merged: dict[str, Any] = {}
            for v in values:
                merged.update(v)
            return merged
        if fn == "concat":
            if all(isinstance(v, str) for v in values):
                return "".join(values)
            return [x for v in values for x in v]
        if fn == "format":
            return FORMAT_ITEM.sub(lambda m: _to_text(values[1 + int(m.group(1))]), values[0])
        if fn == "base64":
            return base64.b64encode(values[0].encode()).decode()
        if fn == "contains":
            return values[1] in values[0]
        raise NotImplementedError(fn)
    return {k: evaluate(v, env, base) for k, v in node.items()}


def evaluate_variables(tree: dict[str, Any], params: dict[str, Any], base: Path) -> dict[str, Any]:
    """Every variable of a file, in declaration order (Bicep files here declare before use)."""
    env = dict(params)
    for name, var in tree["variables"].items():
        env[name] = evaluate(var["value"], env, base)
    return env


def app_settings() -> dict[str, Node]:
    app = module("functionapp")["resources"]["app"]
    settings = body(app)["properties"]["siteConfig"]["appSettings"]
    return {s["name"]: s["value"] for s in settings}


def the(tree: dict[str, Any], rtype: str) -> dict[str, Any]:
    (resource,) = resources_of_type(tree, rtype).values()
    return body(resource)


def main_module_params(name: str) -> dict[str, Node]:
    params: dict[str, Node] = body(parse(BICEP / "main.bicep")["modules"][name])["params"]
    return params


SAMPLE_MOUNTS: list[dict[str, Any]] = [
    {
        "alias": "vol1",
        "kind": "nfs",
        "source": "10.0.0.4:/vol1",
        "nfs_version": "3",
        "nconnect": 8,
        "rsize": 262144,
        "wsize": 262144,
    },
    {
        "alias": "share1",
        "kind": "smb",
        "source": "//benchfiles.file.core.windows.net/share1",
        "smb_secret_name": "smb-share1",
    },
    {"alias": "anf-v41", "kind": "nfs", "source": "10.0.0.5:/vol2", "nfs_version": "4.1"},
]
SAMPLE_PARAMS: dict[str, Any] = {
    "poolName": "anf",
    "apiUrl": "https://func-bench-abc.azurewebsites.net",
    "queueUri": "https://stbenchabc.queue.core.windows.net/",
    "apiScope": "api://11111111-2222-3333-4444-555555555555/.default",
    "agentIdentityClientId": "66666666-7777-8888-9999-000000000000",
    "agentPackageUrl": "https://example.invalid/dist/benchsvc-0.1.0-py3-none-any.whl",
    "agentKeyVaultUri": "https://kv-agt-abc.vault.azure.net/",
    "mounts": SAMPLE_MOUNTS,
}


def render_cloud_init(mounts: list[dict[str, Any]]) -> str:
    tree = module("agentpool-linux")
    env = evaluate_variables(tree, {**SAMPLE_PARAMS, "mounts": mounts}, MODULES)
    text: str = env["cloudInit"]
    return text


def main() -> dict[str, Any]:
    """main.bicep's tree."""
    return parse(BICEP / "main.bicep")
