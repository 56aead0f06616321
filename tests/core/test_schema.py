"""The typed recipe validator (xfer.core.recipes.schema) and located YAML (xfer.core.recipes.yamlsrc)."""

# no `from __future__ import annotations`: the validator reads real type objects via get_type_hints
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest

from xfer.core.config import ExistingPath, FieldError, Files, Input, KeysOf, knob
from xfer.core.errors import Location, RecipeError
from xfer.core.recipes.schema import INVALID, Validator
from xfer.core.recipes.yamlsrc import apply_override, deep_merge, parse_file, parse_override, parse_text
from xfer.core.train_config import TrainConfig

F = "cfg.yaml"


@dataclass
class Inner:
    lr: float = 1e-3
    epochs: int = 3
    name: str = "x"


@dataclass
class Ranged:
    low: int = 0
    high: int = 10

    def __post_init__(self) -> None:
        if self.low > self.high:
            raise ValueError(f"low {self.low} > high {self.high}")


@dataclass
class Outer:
    count: int
    inner: Inner = knob(Inner(epochs=5), "Nested settings; its default instance is the base.")
    ranged: Ranged = knob(Ranged(), "Cross-field check.")
    mode: Literal["fast", "slow"] = "fast"
    maybe: int | None = None
    every: int | Literal["epoch"] | None = "epoch"
    items: list[int] = knob([], "")
    pair: tuple[int, str] = (1, "a")
    table: dict[str, float] = knob({}, "")
    flag: bool = False
    where: Path | None = None
    existing: ExistingPath | None = None


def validate(
    text: str, cls: type = Outer, path: str = "cfg", file: str = F
) -> tuple[Any, list[tuple[int, int, str]], Validator]:
    validator = Validator()
    value = validator.dataclass(parse_text(text, file), cls, path)
    found = sorted((d.location.line, d.location.col, d.message) for d in validator.diagnostics)
    assert (value is INVALID) == bool(found), (value, found)
    return value, found, validator


# --- scalars -----------------------------------------------------------------------------------


def test_yaml_1_1_exponents() -> None:
    # YAML 1.1 reads 3e-4 and 1e4 as strings (no dot / no exponent sign); users write them anyway
    assert parse_text("lr: 3e-4", F).value["lr"].value == "3e-4"
    value, found, _ = validate("count: 1e4\ninner: {lr: 3e-4}\n")
    assert found == []
    assert value.count == 10000 and type(value.count) is int
    assert value.inner.lr == 3e-4 and type(value.inner.lr) is float
    value, _, _ = validate("count: 7\ninner: {lr: 2}\n")
    assert value.inner.lr == 2.0 and type(value.inner.lr) is float, "an int is a fine float"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("count: true", "cfg.count: expected an integer, got bool True"),
        ("count: 2.5", "cfg.count: expected an integer, got float 2.5"),
        ("count: 2.5e0", "cfg.count: expected an integer, got str '2.5e0'"),
        ("count: many", "cfg.count: expected an integer, got str 'many'"),
        ("count: [1]", "cfg.count: expected an integer, got a list"),
        ("count: 1\ninner: {lr: true}", "cfg.inner.lr: expected a number, got bool True"),
        ("count: 1\ninner: {lr: fast}", "cfg.inner.lr: expected a number, got str 'fast'"),
        ("count: 1\ninner: {name: 3}", "cfg.inner.name: expected a string, got int 3"),
        ("count: 1\nflag: 1", "cfg.flag: expected true or false, got int 1"),
        ("count: 1\ninner: 4", "cfg.inner: expected a mapping, got int 4"),
    ],
)
def test_wrong_scalar_types(text: str, message: str) -> None:
    _, found, _ = validate(text + "\n")
    assert [m for _, _, m in found] == [message]


@pytest.mark.parametrize("text", ["count: 1e100", "count: 9223372036854775808", "count: -9223372036854775809"])
def test_integers_beyond_64_bits_are_refused(text: str) -> None:
    """`steps: 1e100` was accepted: a run that could never end, and counters that overflow int64."""
    _, found, _ = validate(text + "\n")
    assert len(found) == 1 and found[0][2].startswith("cfg.count: must fit in 64 bits (below 2**63 in size), got ")


