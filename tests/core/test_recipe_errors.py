"""Acceptance: malformed recipes exit 2 with `file:line:col: message`, all problems at once, no traceback."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from xfer.core import cli
from xfer.core.plugins import set_default_host
from xfer.testing import make_host, run_cli, write_recipe

GOOD = """\
name: t
seed: 1
stages:
  fit:
    kind: testing.fit
    task: {name: toy/agreement, train_size: 64, dev_size: 16}
    train:
      steps: 2
      batch_size: 8
      lr: 3e-4
  second:
    kind: testing.fit
    init: fit.model
    task: toy/agreement
    train: {steps: 2, batch_size: 8}
"""

# (name, recipe text or a (text, overrides) pair, expected line, expected col, message regex)
CASES = [
    *[
        (
            f"run directory outside runs/ ({bad!r})",
            GOOD.replace("name: t\n", f"name: '{bad}'\n"),
            1,
            7,
            r"names the run directory",
        )
        for bad in ("../escape", "/tmp/abs", "a/b", "", "..")
    ],
    (
        "seed too large for torch",
        GOOD.replace("seed: 1", "seed: 1099511627776"),
        2,
        7,
        r"seed: must be in 0\.\.2147483647",
    ),
    (
        "seed beyond 64 bits",
        GOOD.replace("seed: 1", "seed: 18446744073709551616"),
        2,
        7,
        r"seed: must fit in 64 bits",
    ),
    ("negative seed", (GOOD, ["seed=-3"]), 1, 6, r"seed: must be in 0\.\.2147483647, got -3"),
    (
        "a training knob at stage level",
        (GOOD, ["stages.fit.steps=3"]),
        1,
        12,
        r"stages\.fit\.steps: unknown key 'steps'; it belongs under 'train' \(train\.steps\)",
    ),
    (
        "negative learning rate",
        GOOD.replace("lr: 3e-4", "lr: -3e-4"),
        10,
        11,
        r"stages\.fit\.train\.lr: must be at least 0, got -0\.0003",
    ),
    (
        "EMA that never moves",
        (GOOD, ["stages.fit.train.ema_decay=1.0"]),
        1,
        28,
        r"ema_decay: must be less than 1, got 1\.0",
    ),
    ("run directory name by override", (GOOD, ["name=../up"]), 1, 6, r"name '\.\./up' names the run directory"),
    (
        "environment variable in the name",  # was taken literally: runs/${USER}-demo
        GOOD.replace("name: t\n", "name: ${USER}-demo\n"),
        1,
        7,
        r"name '\$\{USER\}-demo': the run name is taken as written \(\$\{VAR\} is expanded in paths only\)",
    ),
    ("top-level typo", GOOD.replace("seed: 1", "sed: 1"), 2, 1, r"unknown top-level key 'sed'; did you mean 'seed'\?"),
    (
        "stage-level typo",
        GOOD.replace("    init: fit.model", "    inti: fit.model"),
        13,
        5,
        r"stages\.second\.inti: unknown key 'inti'; did you mean 'init'\?",
    ),
    (
        "nested typo",
        GOOD.replace("      lr: 3e-4", "      lrr: 3e-4"),
        10,
        7,
        r"stages\.fit\.train\.lrr: unknown key 'lrr'; did you mean 'lr'\?",
    ),
    (
        "task config typo",
        GOOD.replace("train_size: 64", "train_sise: 64"),
        6,
        33,
        r"stages\.fit\.task\.train_sise: unknown key 'train_sise'; did you mean 'train_size'\?",
    ),
    (
        "wrong type int",
        GOOD.replace("      steps: 2", "      steps: two"),
        8,
        14,
        r"stages\.fit\.train\.steps: expected an integer, got str 'two'",
    ),
    (
        "wrong type float",
        GOOD.replace("lr: 3e-4", "lr: fast"),
        10,
        11,
        r"stages\.fit\.train\.lr: expected a number, got str 'fast'",
    ),
    (
        "wrong type bool",
        GOOD.replace("      lr: 3e-4", "      bias_correction: 'no'"),
        10,
        24,
        r"bias_correction: expected true or false, got str 'no'",
    ),
    (
        "bad literal",
        GOOD.replace("      lr: 3e-4", "      optimizer: adamm"),
        10,
        18,
        r"'adamm' is not one of 'adamw', 'sgd'; did you mean 'adamw'\?",
    ),
    (
        "mapping expected",
        GOOD.replace("    train: {steps: 2, batch_size: 8}", "    train: [1, 2]"),
        15,
        12,
        r"stages\.second\.train: expected a mapping, got a list",
    ),
    (
        "unknown kind",
        GOOD.replace("kind: testing.fit\n    task: {", "kind: testing.fitt\n    task: {"),
        5,
        11,
        r"unknown stage kind 'testing\.fitt'; did you mean 'testing\.fit'\?",
    ),
    (
        "unknown namespace",
        GOOD.replace("kind: testing.fit\n    task: {", "kind: electra.pretrain\n    task: {"),
        5,
        11,
        r"no installed plugin provides namespace 'electra'",
    ),
    (
        "unknown task",
        GOOD.replace("task: toy/agreement", "task: toy/agreemnt"),
        14,
        11,
        r"unknown task 'toy/agreemnt'; did you mean 'toy/agreement'\?",
    ),
    (
        "bad reference stage",
        GOOD.replace("init: fit.model", "init: fitt.model"),
        13,
        11,
        r"'fitt\.model' is neither a stage output \(no stage 'fitt'; did you mean 'fit'\?\)",
    ),
    (
        "bad reference output",
        GOOD.replace("init: fit.model", "init: fit.modle"),
        13,
        11,
        r"stage 'fit' has no output 'modle' \(outputs: model\); did you mean 'model'\?",
    ),
    (
        "missing data file",
        GOOD.replace("init: fit.model", "init: no/such/dir"),
        13,
        11,
        r"path not found: .*no/such/dir",
    ),
    (
        "missing required",
        GOOD.replace("    task: toy/agreement\n", ""),
        12,
        5,
        r"stages\.second: missing required key 'task'",
    ),
    (
        "yaml syntax error",
        GOOD.replace("    train: {steps: 2, batch_size: 8}", "    train: {steps: 2, batch_size: 8"),
        16,
        1,
        r"YAML syntax error",
    ),
    ("duplicate key", GOOD.replace("seed: 1\n", "seed: 1\nseed: 2\n"), 3, 1, r"duplicate key 'seed'"),
    (
        "cross-field check",
        GOOD.replace("      batch_size: 8", "      batch_size: 8\n      grad_accum: 3"),
        8,
        7,
        r"batch_size 8 is not a multiple of grad_accum 3",
    ),
    (
        "bad override key",
        (GOOD, ["stages.fit.train.lrr=1"]),
        1,
        18,
        r"stages\.fit\.train\.lrr: unknown key 'lrr'; did you mean 'lr'\?",
    ),
    (
        "bad override type",
        (GOOD, ["stages.fit.train.steps=abc"]),
        1,
        24,
        r"stages\.fit\.train\.steps: expected an integer, got str 'abc'",
    ),
    (
        "override matches no stage",
        (GOOD, ["stages.fitt.train.lr=1"]),
        1,
        8,
        r"override matches no stage 'fitt'; did you mean 'fit'\?",
    ),
    (
        "override matches no stage, nothing close",
        (GOOD, ["stages.zzz.train.lr=1"]),
        1,
        8,
        r"override matches no stage 'zzz' \(stages: fit, second\)",
    ),
    (
        "quoted integer",
        GOOD.replace("      steps: 2", '      steps: "600"'),
        8,
        14,
        r"stages\.fit\.train\.steps: expected an integer, got the quoted string '600' \(remove the quotes\)",
    ),
    (
        "quoted override",
        (GOOD, ["stages.fit.train.steps='600'"]),
        1,
        24,
        r"expected an integer, got the quoted string '600'",
    ),
    (
        "log_every zero",
        GOOD.replace("      steps: 2", "      steps: 2\n      log_every: 0"),
        9,
        18,
        r"stages\.fit\.train\.log_every: must be at least 1, got 0",
    ),
    (
        "eval_every negative in flow mapping",
        GOOD.replace("train: {steps: 2, batch_size: 8}", "train: {steps: 2, batch_size: 8, eval_every: -5}"),
        15,
        50,
        r"stages\.second\.train\.eval_every: must be at least 1, got -5",
    ),
    (
        "zero epochs blamed on the key",
        GOOD.replace("train: {steps: 2, batch_size: 8}", "train: {epochs: 0, batch_size: 8}"),
        15,
        21,
        r"stages\.second\.train\.epochs: must be greater than 0, got 0\.0",
    ),
    (
        "unknown namespace names the distribution",
        GOOD.replace("kind: testing.fit\n    task: {", "kind: gpt.pretrain\n    task: {"),
        5,
        11,
        r"no installed plugin provides namespace 'gpt' .*pip install xfer-gpt",
    ),
    (
        "empty toy corpus",
        GOOD.replace("stages:\n", "stages:\n  corpus: {kind: toy.corpus, sentences: 0}\n"),
        4,
        30,
        r"stages\.corpus\.sentences: must be at least 1, got 0",
    ),
    ("override without =", (GOOD, ["stages.fit.train.lr"]), 1, 1, r"an override must look like 'path\.to\.key=value'"),
    ("include by override", (GOOD, ["include=other.yaml"]), 1, 1, r"include cannot be overridden"),
    (
        "epochs by override under the file's steps",
        (GOOD, ["stages.second.train.epochs=2"]),
        1,
        21,
        r"stages\.second\.train\.epochs \(override .*\) and stages\.second\.train\.steps \(.*recipe\.yaml:\d+:\d+\) "
        r"are set in different places",
    ),
]


def _cycle_recipe() -> str:
    return GOOD.replace(
        "    task: {name: toy/agreement, train_size: 64, dev_size: 16}",
        "    init: second.model\n    task: {name: toy/agreement, train_size: 64, dev_size: 16}",
    )


@pytest.fixture(autouse=True)
def host():
    set_default_host(make_host(["xfer.testing.plugin"]))
    yield
    set_default_host(None)


@pytest.mark.parametrize(("name", "source", "line", "col", "message"), CASES, ids=[c[0] for c in CASES])
def test_malformed_recipe(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, source, line: int, col: int, message: str
) -> None:
    text, overrides = source if isinstance(source, tuple) else (source, [])
    path = write_recipe(tmp_path, text)
    code = cli.main(["validate", str(path), *overrides])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    where = f"<override 1: {overrides[0]}>" if overrides else str(path.resolve())
    expected = re.compile(re.escape(f"{where}:{line}:{col}: ") + ".*" + message)
    assert any(expected.search(row) for row in err.splitlines()), f"wanted {where}:{line}:{col}: /{message}/ in:\n{err}"


def test_a_cycle_is_reported_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It was reported once per stage on it (and once more per stage reading from it)."""
    path = write_recipe(tmp_path, _cycle_recipe())
    assert cli.main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path.resolve()}:4:3: stages form a cycle: fit -> second -> fit" in err
    assert err.count("a cycle:") == 1 and "1 problem found" in err, err
    third = "  third:\n    kind: testing.fit\n    init: second.model\n    task: toy/agreement\n"
    path = write_recipe(tmp_path, _cycle_recipe() + third)  # a stage reading from the cycle is no second report
    assert cli.main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("a cycle:") == 1 and "fit -> second -> fit" in err, err
    # a three-stage cycle, written out of order, and a second, separate cycle: each once, at its first stage
    loop = (
        GOOD.replace(
            "    task: {name: toy/agreement, train_size: 64, dev_size: 16}",
            "    init: third.model\n    task: {name: toy/agreement, train_size: 64, dev_size: 16}",
        )
        + third.replace("third:", "fourth:")
        + third.replace("second.model", "fourth.model")
    )
    loop += "  fifth:\n    kind: testing.fit\n    init: sixth.model\n    task: toy/agreement\n"
    loop += "  sixth:\n    kind: testing.fit\n    init: fifth.model\n    task: toy/agreement\n"
    path = write_recipe(tmp_path, loop)
    assert cli.main(["validate", str(path)]) == 2
    cycles = [row for row in capsys.readouterr().err.splitlines() if "a cycle:" in row]
    assert cycles == [
        f"{path.resolve()}:4:3: stages form a cycle: fit -> third -> fourth -> second -> fit",
        f"{path.resolve()}:25:3: stages form a cycle: fifth -> sixth -> fifth",
    ]


