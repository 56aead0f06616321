"""Validation gaps (review 43): `xfer validate` passed a one-step stage under a warmup that the trainer
refuses at run time, and `XFER_PLUGINS` of blanks or commas only loaded no installed plugin."""

from __future__ import annotations

from pathlib import Path

import pytest

from xfer.core import cli
from xfer.core.optim import lr_multiplier
from xfer.core.plugins import PluginHost, set_default_host
from xfer.core.recipes.schema import Validator
from xfer.core.recipes.yamlsrc import parse_text
from xfer.core.train_config import TrainConfig
from xfer.testing import make_host, write_recipe

from .test_plugins import GOOD as GOOD_PLUGIN
from .test_plugins import fake_distribution

SCHEDULES = ["linear", "warmup_on_decay", "constant", "constant_warmup", "inverse_sqrt_t"]
WARMUP_ONLY = [s for s in SCHEDULES if s != "constant"]


def _problems(text: str) -> list[tuple[int, int, str]]:
    """`text` validated as a `train:` section: (line, column, message) of each problem."""
    validator = Validator()
    validator.dataclass(parse_text(text, "train.yaml"), TrainConfig, "train")
    return sorted((d.location.line, d.location.col, d.message) for d in validator.diagnostics)


# --- 1. one training step under a warmup -------------------------------------------------------------


@pytest.mark.parametrize("schedule", WARMUP_ONLY)
def test_one_step_under_a_warmup_is_refused_at_the_warmup_line(schedule: str) -> None:
    """The trainer refuses `steps: 1` under a warmup (its only step would train at lr 0); validation
    passed it, so the error came only after the earlier stages of a run had trained."""
    assert _problems(f"schedule: {schedule}\nsteps: 1\nwarmup_steps: 1\n") == [
        (
            3,
            1,
            "train.warmup_steps: 1 with train.steps 1: a warmup starts at learning rate 0, so under the "
            f"{schedule!r} schedule the only step would train at learning rate 0 and change no weight; set "
            "train.warmup_steps: 0 (or train more steps)",
        )
    ]


def test_a_warmup_fraction_rounded_to_the_one_step_is_refused_at_its_line() -> None:
    """0.5 of 1 step rounds up to 1 warmup step (`TrainConfig.warmup_for`, the trainer's rounding); 0.4 to 0."""
    [(line, col, message)] = _problems("steps: 1\nwarmup_fraction: 0.5\n")
    assert (line, col) == (2, 1)
    assert message.startswith("train.warmup_fraction: 0.5 (rounded to 1 warmup step) with train.steps 1: ")
    assert _problems("steps: 1\nwarmup_fraction: 0.4\n") == []


def test_what_trains_or_is_known_only_at_run_time_passes_validation() -> None:
    for fine in (
        "steps: 1\nwarmup_steps: 0\n",
        "steps: 1\nwarmup_steps: 1\nschedule: constant\n",  # no warmup there: lr is train.lr from the first step
        "steps: 1\nwarmup_steps: 1\nlr: 0\n",  # lr 0 asked for
        "steps: 2\nwarmup_steps: 2\n",  # the second step trains at half the lr
        "epochs: 1\nwarmup_steps: 1\n",  # steps from the data: the trainer checks them
        "epochs: 1\nwarmup_fraction: 1\n",
    ):
        assert _problems(fine) == [], fine


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("warmup", [0, 1, 2])
@pytest.mark.parametrize("total", [1, 2, 3])
def test_the_shared_condition_is_the_schedule_s_own(schedule: str, warmup: int, total: int) -> None:
    """`trains_at_lr_0_only` (torch-free, for validation and the trainer) says what `lr_multiplier` does:
    every step's multiplier is 0."""
    config = TrainConfig(steps=total, warmup_steps=warmup, schedule=schedule)  # type: ignore[arg-type]
    every_step_at_0 = all(lr_multiplier(schedule, step, total, warmup) == 0 for step in range(total))  # type: ignore[arg-type]
    assert config.trains_at_lr_0_only(total, warmup) == every_step_at_0


@pytest.fixture
def testing_host():
    set_default_host(make_host(["xfer.testing.plugin"]))
    yield
    set_default_host(None)


@pytest.mark.usefixtures("testing_host")
def test_xfer_validate_refuses_it_at_the_recipe_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recipe = (
        "name: t\nstages:\n  fit:\n    kind: testing.fit\n    task: toy/agreement\n"
        "    train:\n      steps: 1\n      warmup_steps: 1\n"
    )
    path = write_recipe(tmp_path, recipe)
    assert cli.main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path.resolve()}:8:7: stages.fit.train.warmup_steps: 1 with train.steps 1: a warmup starts" in err, err
    assert "Traceback" not in err
    assert cli.main(["validate", str(path), "stages.fit.train.warmup_steps=0"]) == 0, capsys.readouterr().err


# --- 2. XFER_PLUGINS of blanks ---------------------------------------------------------------------------


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Two installed plugins, alpha and beta, and no plugin switch set."""
    path = tmp_path / "site"
    path.mkdir()
    monkeypatch.syspath_prepend(str(path))
    for name in ("alpha", "beta"):
        fake_distribution(path, f"xfer-{name}", "1.0", name, f"{name}_plugin", GOOD_PLUGIN.format(ns=name))
    for variable in ("XFER_PLUGINS", "XFER_DISABLE_PLUGIN_AUTOLOAD", "XFER_PLUGIN_MODULES"):
        monkeypatch.delenv(variable, raising=False)
    return path


@pytest.mark.parametrize("blank", ["", " ", ",", " , ,", "\t"])
def test_xfer_plugins_of_blanks_only_loads_every_plugin_as_unset(
    site: Path, monkeypatch: pytest.MonkeyPatch, blank: str
) -> None:
    """`XFER_PLUGINS=" "` or `","` loaded no installed plugin, while `""` loaded them all."""
    everything = set(PluginHost().plugins)
    assert {"alpha", "beta"} <= everything
    monkeypatch.setenv("XFER_PLUGINS", blank)
    host = PluginHost()
    assert host.allow is None
    assert set(host.plugins) == everything


def test_blank_items_in_xfer_plugins_mean_nothing(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XFER_PLUGINS", "alpha, ,beta,")
    host = PluginHost()
    assert host.allow == {"alpha", "beta"}
    assert host.find("stage", "alpha.work") and host.find("stage", "beta.work")
    assert not [name for name, record in host.plugins.items() if record.error], "no blank name taken for a typo"
    monkeypatch.setenv("XFER_PLUGINS", " , alpha ,")
    host = PluginHost()
    assert host.allow == {"alpha"} and "beta" not in host.plugins