def test_the_largest_64_bit_integers_pass() -> None:
    for number in (2**63 - 1, -(2**63)):
        value, found, _ = validate(f"count: {number}\n")
        assert found == [] and value.count == number


def test_yaml_1_1_booleans() -> None:
    value, _, _ = validate("count: 1\nflag: yes\n")
    assert value.flag is True


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("count: 1:30", "base-60 number (90)"),
        ("count: 010", "octal integer (8)"),
        ("count: -0x10", "hexadecimal integer (-16)"),
        ("count: 0b11", "binary integer (3)"),
        ("count: 1\ninner: {lr: 1:30.5}", "base-60 number (90.5)"),
    ],
)
def test_non_decimal_yaml_1_1_numbers_are_refused(text: str, kind: str) -> None:
    """YAML 1.1 reads `batch_size: 1:30` as 90 and `seed: 010` as 8: refused, not another number."""
    with pytest.raises(RecipeError) as caught:
        parse_text(text + "\n", F)
    assert kind in str(caught.value) and "write the number in decimal" in str(caught.value)


def test_decimal_numbers_and_quoted_text_still_read() -> None:
    value, found, _ = validate("count: 1_000\ninner: {lr: -0.5, epochs: 0, name: '1:30'}\n")
    assert found == []
    assert (value.count, value.inner) == (1000, Inner(lr=-0.5, epochs=0, name="1:30"))


@pytest.mark.parametrize(
    "text", ["count: 1\ninner: {lr: .nan}", "count: 1\ninner: {lr: nan}", "count: 1\ntable: {a: .NaN}"]
)
def test_nan_is_refused_for_every_number_bounded_or_not(text: str) -> None:
    _, found, _ = validate(text + "\n")
    assert len(found) == 1 and "must be a finite number" in found[0][2], found


def test_literal_with_did_you_mean() -> None:
    _, found, _ = validate("count: 1\nmode: fsat\n")
    assert found == [(2, 7, "cfg.mode: str 'fsat' is not one of 'fast', 'slow'; did you mean 'fast'?")]
    _, found, _ = validate("count: 1\nmode: 3\n")
    assert found == [(2, 7, "cfg.mode: int 3 is not one of 'fast', 'slow'")]
    value, _, _ = validate("count: 1\nmode: slow\n")
    assert value.mode == "slow"


def test_optional_and_unions() -> None:
    value, _, _ = validate("count: 1\nmaybe: null\nevery: null\n")
    assert value.maybe is None and value.every is None
    value, _, _ = validate("count: 1\nmaybe: 4\nevery: 1e3\n")
    assert value.maybe == 4 and value.every == 1000
    value, _, _ = validate("count: 1\nevery: epoch\n")
    assert value.every == "epoch"
    _, found, _ = validate("count: 1\nmaybe: x\nevery: epochs\n")
    assert found == [
        (2, 8, "cfg.maybe: expected an integer, got str 'x'"),
        (3, 8, "cfg.every: expected an integer or one of 'epoch' or null, got str 'epochs'; did you mean 'epoch'?"),
    ]


# --- containers ---------------------------------------------------------------------------------


def test_list_items_have_their_own_locations() -> None:
    value, _, _ = validate("count: 1\nitems: [1, 2e1, 3]\n")
    assert value.items == [1, 20, 3]
    _, found, _ = validate("count: 1\nitems: [1, x, 3, y]\n")
    assert found == [
        (2, 12, "cfg.items.1: expected an integer, got str 'x'"),
        (2, 18, "cfg.items.3: expected an integer, got str 'y'"),
    ]
    _, found, _ = validate("count: 1\nitems: 5\n")
    assert found == [(2, 8, "cfg.items: expected a list of integers, got int 5")]


def test_tuple_items() -> None:
    value, _, _ = validate("count: 1\npair: [2, b]\n")
    assert value.pair == (2, "b")
    _, found, _ = validate("count: 1\npair:\n  - 2\n  - 3\n")
    assert found == [(4, 5, "cfg.pair.1: expected a string, got int 3")]
    _, found, _ = validate("count: 1\npair: [2]\n")
    assert found == [(2, 7, "cfg.pair: expected exactly 2 items, got 1")]


