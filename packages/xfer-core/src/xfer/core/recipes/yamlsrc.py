"""YAML with positions: every value remembers the file, line and column it came from.

Recipes must report problems as `file:line:col: message`, including problems found long after
parsing (a wrong type three levels down, a typo in an included file, a command-line override).
So instead of `yaml.safe_load` we compose the YAML node graph with PyYAML's *safe* loader and
convert it into `Node`s that carry a `Location`. Only the standard YAML tags are accepted:
`!!python/object` and every other application tag are refused with their position, so no YAML
can ever construct Python objects. Aliases are expanded; an anchor used inside its own value,
and a document that expands to more than `MAX_VALUES` values, are refused the same way.

Problems that leave a well-defined tree behind — a duplicate key (the first is kept), a `<<` merge
of something that is not a mapping or a second `<<` key in one mapping (both ignored) — can be
collected in a `deferred` list instead of raised, so the recipe's other problems are reported
with them rather than hidden behind them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from xfer.core.errors import Diagnostic, Location, RecipeError

_TIMESTAMP = "tag:yaml.org,2002:timestamp"
_VALUE = "tag:yaml.org,2002:value"  # YAML 1.1 reads a plain `=` so, and PyYAML cannot construct it
_STD_TAGS = {
    "tag:yaml.org,2002:str",
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:null",
    "tag:yaml.org,2002:map",
    "tag:yaml.org,2002:seq",
    _TIMESTAMP,
    _VALUE,
    "tag:yaml.org,2002:merge",
}


@dataclass
class Node:
    """A YAML value with the location of the value and (for mapping entries) of its key.

    `value` is a `dict[str, Node]` for mappings, `list[Node]` for sequences, else a scalar.
    `origin` says where the value came from for `xfer show` (a file position or an override).
    """

    value: Any
    loc: Location
    key_loc: Location | None = None
    origin: str = ""
    created_by_override: bool = False
    # A scalar written in quotes ('600', "3e-4") or as a block: the author meant a string, so the schema
    # does not read it as a number (only plain YAML 1.1 scalars like `1e4` get that leniency).
    quoted: bool = False
    # A mapping's keys that came from a `<<:` merge, not written in the mapping itself.
    merged_keys: frozenset[str] = frozenset()
    # A plain scalar as written, when YAML 1.1 reads it as a boolean or null (`no`, `on`, `~`): an
    # error can then say why `target_lang: no` is "false".
    text: str = ""
    # A mapping that overrides created (no file wrote it): where the nearest enclosing value a file
    # wrote is. A problem of the whole mapping (a check between its keys) is reported there when several
    # overrides filled it, rather than at the first of them, which may have nothing to do with it.
    written_parent: Location | None = None

    @property
    def is_map(self) -> bool:
        return isinstance(self.value, dict)

    @property
    def is_seq(self) -> bool:
        return isinstance(self.value, list)

    def get(self, key: str) -> Node | None:
        return self.value.get(key) if self.is_map else None

    def to_python(self) -> Any:
        """Plain Python value (dicts, lists, scalars) without locations."""
        if self.is_map:
            return {k: v.to_python() for k, v in self.value.items()}
        if self.is_seq:
            return [v.to_python() for v in self.value]
        return self.value

    def where(self) -> Location:
        """Best location to report a problem with this value's key (falls back to the value)."""
        return self.key_loc or self.loc


def _non_decimal_number(node: yaml.Node) -> str | None:
    """The kind of YAML 1.1 number `node` is when it is not written in decimal, else None.

    YAML 1.1 reads `1:30` as 90 (base 60), `010` as 8 (octal), `0x10` as 16: a batch size of
    `1:30` or a seed of `010` would silently become another number.
    """
    if node.tag not in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float") or not isinstance(node.value, str):
        return None
    text = node.value.lstrip("+-").replace("_", "").lower()
    if ":" in text:
        return "base-60 number"
    if text.startswith("0x"):
        return "hexadecimal integer"
    if text.startswith("0b"):
        return "binary integer"
    if node.tag.endswith(":int") and len(text) > 1 and text.startswith("0"):
        return "octal integer"
    return None