def test_all_problems_reported_at_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = (
        GOOD.replace("seed: 1", "sed: 1").replace("lr: 3e-4", "lr: fast").replace("init: fit.model", "init: fitt.model")
    )
    path = write_recipe(tmp_path, text)
    assert cli.main(["validate", str(path), "stages.fit.train.lrr=1"]) == 2
    err = capsys.readouterr().err
    assert "4 problems found" in err
    assert len([row for row in err.splitlines() if re.match(r".+:\d+:\d+: ", row)]) == 4


def test_included_file_errors_point_into_the_include(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shared = write_recipe(tmp_path, "stages:\n  fit:\n    train: {steps: 2, batch_size: 8, lr: quick}\n", "shared.yaml")
    main = write_recipe(
        tmp_path, "include: [shared.yaml]\nstages:\n  fit:\n    kind: testing.fit\n    task: toy/agreement\n"
    )
    assert cli.main(["validate", str(main)]) == 2
    assert f"{shared.resolve()}:3:42: stages.fit.train.lr: expected a number" in capsys.readouterr().err


def test_include_merges_and_show_reports_origins(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_recipe(tmp_path, "seed: 9\nstages:\n  fit:\n    train: {steps: 2, batch_size: 8, lr: 0.5}\n", "shared.yaml")
    main = write_recipe(
        tmp_path,
        "include: shared.yaml\nstages:\n  fit:\n    kind: testing.fit\n    task: toy/agreement\n    train: {lr: 0.25}\n",
    )
    assert cli.main(["show", str(main), "stages.fit.dim=8"]) == 0
    out = capsys.readouterr().out
    assert f"seed: 9  # {(tmp_path / 'shared.yaml').resolve()}:1:7" in out
    assert f"lr: 0.25  # {main.resolve()}:6:17" in out
    assert f"steps: 2  # {(tmp_path / 'shared.yaml').resolve()}:4:20" in out
    assert "dim: 8  # override 'stages.fit.dim=8'" in out
    assert "dropout: 0.1  # default" in out


def test_cli_subprocess_exit_code_and_no_traceback(tmp_path: Path) -> None:
    path = write_recipe(tmp_path, GOOD.replace("seed: 1", "sed: 1"))
    result = run_cli(["run", str(path)], plugin_modules=["xfer.testing.plugin"], cwd=tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and ":2:1: unknown top-level key 'sed'" in result.stderr
    assert not (tmp_path / "runs").exists(), "nothing may run when validation fails"


def test_python_object_tag_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    marker = tmp_path / "pwned"
    text = GOOD.replace("seed: 1", f"seed: !!python/object/apply:os.system ['touch {marker}']")
    path = write_recipe(tmp_path, text)
    assert cli.main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path.resolve()}:2:7: unsupported YAML tag 'tag:yaml.org,2002:python/object/apply:os.system'" in err
    assert not marker.exists()
    path.write_text(GOOD.replace("  fit:\n", "  fit: !!python/object:collections.OrderedDict\n", 1))
    assert cli.main(["validate", str(path)]) == 2
    assert "unsupported YAML tag" in capsys.readouterr().err


def test_recursive_and_exploding_aliases_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An anchor used inside its own value was a RecursionError traceback; aliases nested in
    aliases ("billion laughs": a few lines, 10**9 values) expanded until memory ran out."""
    path = write_recipe(tmp_path, GOOD + "description: &loop [*loop]\n")
    assert cli.main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "recursive YAML alias: this anchor is used inside its own value" in err
    levels = ["a0: &a0 [" + ", ".join(["x"] * 20) + "]"]
    levels += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 20) + "]" for i in range(1, 4)]  # 20**4 values
    path.write_text(GOOD + "\n".join(levels) + "\n")
    assert cli.main(["validate", str(path)]) == 2
    assert "the document expands to more than 100000 values (aliases nested in aliases?)" in capsys.readouterr().err
    path.write_text(GOOD.replace("seed: 1", "seed: &one 1") + "description: *one\n")  # plain aliases still work
    assert cli.main(["validate", str(path)]) == 2
    assert "description: expected a string, got int 1" in capsys.readouterr().err


def test_include_problems_point_at_the_include_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_recipe(tmp_path, "include: [main.yaml]\nseed: 2\n", "loop.yaml")
    main = write_recipe(
        tmp_path, "seed: 1\ninclude:\n  - loop.yaml\n  - nowhere.yaml\n" + GOOD.split("seed: 1\n")[1], "main.yaml"
    )
    assert cli.main(["validate", str(main)]) == 2
    err = capsys.readouterr().err
    assert f"{(tmp_path / 'loop.yaml').resolve()}:1:11: include cycle: {main.resolve()} includes itself" in err
    assert f"{main.resolve()}:4:5: include: file not found: {(tmp_path / 'nowhere.yaml').resolve()}" in err


def test_plugin_import_error_is_named_when_its_namespace_is_used(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = tmp_path / "brokenns_plugin.py"
    broken.write_text("import no_such_module_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    host = make_host(["xfer.testing.plugin"])
    host.add_module("brokenns_plugin", name="brokenns")
    set_default_host(host)
    path = write_recipe(tmp_path, GOOD.replace("kind: testing.fit\n    task: {", "kind: brokenns.stage\n    task: {"))
    assert cli.main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path.resolve()}:5:11: stages.fit.kind: stage 'brokenns.stage' should come from plugin 'brokenns'" in err
    assert "ModuleNotFoundError: No module named 'no_such_module_xyz'" in err


def test_an_unknown_key_names_the_fields_it_is_part_of() -> None:
    from xfer.core.recipes.schema import did_you_mean

    fields = ["tagging_views", "parsing_views", "mode"]
    assert did_you_mean("views", fields) == "; did you mean one of 'parsing_views', 'tagging_views'?"
    assert did_you_mean("tagging", fields) == "; did you mean 'tagging_views'?"
    assert did_you_mean("mdoe", fields) == "; did you mean 'mode'?"
    assert did_you_mean("zzz", fields) == ""


def test_one_key_overridden_twice_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The last value would win silently (e.g. a seed appended to a base command line)."""
    path = write_recipe(tmp_path, GOOD)
    assert cli.main(["validate", str(path), "seed=1", "stages.fit.train.lr=0.1", "seed=2"]) == 2
    err = capsys.readouterr().err
    assert "<override 3: seed=2>:1:1: seed is already set by override 1 ('seed=1'); give it once" in err
    layered = ["stages.fit.train={lr: 0.1}", "stages.fit.train.steps=3"]  # a section, then a key inside it
    assert cli.main(["validate", str(path), *layered]) == 0


MERGES = """\
name: t
stages:
  fit:
    kind: testing.fit
    task: toy/agreement
    train: &fast {steps: 2, batch_size: 8}
  second:
    kind: testing.fit
    task: toy/agreement
    train:
      <<: *fast
      <<: {lr: 0.5}
"""


def test_two_merge_keys_in_one_mapping_are_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """PyYAML keeps only the last `<<` of a mapping, silently: `lr: 0.5` replaced the whole anchor."""
    path = write_recipe(tmp_path, MERGES)
    assert cli.main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert (
        f"{path.resolve()}:12:7: a second '<<' merge key in this mapping (the first is at line 11); "
        "merge several mappings with one key: `<<: [*a, *b]`" in err
    )
    path.write_text(MERGES.replace("      <<: *fast\n      <<: {lr: 0.5}", "      <<: [*fast, {lr: 0.5}]"))
    assert cli.main(["validate", str(path)]) == 0


def test_a_merge_of_a_scalar_does_not_hide_the_other_problems(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`<<: 5` stopped the validation: the file's other mistakes were reported one run later."""
    text = MERGES.replace("      <<: *fast\n      <<: {lr: 0.5}", "      <<: 5\n      lr: fast")
    path = write_recipe(tmp_path, text.replace("name: t\n", "name: t\nsed: 1\n"))
    assert cli.main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    where = path.resolve()
    assert f"{where}:12:11: a '<<' merge needs a mapping or a list of mappings, got int 5" in err
    assert f"{where}:2:1: unknown top-level key 'sed'" in err
    assert f"{where}:13:11: stages.second.train.lr: expected a number, got str 'fast'" in err
    assert "3 problems found" in err
    path.write_text(GOOD.replace("seed: 1\n", "seed: 1\nseed: 2\n").replace("lr: 3e-4", "lr: fast"))
    assert cli.main(["validate", str(path)]) == 2  # a duplicate key leaves a tree as well defined
    err = capsys.readouterr().err
    assert "duplicate key 'seed'" in err and "lr: expected a number" in err


def test_cross_field_errors_name_the_override_that_took_part(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A check between keys blamed the file's line only, though the file alone was valid."""
    path = write_recipe(tmp_path, GOOD)
    assert cli.main(["validate", str(path), "stages.fit.train.grad_accum=3"]) == 2
    err = capsys.readouterr().err
    assert (
        f"{path.resolve()}:8:7: stages.fit.train: batch_size 8 is not a multiple of grad_accum 3 "
        "(with command-line override stages.fit.train.grad_accum=3)" in err
    ), err
    path.write_text(GOOD.replace("      steps: 2\n", "      steps: 4\n      warmup_steps: 3\n"))
    assert cli.main(["validate", str(path), "stages.fit.train.steps=2"]) == 2  # a FieldError at the file's key
    err = capsys.readouterr().err
    assert (
        f"{path.resolve()}:9:7: stages.fit.train.warmup_steps: 3 is more than train.steps (2)" in err
        and err.rstrip().splitlines()[0].endswith("(with command-line override stages.fit.train.steps=2)")
    ), err
    path.write_text(GOOD.replace("      batch_size: 8", "      batch_size: 8\n      grad_accum: 3"))
    assert cli.main(["validate", str(path), "stages.fit.train.lr=0.1"]) == 2  # the file's own mistake
    assert "(with command-line override stages.fit.train.lr=0.1)" in capsys.readouterr().err  # said, not blamed
    assert cli.main(["validate", str(path)]) == 2
    assert "command-line override" not in capsys.readouterr().err


def test_show_marks_one_overridden_list_item_not_the_whole_list(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`show` printed the list as one flow line, attributed to the file, with the override inside."""
    set_default_host(make_host(autoload=True))
    path = write_recipe(
        tmp_path,
        "name: s\nstages:\n  corpus: {kind: toy.corpus, sentences: 50}\n"
        "  vocab: {kind: transformer.vocab, files: corpus.text, size: 200}\n"
        "  finetune:\n    kind: transformer.finetune\n    tokenizer: vocab.tokenizer\n"
        "    tasks: [{name: toy/agreement, train_size: 64, dev_size: 16}]\n",
    )
    override = "stages.finetune.tasks.0.train_size=10"
    assert cli.main(["show", str(path), override]) == 0
    out = capsys.readouterr().out
    where = path.resolve()
    assert (
        f"    tasks:  # {where}:8:12\n      - name: toy/agreement  # {where}:8:20\n        seed: 13  # default\n" in out
    )
    assert f"        train_size: 10  # override {override!r}\n        dev_size: 16  # {where}:8:61\n" in out
    assert yaml.safe_load(out)["stages"]["finetune"]["tasks"][0]["train_size"] == 10
    assert cli.main(["show", str(path)]) == 0  # written in one place: one line, as before
    assert (
        f"    tasks: [{{dev_size: 16, max_words: 25, name: toy/agreement, seed: 13, test_size: 500, train_size: 64}}]  # {where}:8:12\n"
        in capsys.readouterr().out
    )
    path.write_text(GOOD.replace("      lr: 3e-4", "      no_decay: [bias, norm]"))  # a list of strings
    set_default_host(make_host(["xfer.testing.plugin"]))
    assert cli.main(["show", str(path), "stages.fit.train.no_decay.1=layernorm"]) == 0
    out = capsys.readouterr().out
    assert f"      no_decay:  # {path.resolve()}:10:17\n        - bias  # {path.resolve()}:10:18\n" in out
    assert "        - layernorm  # override 'stages.fit.train.no_decay.1=layernorm'\n" in out