def test_dict_values() -> None:
    value, _, _ = validate("count: 1\ntable: {a: 1, b: 2.5}\n")
    assert value.table == {"a": 1.0, "b": 2.5}
    _, found, _ = validate("count: 1\ntable:\n  a: 1\n  b: no\n")  # YAML 1.1: `no` is false
    hint = "(YAML reads no as false: write 'no' in quotes if you mean the word)"
    assert found == [(4, 6, f"cfg.table.b: expected a number, got bool False {hint}")]


# --- dataclasses -------------------------------------------------------------------------------


def test_nested_default_instance_is_the_base() -> None:
    value, _, validator = validate("count: 1\ninner: {lr: 0.5}\n")
    assert value.inner == Inner(lr=0.5, epochs=5, name="x"), (
        "epochs comes from the field's default instance, not Inner()"
    )
    assert validator.provenance["cfg.inner.epochs"] == "default"
    assert validator.provenance["cfg.inner.lr"] == f"{F}:2:13"
    value, _, _ = validate("count: 1\n")
    assert value.inner == Inner(epochs=5)
    # the explicit `base` argument works the same way
    validator = Validator()
    result = validator.dataclass(parse_text("high: 50", F), Ranged, "r", base=Ranged(low=7, high=8))
    assert result == Ranged(low=7, high=50)


@dataclass
class Staged:
    train: TrainConfig = knob(TrainConfig(steps=1000, warmup_steps=100), "A stage whose default fixes steps.")


@pytest.mark.parametrize(
    ("text", "steps", "warmup_steps", "epochs"),
    [
        ("train: {lr: 0.5}", 1000, 100, 1.0),  # untouched: the default's steps and warmup
        ("train: {epochs: 3}", None, 100, 3.0),  # epochs alone: the default's steps would override it
        ("train: {epochs: 3, steps: 700}", 700, 100, 3.0),  # both given: steps wins, as documented
        ("train: {warmup_fraction: 0.1}", 1000, None, 1.0),
    ],
)
def test_a_key_given_alone_unsets_the_default_that_would_override_it(
    text: str, steps: int | None, warmup_steps: int | None, epochs: float
) -> None:
    value, found, validator = validate(text, Staged)
    assert found == []
    assert (value.train.steps, value.train.warmup_steps, value.train.epochs) == (steps, warmup_steps, epochs)
    if steps is None:
        assert validator.provenance["cfg.train.steps"] == "unset by epochs"


@dataclass
class TwoStaged:
    a: TrainConfig = knob(TrainConfig(steps=1000, warmup_steps=100), "")
    b: TrainConfig = knob(TrainConfig(steps=1000, warmup_steps=100), "")


def test_epochs_next_to_a_merged_steps_is_refused_not_silently_overridden() -> None:
    """`b: {<<: *a, epochs: 3}` meant epochs; the merged `steps: 7` won without a word."""
    _, found, _ = validate("a: &t {steps: 7, warmup_steps: 1}\nb: {<<: *t, epochs: 3}\n", TwoStaged)
    assert len(found) == 1 and found[0][:2] == (2, 13), found
    assert "cfg.b.epochs" in found[0][2] and "set in different places, and steps overrides epochs" in found[0][2]
    for fine in ("a: {steps: 7, epochs: 3, warmup_steps: 1}\n", "a: &t {steps: 7, warmup_steps: 1}\nb: {<<: *t}\n"):
        assert validate(fine, TwoStaged)[1] == [], fine


def test_real_train_config() -> None:
    value, found, _ = validate(
        "lr: 3e-4\nsteps: 1e4\neval_every: epoch\nclip_norm: null\nno_decay: [bias]\n", TrainConfig, "train"
    )
    assert found == []
    assert value == TrainConfig(lr=3e-4, steps=10000, eval_every="epoch", clip_norm=None, no_decay=["bias"])