# What YAML writes as an int or a float, in ASCII (YAML 1.1's non-decimal forms included: the check above
# names them). PyYAML reads an explicitly tagged scalar with Python's int()/float(), which take more:
# `lr: !!float 1e-3_0` (the usual way to make PyYAML read `1e-3`) was 1e-30, `!!int ١٠` 10, `!!float infinity` inf.
_NUMBER_TEXT = {
    "tag:yaml.org,2002:int": re.compile(
        r"[-+]?(?:[0-9][0-9_]*|0b[01_]+|0x[0-9a-fA-F_]+|[1-9][0-9_]*(?::[0-5]?[0-9])+)", re.ASCII
    ),
    "tag:yaml.org,2002:float": re.compile(
        r"[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)"
        r"|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*",
        re.ASCII,
    ),
    # PyYAML's null ignores the text: `task: !!null 'toy/agreement'` was null, the key's default, silently
    "tag:yaml.org,2002:null": re.compile(r"|~|null|Null|NULL"),
}


def _loc(file: str, mark: yaml.Mark | None) -> Location:
    if mark is None:
        return Location(file)
    return Location(file, mark.line + 1, mark.column + 1)


MAX_VALUES = 100_000
"""More values than this in one YAML document (counting every use of an alias in full) is refused:
a few lines of aliases nested in aliases ("billion laughs") would otherwise expand until memory
runs out. Real recipes hold a few hundred."""


MAX_DEPTH = 50
"""Lists and mappings nested deeper than this (aliases included) are refused: real recipes nest about
six levels, and parsing and validation recurse once per level."""