def test_unknown_keys_all_reported() -> None:
    _, found, _ = validate("count: 1\ncuont: 2\ninner:\n  lrr: 1\n  epohcs: 2\nbogus: 1\n")
    assert found == [
        (2, 1, "cfg.cuont: unknown key 'cuont'; did you mean 'count'?"),
        (4, 3, "cfg.inner.lrr: unknown key 'lrr'; did you mean 'lr'?"),
        (5, 3, "cfg.inner.epohcs: unknown key 'epohcs'; did you mean 'epochs'?"),
        (6, 1, "cfg.bogus: unknown key 'bogus'"),
    ]


def test_problems_everywhere_are_collected() -> None:
    _, found, _ = validate("mode: x\nitems: [a]\ninner: {lr: b}\n")
    assert [m.split(":")[0] for _, _, m in found] == ["cfg", "cfg.mode", "cfg.items.0", "cfg.inner.lr"]


def test_missing_required_key() -> None:
    _, found, _ = validate("mode: fast\n")
    assert found == [(1, 1, "cfg: missing required key 'count'")]
    _, found, _ = validate("mode: fast\n", path="")
    assert found == [(1, 1, "recipe: missing required key 'count'")]


def test_post_init_error_reported_at_the_mapping() -> None:
    _, found, _ = validate("count: 1\nranged:\n  low: 5\n  high: 1\n")
    assert found == [(3, 3, "cfg.ranged: low 5 > high 1")]


# --- paths -------------------------------------------------------------------------------------


def test_paths_resolve_against_the_yaml_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # not the YAML file's folder
    conf = tmp_path / "conf" / "sub"
    conf.mkdir(parents=True)
    (tmp_path / "conf" / "data.txt").write_text("x")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    cases = {
        "../data.txt": tmp_path / "conf" / "data.txt",
        "d/./e.txt": conf / "d" / "e.txt",
        "/abs/x": Path("/abs/x"),
        "~/y": tmp_path / "home" / "y",
    }
    for text, expected in cases.items():
        file = conf / "cfg.yaml"
        file.write_text(f"count: 1\nwhere: {text}\nexisting: ../data.txt\n")
        validator = Validator()
        value = validator.dataclass(parse_file(file), Outer, "cfg")
        assert validator.diagnostics == []
        assert value.where == expected, text
        assert value.existing == tmp_path / "conf" / "data.txt"
    # a command-line override has no file: relative to the working directory
    _, node = parse_override("where=out/x", 1)
    assert Validator().value(node, Path, "where") == tmp_path / "out" / "x"


def test_existing_path_missing(tmp_path: Path) -> None:
    file = tmp_path / "cfg.yaml"
    file.write_text("count: 1\nexisting: nope.txt\n")
    validator = Validator()
    assert validator.dataclass(parse_file(file), Outer, "cfg") is INVALID
    (diag,) = validator.diagnostics
    assert diag.location == Location(str(file), 2, 11)
    assert diag.message == f"cfg.existing: path not found: {tmp_path / 'nope.txt'}"


@dataclass
class Reads:
    init: Input | None = knob(None, "A model.", takes=("model",))
    tokenizer: Input | None = knob(None, "A tokenizer; a model dir holds one.", takes=("tokenizer", "model"))
    anything: Input | None = None


def _reads(text: str, file: str = F) -> tuple[Any, list[tuple[int, int, str]]]:
    validator = Validator({"vocab": ("tokenizer",), "pre": ("discriminator", "tokenizer"), "ext": ("model",)})
    validator.stage_kinds = {
        "vocab": {"tokenizer": "tokenizer"},
        "pre": {"discriminator": "model", "tokenizer": "tokenizer"},
    }  # `ext` (a third-party stage) declares no kinds
    value = validator.dataclass(parse_text(text, file), Reads, "stages.ft")
    return value, [(d.location.line, d.location.col, d.message) for d in validator.diagnostics]


def test_a_field_that_takes_kinds_refuses_an_output_of_another_kind(tmp_path: Path) -> None:
    value, found = _reads("init: vocab.tokenizer\ntokenizer: pre.tokenizer\n")
    assert value is INVALID
    assert found == [
        (1, 7, "stages.ft.init: vocab.tokenizer is a tokenizer; init takes a model (e.g. pre.discriminator)")
    ]
    _, found = _reads("init: pre.tokenizer\n")  # the referenced stage's outputs that fit come first
    assert found == [
        (1, 7, "stages.ft.init: pre.tokenizer is a tokenizer; init takes a model (e.g. pre.discriminator)")
    ]
    (tmp_path / "ckpt").mkdir()
    file = str(tmp_path / "cfg.yaml")
    for ok in (
        "init: pre.discriminator\ntokenizer: pre.discriminator\n",  # a model dir holds its tokenizer
        "init: ext.model\ntokenizer: vocab.tokenizer\n",  # undeclared kinds are not checked
        "init: ckpt\nanything: vocab.tokenizer\n",  # nor folders, nor fields without `takes`
    ):
        value, found = _reads(ok, file)
        assert found == [] and isinstance(value, Reads), (ok, found)
    assert value.init == Input(path=tmp_path / "ckpt")


def test_knob_takes_is_a_tuple_of_kinds() -> None:
    with pytest.raises(ValueError, match="takes= must be a non-empty tuple"):
        knob(None, "", takes="model")


# --- yamlsrc ------------------------------------------------------------------------------------


def test_locations_of_nested_values() -> None:
    root = parse_text("a:\n  b:\n    - x\n    - {c: 5}\n", F)
    b = root.value["a"].value["b"]
    assert b.key_loc == Location(F, 2, 3) and b.loc == Location(F, 3, 5)
    assert b.value[0].loc == Location(F, 3, 7)
    c = b.value[1].value["c"]
    assert (c.value, c.loc, c.key_loc, c.origin) == (5, Location(F, 4, 11), Location(F, 4, 8), f"{F}:4:11")
    assert root.to_python() == {"a": {"b": ["x", {"c": 5}]}}
    assert parse_text("", F).to_python() == {}


def test_duplicate_keys() -> None:
    with pytest.raises(RecipeError) as info:
        parse_text("a: 1\nb:\n  x: 1\n  x: 2\na: 3\n", F)
    assert [str(d) for d in info.value.diagnostics] == [
        f"{F}:4:3: duplicate key 'x' (first at line 3)",
        f"{F}:5:1: duplicate key 'a' (first at line 1)",
    ]


def test_anchors_aliases_and_merge_keys() -> None:
    text = """\
base: &base
  lr: 0.1
  epochs: 2
extra: &extra {epochs: 9, name: e}
alias: *base
run:
  <<: [*base, *extra]
  lr: 0.5
"""
    root = parse_text(text, F)
    assert root.value["alias"].to_python() == {"lr": 0.1, "epochs": 2}
    run = root.value["run"]
    assert run.to_python() == {"lr": 0.5, "epochs": 2, "name": "e"}, "explicit keys win, then earlier merges"
    assert run.value["epochs"].loc == Location(F, 3, 11), "merged values keep the anchor's location"
    with pytest.raises(RecipeError, match="a '<<' merge needs a mapping or a list of mappings"):
        parse_text("a: &s 1\nb:\n  <<: *s\n", F)


def test_a_second_merge_key_and_a_merge_of_a_scalar_are_deferred_not_fatal() -> None:
    """PyYAML keeps the last of two `<<` keys silently; and a bad merge raised at once, hiding the
    file's other problems. Both are kept aside (`deferred`), with the tree left without them."""
    text = "a: &a {x: 1}\nb: &b {y: 2}\nrun:\n  <<: *a\n  <<: *b\n  z: 3\nbad:\n  <<: 5\n  w: 4\n"
    deferred: list = []
    root = parse_text(text, F, deferred)
    assert [str(d) for d in deferred] == [
        f"{F}:5:3: a second '<<' merge key in this mapping (the first is at line 4); merge several mappings "
        "with one key: `<<: [*a, *b]`",
        f"{F}:8:7: a '<<' merge needs a mapping or a list of mappings, got int 5",
    ]
    assert root.value["run"].to_python() == {"x": 1, "z": 3} and root.value["bad"].to_python() == {"w": 4}
    with pytest.raises(RecipeError) as info:  # without a list to defer to, they are raised as before
        parse_text(text, F)
    assert len(info.value.diagnostics) == 2