class _Converter:
    def __init__(self, file: str):
        self.file = file
        self.diagnostics: list[Diagnostic] = []
        # problems whose node tree is still well defined (the offending entry is left out): the
        # recipe validation can go on and report the file's other problems with them
        self.deferred: list[Diagnostic] = []
        self.constructor = yaml.constructor.SafeConstructor()
        self.inside: set[int] = set()  # the collections being converted: an alias to one is a cycle
        self.values = 0

    def error(self, mark: yaml.Mark | None, message: str, *, deferrable: bool = False) -> None:
        (self.deferred if deferrable else self.diagnostics).append(Diagnostic(_loc(self.file, mark), message))

    def convert(self, node: yaml.Node) -> Node:
        loc = _loc(self.file, node.start_mark)
        self.values += 1
        if self.values > MAX_VALUES:
            raise RecipeError(
                [Diagnostic(loc, f"the document expands to more than {MAX_VALUES} values (aliases nested in aliases?)")]
            )
        if node.tag not in _STD_TAGS:
            self.error(node.start_mark, f"unsupported YAML tag {node.tag!r}: recipes may only use plain YAML values")
            return Node(None, loc, origin=str(loc))
        if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)):
            written = "tag:yaml.org,2002:map" if isinstance(node, yaml.MappingNode) else "tag:yaml.org,2002:seq"
            if node.tag != written:  # `!!str {a: 1}` was the mapping, `!!int [1]` the list: the tag ignored silently
                what = "a mapping" if isinstance(node, yaml.MappingNode) else "a list"
                tag = node.tag.rsplit(":", 1)[-1]
                self.error(node.start_mark, f"invalid value: {what} cannot be read as !!{tag}")
                return Node(None, loc, origin=str(loc))
            if id(node) in self.inside:
                self.error(node.start_mark, "recursive YAML alias: this anchor is used inside its own value")
                return Node(None, loc, origin=str(loc))
            if len(self.inside) >= MAX_DEPTH:  # only aliases get here: the text itself was checked
                raise RecipeError(
                    [Diagnostic(loc, f"nested more than {MAX_DEPTH} levels deep (aliases inside aliases?)")]
                )
            self.inside.add(id(node))
            try:
                if isinstance(node, yaml.MappingNode):
                    return self._mapping(node, loc)
                return Node([self.convert(item) for item in node.value], loc, origin=str(loc))
            finally:
                self.inside.discard(id(node))
        if node.tag in (_TIMESTAMP, _VALUE):
            # The text as written: a date is never a setting, and constructing it reformats a path or a
            # description (`2001-12-14t21:59:43.10-05:00`) or crashes on `2020-13-01` (ValueError); `=`
            # is text, not the "unsupported YAML tag" PyYAML makes of it.
            value = node.value
        else:
            try:
                number_text = _NUMBER_TEXT.get(node.tag)
                if number_text is not None and not number_text.fullmatch(node.value):
                    raise ValueError(node.value)
                value = self.constructor.construct_object(node, deep=True)
            except (yaml.YAMLError, ValueError, KeyError):  # an explicit tag on text it cannot read: `!!int abc`
                tag = node.tag.rsplit(":", 1)[-1]
                self.error(node.start_mark, f"invalid value: {node.value!r} cannot be read as !!{tag}")
                return Node(None, loc, origin=str(loc))
        quoted = isinstance(node, yaml.ScalarNode) and node.style is not None  # quotes or | >
        # Quoted text is a number only under an explicit tag, which reads it the same way: `seed: !!int '010'`
        # was 8 and `!!int '0x10'` 16, silently (a quoted scalar without a tag is a string, never checked here).
        surprise = _non_decimal_number(node)
        if surprise is not None:
            self.error(
                node.start_mark,
                f"{node.value!r} reads as a YAML 1.1 {surprise} ({value!r}); write the number in decimal, "
                + ("or drop the tag if it is text" if quoted else "or quote it if it is text"),
            )
        text = node.value if not quoted and (value is None or isinstance(value, bool)) else ""
        return Node(value, loc, origin=str(loc), quoted=quoted, text=text)

    def _mapping(self, node: yaml.MappingNode, loc: Location) -> Node:
        result: dict[str, Node] = {}
        merged: dict[str, Node] = {}
        merge_line: int | None = None
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                if merge_line is not None:  # PyYAML keeps one of the two silently
                    self.error(
                        key_node.start_mark,
                        f"a second '<<' merge key in this mapping (the first is at line {merge_line}); "
                        "merge several mappings with one key: `<<: [*a, *b]`",
                        deferrable=True,
                    )
                    continue
                merge_line = key_node.start_mark.line + 1
                source = self.convert(value_node)
                for part in source.value if source.is_seq else [source]:
                    if part.is_map:
                        for k, v in part.value.items():
                            merged.setdefault(k, v)
                    else:
                        self.error(
                            value_node.start_mark,
                            f"a '<<' merge needs a mapping or a list of mappings, got {_describe(part.value)}",
                            deferrable=True,
                        )
                continue
            if not isinstance(key_node, yaml.ScalarNode):
                self.error(key_node.start_mark, "mapping keys must be plain strings")
                continue
            if key_node.tag not in _STD_TAGS:
                self.error(key_node.start_mark, f"unsupported YAML tag {key_node.tag!r} on a key: keys are plain names")
                continue
            # Keys are names, taken as written: YAML 1.1 would make the stage `on:` the key 'True',
            # `null:` 'None', `010:` '8' (and a key `2020-13-01:` a crash).
            key = key_node.value
            if key in result:
                self.error(
                    key_node.start_mark,
                    f"duplicate key {key!r} (first at line {result[key].key_loc.line})",
                    deferrable=True,
                )
                continue
            child = self.convert(value_node)
            child.key_loc = _loc(self.file, key_node.start_mark)
            result[key] = child
        for k, v in merged.items():
            result.setdefault(k, v)
        inherited = frozenset(k for k in merged if result[k] is merged[k])
        return Node(result, loc, origin=str(loc), merged_keys=inherited)


def _describe(value: Any) -> str:
    return "null" if value is None else "a list" if isinstance(value, list) else f"{type(value).__name__} {value!r}"


def _check_depth(text: str, file: str) -> None:
    """Refuse nesting deeper than `MAX_DEPTH` before composing: PyYAML's composer (and everything
    after it) recurses once per level, so a few hundred `[` or indented keys crashed with RecursionError.
    The parser's events come without recursion."""
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise RecipeError(
                    [Diagnostic(_loc(file, event.start_mark), f"nested more than {MAX_DEPTH} levels deep")]
                )
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


_FILE_ALIAS_HINT = " (an anchor must come before its alias in the same file; anchors do not cross includes)"
_OVERRIDE_ALIAS_HINT = (
    " (an override's value is YAML of its own: it cannot use the recipe's anchors; write the value itself)"
)