def test_override_creates_missing_keys_and_records_origin() -> None:
    root = parse_text("stages:\n  fit: {lr: 1}\n", F)
    text = "stages.fit.train.steps=5"
    path, value = parse_override(text, 1)
    assert path == ["stages", "fit", "train", "steps"]
    assert apply_override(root, path, value, text, 1) == []
    train = root.value["stages"].value["fit"].value["train"]
    assert train.created_by_override and train.origin == f"override {text!r}"
    steps = train.value["steps"]
    assert steps.value == 5 and steps.created_by_override and steps.origin == f"override {text!r}"
    assert steps.loc == Location(f"<override 1: {text}>", 1, 24), "column of the value inside the override text"
    # an existing key is replaced, not created
    text = "stages.fit.lr=[1, 2]"
    path, value = parse_override(text, 2)
    assert apply_override(root, path, value, text, 2) == []
    lr = root.value["stages"].value["fit"].value["lr"]
    assert lr.to_python() == [1, 2] and not lr.created_by_override and lr.value[1].origin == f"override {text!r}"
    # list items by index; going below a scalar or past a list is reported
    root = parse_text("a: [1, 2]\nb: 3\n", F)
    for i, (text, expected) in enumerate(
        [
            ("a.1=5", None),
            ("a.5=1", "no list item '5' (list has 2 items)"),
            ("b.c=1", "'b' is a single value, it has no key 'c'"),
        ]
    ):
        path, value = parse_override(text, i)
        problems = apply_override(root, path, value, text, i)
        assert [p.message.endswith(expected) for p in problems] == ([True] if expected else [])
    assert root.to_python() == {"a": [1, 5], "b": 3}
    assert parse_override("x=", 1)[1].value == ""


def test_deep_merge_for_includes() -> None:
    base = parse_text("a: {x: 1, y: [1, 2]}\nb: 1\n", "base.yaml")
    top = parse_text("a: {y: [3], z: 2}\nc: 1\n", "top.yaml")
    merged = deep_merge(base, top)
    assert merged.to_python() == {"a": {"x": 1, "y": [3], "z": 2}, "b": 1, "c": 1}
    assert merged.value["a"].value["x"].loc.file == "base.yaml"


def test_file_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"a: 1\nb: caf\xc3\xa9\nc: \xff\xfe\n")
    with pytest.raises(RecipeError) as info:
        parse_file(bad)
    assert [str(d) for d in info.value.diagnostics] == [f"{bad}:3: file is not valid UTF-8"]
    with pytest.raises(RecipeError, match="file not found"):
        parse_file(tmp_path / "missing.yaml")


def test_paths_expand_environment_variables(tmp_path, monkeypatch) -> None:
    from xfer.core.recipes.schema import expand_env

    monkeypatch.setenv("XFER_TEST_ROOT", str(tmp_path))
    monkeypatch.delenv("XFER_TEST_UNSET", raising=False)
    assert expand_env("${XFER_TEST_ROOT}/glue") == f"{tmp_path}/glue"
    assert expand_env("${XFER_TEST_UNSET:-../data}/glue") == "../data/glue"
    with pytest.raises(ValueError, match="XFER_TEST_UNSET is not set"):
        expand_env("${XFER_TEST_UNSET}/x")


# --- strict scalars, bounds, required keys, blamed keys, typed override mappings -----------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('count: "600"', "cfg.count: expected an integer, got the quoted string '600' (remove the quotes)"),
        ("count: '1e4'", "cfg.count: expected an integer, got the quoted string '1e4' (remove the quotes)"),
        (
            "count: 1\ninner: {lr: '3e-4'}",
            "cfg.inner.lr: expected a number, got the quoted string '3e-4' (remove the quotes)",
        ),
        ("count: 1\nevery: '5'", "cfg.every: expected an integer or one of 'epoch' or null, got str '5'"),
    ],
)
def test_quoted_numbers_are_strings(text: str, message: str) -> None:
    _, found, _ = validate(text + "\n")
    assert [m for _, _, m in found] == [message]


def test_plain_yaml_1_1_numbers_still_accepted() -> None:
    value, found, _ = validate("count: 1e4\ninner: {lr: 3e-4, epochs: 2}\nevery: 5\n")
    assert found == [] and (value.count, value.inner.lr, value.every) == (10000, 3e-4, 5)
    _, node = parse_override("count=600", 1)  # overrides are plain YAML too
    assert Validator().value(node, int, "count") == 600
    _, node = parse_override("count='600'", 1)
    assert Validator().value(node, int, "count") is INVALID


@dataclass
class Bounded:
    every: int = knob(50, "Log every N steps.", ge=1)
    interval: int | Literal["epoch"] | None = knob("epoch", "Steps, epoch or never.", ge=1)
    rate: float = knob(0.5, "A probability.", gt=0, lt=1)
    path: ExistingPath | None = knob(None, "The data. Read once.", required=True)


def test_knob_bounds_are_reported_at_the_value(tmp_path: Path) -> None:
    (tmp_path / "x").write_text("")
    text = f"path: {tmp_path / 'x'}\nevery: 0\ninterval: -3\nrate: 1.0\n"
    _, found, _ = validate(text, Bounded)
    assert found == [
        (2, 8, "cfg.every: must be at least 1, got 0"),
        (3, 11, "cfg.interval: must be at least 1, got -3"),
        (4, 7, "cfg.rate: must be less than 1, got 1.0"),
    ]
    _, found, _ = validate(f"path: {tmp_path / 'x'}\nrate: .nan\n", Bounded)
    assert found == [(2, 7, "cfg.rate: must be a finite number, got nan")]
    # `.inf` passed `gt: 0`: electra.pretrain's `budget: {flops: .inf}` failed after the examples were built
    # ("cannot convert float NaN to integer"), `lr: .inf` trained to NaN
    _, found, _ = validate("lr: .inf\nweight_decay: -.inf\n", TrainConfig)
    assert [m for _, _, m in found] == [
        "cfg.lr: must be a finite number, got inf",
        "cfg.weight_decay: must be a finite number, got -inf",
    ]
    value, found, _ = validate(f"path: {tmp_path / 'x'}\ninterval: epoch\n", Bounded)
    assert found == [] and value.interval == "epoch", "non-numeric alternatives are not bounded"
    assert validate(f"path: {tmp_path / 'x'}\ninterval: null\n", Bounded)[0].interval is None


def test_required_knob_in_recipes_but_not_in_python() -> None:
    assert Bounded().path is None, "Python callers may leave it out"
    _, found, _ = validate("every: 2\n", Bounded)
    assert found == [(1, 1, "cfg: missing required key 'path': The data")]
    _, found, _ = validate("path: null\n", Bounded)
    assert found == [(1, 7, "cfg.path: required, got null: The data")]


def test_real_train_config_intervals() -> None:
    _, found, _ = validate("log_every: 0\neval_every: 0\ncheckpoint_every: -1\nsteps: 0\nbatch_size: 0\n", TrainConfig)
    assert [m for _, _, m in found] == [
        "cfg.log_every: must be at least 1, got 0",
        "cfg.eval_every: must be at least 1, got 0",
        "cfg.checkpoint_every: must be at least 1, got -1",
        "cfg.steps: must be at least 1, got 0",
        "cfg.batch_size: must be at least 1, got 0",
    ]
    _, found, _ = validate("lr: 1e-3\nepochs: 0\n", TrainConfig)
    assert found == [(2, 9, "cfg.epochs: must be greater than 0, got 0.0")]


@dataclass
class Blames:
    table: dict[str, int] = knob({}, "")
    names: list[str] = knob([], "")

    def __post_init__(self) -> None:
        for key, value in self.table.items():
            if value not in range(len(self.names)):
                raise FieldError(("table", key), f"{value} is not an index of names")

    def check_recipe(self) -> None:
        if not self.names:
            raise FieldError("names", "give at least one name in a recipe")


def test_field_error_is_reported_at_the_blamed_key() -> None:
    _, found, _ = validate("names: [a]\ntable:\n  ok: 0\n  bad: 3\n", Blames)
    assert found == [(4, 3, "cfg.table.bad: 3 is not an index of names")]
    _, found, _ = validate("table: {}\n", Blames)
    assert found == [(1, 1, "cfg.names: give at least one name in a recipe")], "check_recipe runs; key absent"
    assert Blames().names == [], "check_recipe is for recipes only"