def parse_text(text: str, file: str, deferred: list[Diagnostic] | None = None) -> Node:
    """Parse one YAML document; raises RecipeError with positions on any syntax or tag problem.

    `deferred`: where problems that leave a well-defined tree (duplicate keys, bad `<<` merges)
    go instead of being raised, so that validation goes on and reports them with the rest.
    """
    try:
        _check_depth(text, file)
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or str(exc)
        if problem.startswith("but ") and exc.context:  # "but found another document": say what was expected
            problem = f"{exc.context}, {problem}"
        elif exc.context and exc.context_mark is not None and exc.problem_mark is not None:
            # "second occurrence" alone says nothing: (found duplicate anchor 'a'; first occurrence at line 2)
            problem = f"{problem} ({exc.context} at line {exc.context_mark.line + 1})"
        if problem.startswith("found undefined alias"):  # e.g. an anchor written in an included file
            problem += _FILE_ALIAS_HINT
        if "'\\t'" in problem:  # PyYAML takes no tab where a token could start, though YAML allows some
            problem += " (use spaces, not tabs)"
        raise RecipeError([Diagnostic(_loc(file, mark), f"YAML syntax error: {problem}")]) from None
    except yaml.reader.ReaderError as exc:  # a control character: PyYAML gives an offset, not a line
        before = text[: exc.position]
        where = Location(file, before.count("\n") + 1, exc.position - before.rfind("\n"))
        code = ord(exc.character) if isinstance(exc.character, str) else exc.character
        message = f"YAML error: character U+{code:04X} is not allowed (a control or special character)"
        raise RecipeError([Diagnostic(where, message)]) from None
    except yaml.YAMLError as exc:
        raise RecipeError([Diagnostic(Location(file), f"YAML error: {exc}")]) from None
    if root is None:
        return Node({}, Location(file, 1, 1), origin=f"{file}:1:1")
    converter = _Converter(file)
    node = converter.convert(root)
    if converter.diagnostics or (converter.deferred and deferred is None):
        raise RecipeError(converter.diagnostics + converter.deferred)
    if deferred is not None:
        deferred += converter.deferred
    return node