@dataclass
class WithOverrides:
    encoder: Annotated[
        dict[str, Any], KeysOf.of({"num_layers": int, "dropout": float, "unpad": bool}, "encoder field")
    ] = knob({}, "")


def test_keys_of_mapping_checks_names_and_types() -> None:
    value, found, _ = validate("encoder: {num_layers: 2, dropout: 0}\n", WithOverrides)
    assert found == [] and value.encoder == {"num_layers": 2, "dropout": 0.0}
    _, found, _ = validate("encoder:\n  num_layer: 2\n  unpad: 'no'\n  dropout: x\n", WithOverrides)
    assert found == [
        (
            2,
            3,
            "cfg.encoder.num_layer: unknown encoder field 'num_layer'; did you mean 'num_layers'? (valid: dropout, num_layers, unpad)",
        ),
        (3, 10, "cfg.encoder.unpad: expected true or false, got str 'no'"),
        (4, 12, "cfg.encoder.dropout: expected a number, got str 'x'"),
    ]


def test_warmup_longer_than_the_steps_is_an_error_at_warmup_steps() -> None:
    """The lr never reached its peak: e.g. a stage default's warmup 10k kept under `steps: 100`."""
    _, found, _ = validate("steps: 100\nwarmup_steps: 300\n", TrainConfig)
    assert found == [
        (
            2,
            1,
            "cfg.warmup_steps: 300 is more than train.steps (100): the learning rate would never reach train.lr; "
            "give at most 100 (or a warmup_fraction)",
        )
    ]
    _, found, _ = validate("train: {steps: 50}\n", Staged)  # the default's warmup 100, kept: blamed at `train`
    assert [m for _, _, m in found] == [
        "cfg.train.warmup_steps: 100 is more than train.steps (50): the learning rate would never reach train.lr; "
        "give at most 50 (or a warmup_fraction)"
    ]
    for fine in ("steps: 100\nwarmup_steps: 100\n", "epochs: 1\nwarmup_steps: 300\n", "steps: 5\nwarmup_fraction: 1\n"):
        assert validate(fine, TrainConfig)[1] == [], fine  # epochs: the total is known only when training starts
    assert TrainConfig(steps=1, warmup_steps=10).warmup_steps == 10, "recipes only: stages set steps after the fact"


@dataclass
class WithFiles:
    files: Files = knob(doc="Text files.")


def test_a_directory_given_as_files_is_an_error_at_the_key(tmp_path: Path) -> None:
    """Readers take files only: a folder was read as nothing, and the stage failed at run time
    saying the patterns "matched nothing" (or showing an internal `Files(...)` repr)."""
    (tmp_path / "corpus" / "a").mkdir(parents=True)
    (tmp_path / "corpus" / "a" / "x.txt").write_text("text\n")
    (tmp_path / "corpus" / "b").mkdir()
    file = str(tmp_path / "cfg.yaml")
    _, found, _ = validate("files: corpus\n", WithFiles, file=file)
    assert found == [(1, 8, "cfg.files: 'corpus' is a directory; give files or a glob such as corpus/*.txt")]
    _, found, _ = validate("files: [corpus/a/x.txt, 'corpus/*/']\n", WithFiles, file=file)
    assert found == [
        (
            1,
            25,
            f"cfg.files.1: 'corpus/*/' matches only directories (such as {tmp_path}/corpus/a); "
            "give files or a glob such as corpus/*/*.txt",
        )
    ]
    value, found, _ = validate("files: ['corpus/**']\n", WithFiles, file=file)  # folders and files: the files count
    assert found == [] and value.files.patterns == (str(tmp_path / "corpus" / "**"),)


def test_files_read_in_messages_as_a_recipe_writes_them() -> None:
    """`no text files found in Files(patterns=(...), inputs=())` showed an internal repr."""
    files = Files(("/data/*.txt",), (Input(stage="corpus", output="text"),))
    assert f"no text files found in {files}" == "no text files found in /data/*.txt, corpus.text"