def parse_file(path: Path, deferred: list[Diagnostic] | None = None) -> Node:
    """Parse a YAML file; unreadable files and bad encodings are reported like syntax errors."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RecipeError([Diagnostic(Location(str(path)), "file not found")]) from None
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[: exc.start].count(b"\n") + 1
        raise RecipeError([Diagnostic(Location(str(path), line), "file is not valid UTF-8")]) from None
    except OSError as exc:
        raise RecipeError([Diagnostic(Location(str(path)), f"cannot read file: {exc.strerror}")]) from None
    return parse_text(text, str(path), deferred)


def deep_merge(base: Node, top: Node) -> Node:
    """Mapping merge for `include:`: values in `top` win; nested mappings merge key by key."""
    if not (base.is_map and top.is_map):
        return top
    merged = dict(base.value)
    for key, value in top.value.items():
        merged[key] = deep_merge(merged[key], value) if key in merged else value
    # Which keys came from a `<<:` merge, on either side: dropping it let `{<<: *fast, epochs: 3}` keep
    # the merged `steps` silently once an included file also set that section.
    inherited = top.merged_keys | {k for k in base.merged_keys if k not in top.value}
    return Node(merged, top.loc, top.key_loc, top.origin, merged_keys=frozenset(inherited))


def parse_override(text: str, index: int) -> tuple[list[str], Node]:
    """`stages.x.lr=3e-4` -> (["stages", "x", "lr"], Node(3e-4)); the value is parsed as YAML."""
    file = f"<override {index}: {text}>"
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise RecipeError([Diagnostic(Location(file, 1, 1), "an override must look like 'path.to.key=value'")])
    path = key.strip().split(".")
    if any(not part for part in path):
        raise RecipeError([Diagnostic(Location(file, 1, 1), f"empty path segment in {key!r}")])
    if len(path) > MAX_DEPTH:  # a file's limit: a path of 1200 keys made mappings so deep validation hit RecursionError
        message = f"the key path has {len(path)} parts: nested more than {MAX_DEPTH} levels deep"
        raise RecipeError([Diagnostic(Location(file, 1, 1), message)])
    if bracket := _BRACKET_INDEX.search(key):  # `tasks[0].name`: other tools' spelling of a list item
        dotted = _BRACKET_INDEX.sub(lambda m: f".{m.group(1)}", key.strip())
        message = f"list items are addressed by a dotted index: {dotted!r}, not {key.strip()!r}"
        raise RecipeError([Diagnostic(Location(file, 1, bracket.start() + 1), message)])
    shift = len(key) + 1

    def moved(loc: Location) -> Location:
        """A position in the value as a position in the whole override text (its first line follows `key=`)."""
        return Location(file, loc.line, loc.col + shift if loc.line == 1 and loc.col else loc.col)

    source = raw if raw.strip() else "''"
    try:
        value = parse_text(source, file)
    except RecipeError as exc:  # a syntax error, a bad tag or a duplicate key: point into the override
        # `x=*fast` names an anchor of the recipe: the hint for files ("in the same file") sent users looking there
        diagnostics = [
            Diagnostic(moved(d.location), d.message.replace(_FILE_ALIAS_HINT, _OVERRIDE_ALIAS_HINT))
            for d in exc.diagnostics
        ]
        raise RecipeError(diagnostics) from None
    root = yaml.compose(source, Loader=yaml.SafeLoader)  # parses: parse_text did
    end = root.end_mark.index if root is not None else 0
    if "#" in source[end:]:  # `description=run #2` would silently be "run": YAML drops comments
        at = end + source[end:].index("#")
        before = source[:at]
        where = moved(Location(file, before.count("\n") + 1, at - before.rfind("\n")))
        message = "the value holds a YAML comment (from '#' on, it would be dropped): quote the value, or leave it out"
        raise RecipeError([Diagnostic(where, message)])

    def relocate(node: Node) -> None:
        node.loc = moved(node.loc)
        node.origin = f"override {text!r}"
        if node.key_loc:
            node.key_loc = moved(node.key_loc)
        for child in node.value.values() if node.is_map else node.value if node.is_seq else ():
            relocate(child)

    relocate(value)
    return path, value


_LIST_INDEX = re.compile(r"(0|[1-9][0-9]*)\Z")
_BRACKET_INDEX = re.compile(r"\[\s*(-?[0-9]+)\s*\]")


def apply_override(root: Node, path: list[str], value: Node, text: str, index: int) -> list[Diagnostic]:
    """Set `path` in the node tree; missing mapping keys are created (the schema then checks them)."""
    file = f"<override {index}: {text}>"
    node = root
    written_parent = root.loc  # the nearest value on the path that a file wrote
    for depth, part in enumerate(path):
        last = depth == len(path) - 1
        where = Location(file, 1, 1 + sum(len(p) + 1 for p in path[:depth]))
        if node.is_seq:
            # ASCII decimals only: `²` passed isdigit() and crashed int(); `00` set item 0 a second time silently
            if not _LIST_INDEX.match(part) or int(part) >= len(node.value):
                return [
                    Diagnostic(
                        where,
                        f"{'.'.join(path[: depth + 1])!r}: no list item {part!r} (list has {len(node.value)} items)",
                    )
                ]
            if last:
                value.key_loc = where
                node.value[int(part)] = value
                return []
            node = node.value[int(part)]
            if not node.origin.startswith("override "):
                written_parent = node.where()
            continue
        if not node.is_map:
            prefix = ".".join(path[:depth])
            # `task.train_size=3` where the file has `task: toy/agreement`: say how to write both
            hint = (
                f"; to give it keys, replace the whole value: `{prefix}={{name: {node.value}, {part}: ...}}`"
                if isinstance(node.value, str) and last
                else ""
            )
            return [Diagnostic(where, f"{prefix!r} is a single value, it has no key {part!r}{hint}")]
        if last:
            value.key_loc = where
            value.created_by_override = part not in node.value
            node.value[part] = value
            # no longer the `<<:` merge's: `{<<: *t, epochs: 3}` with `train.steps=9` was refused as the merged steps
            node.merged_keys = node.merged_keys - {part}
            return []
        if part not in node.value or node.value[part].value is None:  # `objective: null` holds no keys yet
            written = part in node.value
            if written and not node.value[part].origin.startswith("override "):  # the file's `objective: null`
                written_parent = node.value[part].where()
            node.value[part] = Node(
                {},
                where,
                where,
                origin=f"override {text!r}",
                created_by_override=not written,
                written_parent=written_parent,
            )
        node = node.value[part]
        if not node.origin.startswith("override "):
            written_parent = node.where()
    return []
