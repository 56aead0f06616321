"""The `electra.pretrain` stage end to end on the toy corpus: outputs in xfer and HF layouts (loadable
by `transformers` with equal outputs), `init:` continuation, every objective, compute budgets,
bad input before training, and the conformance kit (determinism, SIGKILL-and-resume)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from xfer.core.errors import RecipeError, UserError
from xfer.core.hookspecs import hookimpl
from xfer.core.recipes.recipe import load_recipe
from xfer.core.runs.preflight import check_data
from xfer.core.runs.runner import run_recipe
from xfer.core.specs import ComponentSpec
from xfer.electra.config import MLMConfig, RTDConfig
from xfer.electra.objective import MLMObjective, PretrainingObjective, RTDObjective
from xfer.testing import ComponentConformance, make_host, run_recipe_file, write_recipe
from xfer.transformer.modelio import load_model_dir

from .electra_recipes import TINY, pretrain_recipe

RECIPE = pretrain_recipe(
    600, "{name: electra.rtd}", "{steps: 8, batch_size: 8, warmup_steps: 2, log_every: 1, checkpoint_every: 3}"
)


def host():
    return make_host(autoload=True)


class TestElectraConformance(ComponentConformance):
    component = ("objective", "electra.rtd")
    config_path = "stages.fit.objective"
    recipe = RECIPE


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("pretrained")
    run_recipe_file(write_recipe(root, RECIPE), root / "run", host())
    return root / "run" / "fit" / "outputs"


def _continued(pretrained: Path, *lines: str, max_length: int = 32) -> str:
    """A recipe whose one stage, `more`, pre-trains one step on the `pretrained` fixture's corpus,
    with `lines` (`init: ...`, `objective: ...`) added to the stage."""
    corpus = pretrained.parent.parent / "corpus/outputs/text/toy.txt"
    added = "".join(f"    {line}\n" for line in lines)
    return (
        f"stages:\n  more:\n    kind: electra.pretrain\n    corpus: {{files: {corpus}}}\n{added}"
        f"    max_length: {max_length}\n    train: {{steps: 1, batch_size: 8, warmup_steps: 0}}\n"
    )


def _batch(tokenizer_dir: Path) -> dict[str, torch.Tensor]:
    from xfer.transformer.tokenization import WordPieceTokenizer

    tokenizer = WordPieceTokenizer.from_dir(tokenizer_dir)
    encoded = [tokenizer.encode_pair(t, None, max_length=32) for t in ("the dog sees a cat .", "a cat runs")]
    width = max(len(e.input_ids) for e in encoded)
    ids = torch.zeros(len(encoded), width, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, e in enumerate(encoded):
        ids[row, : len(e.input_ids)] = torch.tensor(e.input_ids)
        mask[row, : len(e.input_ids)] = 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids)}


def test_outputs_load_in_transformers_with_equal_outputs(pretrained: Path) -> None:
    transformers = pytest.importorskip("transformers")
    batch = _batch(pretrained / "tokenizer")
    real = batch["attention_mask"].bool()
    disc = load_model_dir(pretrained / "discriminator")
    assert disc.meta["max_length"] == 32 and disc.meta["objective"] == "electra.rtd"  # what scoring reads
    encoder, head = disc.build("encoder").eval(), disc.build("head").eval()
    hf_disc = transformers.ElectraForPreTraining.from_pretrained(pretrained / "discriminator" / "hf").eval()
    for output in ("discriminator", "generator"):  # which head the HF folder holds: PLL scoring checks it
        assert json.loads((pretrained / output / "hf" / "config.json").read_text())["xfer_objective"] == "electra.rtd"
    with torch.no_grad():
        hidden = encoder(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]).last_hidden_state
        ours = head(hidden[real])
        theirs = hf_disc(**batch).logits[real]
    assert torch.allclose(ours, theirs, atol=1e-5), "ElectraForPreTraining gives the discriminator's logits"
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(pretrained / "discriminator" / "hf")
    assert hf_tokenizer.model_max_length == hf_disc.config.max_position_embeddings

    gen = load_model_dir(pretrained / "generator")
    g_encoder, g_head = gen.build("encoder").eval(), gen.build("head").eval()
    hf_gen = transformers.ElectraForMaskedLM.from_pretrained(pretrained / "generator" / "hf").eval()
    with torch.no_grad():
        hidden = g_encoder(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]).last_hidden_state
        ours = g_head(hidden[real], g_encoder.embeddings.word.weight)
        theirs = hf_gen(**batch).logits[real]
    assert torch.allclose(ours, theirs, atol=1e-4), "ElectraForMaskedLM gives the generator's logits"
    assert hf_gen.config.hidden_size == 16 and hf_gen.config.embedding_size == 32, "generator: 1/4 width, tied size"
    shared = [k for k in disc.state_dicts["encoder"] if k.startswith("embeddings.")]
    assert shared and all(torch.equal(disc.state_dicts["encoder"][k], gen.state_dicts["encoder"][k]) for k in shared), (
        "the whole embedding block is shared"
    )


def test_finetune_and_init_take_the_discriminator(pretrained: Path, tmp_path: Path) -> None:
    """Continue pre-training from the HF export with lr 0: weights in = weights out (fresh optimizer)."""
    text = f"""
name: again
stages:
  more:
    kind: electra.pretrain
    corpus: {{files: {pretrained.parent.parent / "corpus/outputs/text/toy.txt"}}}
    init: {pretrained / "discriminator" / "hf"}
    init_generator: {pretrained / "generator" / "hf"}
    max_length: 32
    train: {{steps: 2, batch_size: 8, lr: 0.0, warmup_steps: 0, log_every: 1}}
"""
    run_recipe_file(write_recipe(tmp_path, text), tmp_path / "run", host())
    before = load_model_dir(pretrained / "discriminator").state_dicts["encoder"]
    after = load_model_dir(tmp_path / "run/more/outputs/discriminator").state_dicts["encoder"]
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)
    gen_before = load_model_dir(pretrained / "generator").state_dicts["head"]
    gen_after = load_model_dir(tmp_path / "run/more/outputs/generator").state_dicts["head"]
    assert all(torch.equal(gen_before[k], gen_after[k]) for k in gen_before)
    state = json.loads((tmp_path / "run/more/checkpoints" / "step-0000002" / "state.json").read_text())
    assert state["step"] == 2 and state["total_steps"] == 2, "a new schedule, not a resume of the old one"


@pytest.mark.parametrize("init", ["generator", "generator/hf"])
def test_the_mlm_baseline_continues_from_a_generator(pretrained: Path, tmp_path: Path, init: str) -> None:
    """An ELECTRA generator is a masked LM: `electra.mlm` continues from it, head included (it was
    refused as "the generator of an electra.rtd pre-training", which the other objectives rightly
    say). lr 0: weights in = weights out."""
    text = _continued(pretrained, f"init: {pretrained / init}", "objective: electra.mlm")
    text = text.replace("warmup_steps: 0}", "warmup_steps: 0, lr: 0.0}")
    run_recipe_file(write_recipe(tmp_path, text), tmp_path / "run", host())
    before = load_model_dir(pretrained / "generator").state_dicts
    after = load_model_dir(tmp_path / "run/more/outputs/discriminator").state_dicts
    for part in ("encoder", "head"):
        assert before[part].keys() == after[part].keys()
        assert all(torch.equal(before[part][k], after[part][k]) for k in before[part]), part


@pytest.mark.parametrize(
    ("init", "init_generator", "wanted"),
    [
        (
            "generator",
            None,
            "init: .*generator is the generator of an electra.rtd pre-training \\(its xfer_model.json\\), not a "
            "discriminator: give the `discriminator` output next to it",
        ),
        ("discriminator", "discriminator", "init_generator: .* is the discriminator of an electra.rtd pre-training"),
        (
            "generator/hf",
            None,
            "init: .*generator/hf is the generator of an .* pre-training \\(its config.json: ElectraForMaskedLM\\)",
        ),
        (
            "discriminator",
            "discriminator/hf",
            "init_generator: .*hf is the discriminator of an .* \\(its config.json: Electra",
        ),
        (
            "discriminator",
            "ElectraModel",
            "init_generator: .*ElectraModel: its encoder has hidden 64, 2 heads, .* builds hidden 16, 1 head, .*, and "
            "no generator size, layers and tying builds its shape from this discriminator",
        ),
    ],
    ids=["generator-as-init", "discriminator-as-init_generator", "hf-generator-as-init", "hf-discriminator", "other"],
)
def test_init_checkpoints_of_the_wrong_role_are_refused(
    pretrained: Path, tmp_path: Path, init: str, init_generator: str | None, wanted: str
) -> None:
    """A generator given as `init:` was pre-trained on as if it were the discriminator (silently, at a
    quarter of the width); a discriminator given as `init_generator:` was a RuntimeError traceback."""
    text = _continued(pretrained, f"init: {pretrained / init}")
    if init_generator == "ElectraModel":  # a HF folder that names no role: checked by its sizes
        shutil.copytree(pretrained / "discriminator/hf", tmp_path / init_generator)
        config = json.loads((tmp_path / init_generator / "config.json").read_text())
        (tmp_path / init_generator / "config.json").write_text(
            json.dumps({**config, "architectures": [init_generator]})
        )
        text += f"    init_generator: {tmp_path / init_generator}\n"
    elif init_generator is not None:
        text += f"    init_generator: {pretrained / init_generator}\n"
    with pytest.raises(UserError, match=wanted):
        run_recipe_file(write_recipe(tmp_path, text), tmp_path / "run", host())
    assert not (tmp_path / "run/more/checkpoints").exists() or not any((tmp_path / "run/more/checkpoints").iterdir())


def _as_electra_model(hf_folder: Path, target: Path) -> Path:
    """A copy of an HF export that says ElectraModel: the encoder's tensors, no head claimed."""
    shutil.copytree(hf_folder, target)
    config = json.loads((target / "config.json").read_text())
    (target / "config.json").write_text(json.dumps({**config, "architectures": ["ElectraModel"]}))
    return target


def test_init_checkpoints_without_head_weights_are_said_or_refused(
    pretrained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The discriminator's head left at random init was silent (a BERT MLM head, an ElectraModel);
    a generator checkpoint without its MLM head trained its loaded layers under a random output
    layer, silently."""
    base = _continued(pretrained)
    bare_disc = _as_electra_model(pretrained / "discriminator/hf", tmp_path / "disc-model")
    run_recipe_file(write_recipe(tmp_path, base + f"    init: {bare_disc}\n"), tmp_path / "a", host())
    note = f"init: {bare_disc} has no electra.discriminator_head weights that fit this objective's head"
    assert note in capsys.readouterr().err and note in (tmp_path / "a/more/report.md").read_text()

    bare_gen = _as_electra_model(pretrained / "generator/hf", tmp_path / "gen-model")
    text = base + f"    init: {pretrained / 'discriminator'}\n    init_generator: {bare_gen}\n"
    with pytest.raises(UserError, match=f"init_generator: {bare_gen} has no masked-LM head"):
        run_recipe_file(write_recipe(tmp_path, text), tmp_path / "b", host())


@pytest.mark.parametrize("tied", [True, False])
def test_an_init_generator_missing_weights_names_them_not_the_tied_embeddings(
    pretrained: Path, tmp_path: Path, tied: bool
) -> None:
    """A generator checkpoint without its layer 0 was reported as "missing ['embeddings.word.weight',
    ...]" (the tied embeddings, which are the discriminator's), hiding the layer; an untied generator
    whose checkpoint lacks its embeddings silently kept random ones."""
    import shutil

    from safetensors.torch import load_file, save_file

    damaged = tmp_path / "generator"
    shutil.copytree(pretrained / "generator", damaged)
    weights = load_file(damaged / "model.safetensors")
    gone = "encoder.layers.0." if tied else "encoder.embeddings."  # (its own are narrower: drop them all)
    save_file({k: v for k, v in weights.items() if not k.startswith(gone)}, damaged / "model.safetensors")
    if not tied:  # what an untied generator's checkpoint records: embeddings as wide as its hidden layers
        meta = json.loads((damaged / "xfer_model.json").read_text())
        config = meta["modules"]["encoder"]["config"]
        config["embedding_size"] = config["hidden_size"]
        (damaged / "xfer_model.json").write_text(json.dumps(meta))
    objective = "{name: electra.rtd}" if tied else "{name: electra.rtd, generator: {tie_embeddings: false}}"
    text = _continued(
        pretrained, f"init: {pretrained / 'discriminator'}", f"init_generator: {damaged}", f"objective: {objective}"
    )
    with pytest.raises(UserError) as caught:
        run_recipe_file(write_recipe(tmp_path, text), tmp_path / "run", host())
    message = str(caught.value)
    assert message.startswith(f"init_generator: {damaged} does not match the generator: missing [")
    if tied:
        assert "'layers.0." in message and "embeddings" not in message
    else:
        assert "missing ['embeddings.word.weight'" in message


def test_an_init_generator_of_another_size_says_which_generator_settings_fit_it(
    pretrained: Path, tmp_path: Path
) -> None:
    """Continuing from a released pair whose generator is not the recipe's size (Google's
    ELECTRA-Small generator is as wide as its discriminator) said only "size mismatch for
    layers.0.qkv.weight"; now the error gives both shapes and the settings that build the checkpoint's."""
    text = _continued(
        pretrained,
        f"init: {pretrained / 'discriminator'}",
        f"init_generator: {pretrained / 'generator'}",
        "objective: {name: electra.rtd, generator: {size: 0.5}}",
    )
    with pytest.raises(UserError) as caught:
        run_recipe_file(
            write_recipe(tmp_path, text), tmp_path / "run", host(), preflight=False
        )  # the stage's own check
    assert str(caught.value) == (
        f"init_generator: {pretrained / 'generator'}: its encoder has hidden 16, 1 head, FFN 32, 1 layer, embeddings "
        "32; objective.generator {size: 0.5, layers: 1, tie_embeddings: true} builds hidden 32, 1 head, FFN 64, 1 layer, "
        "embeddings 32 next to this discriminator (hidden 64, 2 heads, FFN 128, 1 layer, embeddings 32): to continue "
        "from it, set objective.generator {size: 0.25, layers: 1, tie_embeddings: true}"
    )
    assert not (tmp_path / "run/more/checkpoints").exists(), "refused before the first step"


def test_init_generator_without_init_is_refused(tmp_path: Path) -> None:
    """It was silently ignored: the generator started from random weights."""
    text = RECIPE.replace("    max_length: 32\n", f"    max_length: 32\n    init_generator: {tmp_path}\n")
    with pytest.raises(RecipeError, match=r"init_generator: is only read together with `init:`"):
        load_recipe(write_recipe(tmp_path, text), host=host())


def test_a_tokenizer_given_as_a_checkpoint_is_refused_at_validation(tmp_path: Path) -> None:
    """`init: vocab.tokenizer` passed `xfer validate` and failed once the stages before had run."""
    text = RECIPE.replace("    max_length: 32\n", "    max_length: 32\n    init: vocab.tokenizer\n")
    text = text.replace("    model: tiny\n    encoder: " + TINY + "\n", "")
    with pytest.raises(RecipeError) as caught:
        load_recipe(write_recipe(tmp_path, text), host=host())
    [problem] = caught.value.diagnostics
    assert (problem.location.line, problem.location.col) == (12, 11), problem
    assert problem.message == "stages.fit.init: vocab.tokenizer is a tokenizer; init takes a model"


@pytest.mark.parametrize(
    ("objective", "modules"),
    [
        ("{name: electra.mlm}", {"discriminator": {"encoder", "head"}, "generator": {"encoder", "head"}}),
        ("{name: electric.nce}", {"discriminator": {"encoder", "head"}, "generator": {"ltr", "rtl", "head"}}),
        ("{name: electra.rtd, generator: {kind: unigram}}", {"discriminator": {"encoder", "head"}}),
    ],
    ids=["mlm", "electric", "unigram"],
)
def test_every_objective_trains_and_exports(objective: str, modules: dict, tmp_path: Path) -> None:
    path = write_recipe(tmp_path, RECIPE)
    run_recipe_file(path, tmp_path / "run", host(), [f"stages.fit.objective={objective}", "stages.fit.train.steps=2"])
    outputs = tmp_path / "run/fit/outputs"
    for output, names in modules.items():
        assert set(load_model_dir(outputs / output).modules) == names
    metrics = [json.loads(line) for line in (tmp_path / "run/fit/metrics.jsonl").read_text().splitlines()]
    train = [m for m in metrics if m["split"] == "train"]
    assert train and all(m["tokens_per_s"] > 0 for m in train)
    assert all(0.01 < m["token_spread"] <= 1.0 for m in train), "every training log probes the main encoder"


def test_budget_buys_its_steps(tmp_path: Path) -> None:
    path = write_recipe(tmp_path, RECIPE)
    overrides = [
        "stages.fit.budget={tokens: 1000}",
        "stages.fit.train.steps=null",
        "stages.fit.train.checkpoint_every=100",
    ]
    run_recipe_file(path, tmp_path / "run", host(), overrides)
    meta = json.loads((tmp_path / "run/fit/outputs/discriminator/xfer_model.json").read_text())
    assert meta["training_steps"] == int(1000 // meta["tokens_per_step"]) >= 1
    assert meta["flops_total"] == pytest.approx(meta["flops_per_step"] * meta["training_steps"])
    report = (tmp_path / "run/fit/report.md").read_text()
    assert f"{meta['training_steps']} steps" in report and "generator softmax (masked positions)" in report


def test_epochs_given_alone_train_that_many_passes_not_the_default_steps(tmp_path: Path) -> None:
    """The stage's default sets 1M steps; `train: {epochs: 2}` means two passes over the packed corpus."""
    path = write_recipe(tmp_path, RECIPE.replace("train: {steps: 8,", "train: {epochs: 2,"))
    assert load_recipe(path, host=host()).stages["fit"].config.train.steps is None
    run_recipe_file(path, tmp_path / "run", host(), ["stages.fit.train.checkpoint_every=1000"])
    meta = json.loads((tmp_path / "run/fit/outputs/discriminator/xfer_model.json").read_text())
    metrics = [json.loads(line) for line in (tmp_path / "run/fit/metrics.jsonl").read_text().splitlines()]
    last = [m for m in metrics if m["split"] == "train"][-1]
    assert last["step"] == meta["training_steps"] > 2
    assert last["epoch"] == pytest.approx(2.0), "as many steps as two passes over the packed examples"


def test_bad_input_is_reported_before_any_training(tmp_path: Path) -> None:
    (tmp_path / "blank.txt").write_text("\n\n  \n")
    (tmp_path / "vocab").mkdir()
    (tmp_path / "vocab/vocab.txt").write_text(
        "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *map(str, range(95))])
    )
    checkpoint = tmp_path / "ckpt"
    checkpoint.mkdir()
    (checkpoint / "config.json").write_text(json.dumps({"model_type": "electra", "vocab_size": 50}))
    text = """
stages:
  fit:
    kind: electra.pretrain
    corpus: {files: blank.txt}
    tokenizer: vocab
    init: ckpt
    budget: {flops: 10}
"""
    recipe = load_recipe(write_recipe(tmp_path, text), host=host())
    with pytest.raises(RecipeError) as caught:
        check_data(recipe, host())
    messages = "\n".join(str(d) for d in caught.value.diagnostics)
    assert "blank.txt" in messages and "no text" in messages
    assert "50 token embeddings but the tokenizer" in messages and "100 tokens" in messages
    for bad, wanted in (
        ("{name: electra.rtd, generator: {size: 2}}", "must be at most 1"),
        ("{name: electric.nce, generator: {kind: mlm}}", "two_tower"),
    ):
        with pytest.raises(RecipeError, match=wanted):
            load_recipe(write_recipe(tmp_path, RECIPE), [f"stages.fit.objective={bad}"], host())
    with pytest.raises(RecipeError, match=r"budget.flops: must be a finite number, got inf"):
        load_recipe(write_recipe(tmp_path, RECIPE), ["stages.fit.budget={flops: .inf}"], host())
    with pytest.raises(RecipeError, match=r"data_cache: .*blank.txt is a file; give a folder"):  # was FileExistsError
        load_recipe(write_recipe(tmp_path, RECIPE), [f"stages.fit.data_cache={tmp_path / 'blank.txt'}"], host())
    with pytest.raises(RecipeError, match="no file matches"):
        load_recipe(
            write_recipe(tmp_path, RECIPE.replace("files: corpus.text}", "files: [nothing*.txt]}")), host=host()
        )
    with pytest.raises(RecipeError, match="'mini' would be ignored: with `init:`"):
        load_recipe(write_recipe(tmp_path, text + "    model: mini\n"), host=host())


def test_an_objective_left_out_is_the_objective_named_without_options(tmp_path: Path) -> None:
    """Omitted, written by name, or written with its defaults: one resolved config, one fingerprint
    (so `xfer status`, which re-reads the resolved recipe, agrees with `xfer run`)."""
    from xfer.core.runs.fingerprint import FileHasher, stage_signature

    fingerprints = []
    for objective in ("", "    objective: electra.rtd\n", "    objective: {name: electra.rtd, mask_prob: 0.15}\n"):
        text = RECIPE.replace("    objective: {name: electra.rtd}\n", objective)
        recipe = load_recipe(write_recipe(tmp_path, text), host=host())
        plan = recipe.stages["fit"]
        assert recipe.resolved()["stages"]["fit"]["objective"]["generator"]["size"] == 0.25
        upstream: dict[str, str] = {}
        for name, stage in recipe.stages.items():
            upstream[name] = stage_signature(stage, recipe.seed, upstream, host(), FileHasher()).fingerprint
        fingerprints.append(upstream["fit"])
        assert plan.config.objective.config is not None
    assert len(set(fingerprints)) == 1


@pytest.mark.skipif(
    shutil.which("torchrun") is None and not Path(sys.executable).with_name("torchrun").exists(),
    reason="torchrun not installed",
)
def test_two_processes_follow_the_single_process_loss_curve(tmp_path: Path) -> None:
    """Masks and dropout are drawn per rank, so curves match in expectation, not bitwise."""
    path = write_recipe(
        tmp_path, RECIPE.replace("steps: 8,", "steps: 16,").replace("checkpoint_every: 3", "checkpoint_every: 16")
    )
    run_recipe_file(path, tmp_path / "single", host(), ["stages.fit.train.log_every=8"])
    torchrun = shutil.which("torchrun") or str(Path(sys.executable).with_name("torchrun"))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    command = [torchrun, "--standalone", "--nproc_per_node=2", "-m", "xfer.core.cli", "run", str(path)]
    command += ["--run-dir", str(tmp_path / "ddp"), "stages.fit.train.log_every=8"]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]

    def curve(run: str) -> dict[int, float]:
        lines = (tmp_path / run / "fit/metrics.jsonl").read_text().splitlines()
        return {m["step"]: m["loss"] for m in map(json.loads, lines) if m["split"] == "train"}

    single, ddp = curve("single"), curve("ddp")
    assert single.keys() == ddp.keys() == {8, 16}
    for step in single:
        assert ddp[step] == pytest.approx(single[step], rel=0.15), (step, single, ddp)
    assert ddp[16] < ddp[8] and single[16] < single[8]


def _tool(name: str) -> object:
    """Import tools/NAME.py (the probes put tools/ on sys.path themselves, to import each other)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parents[2] / "tools" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there (the test alone failed without it)
    spec.loader.exec_module(module)
    return module


def test_probe_detection_tool_reads_a_pretraining_stage(pretrained: Path, capsys: pytest.CaptureFixture) -> None:
    """Keeps tools/probe_detection.py from rotting (it reaches into the objective's internals)."""
    module = _tool("probe_detection")
    assert module.main([str(pretrained.parent), "--examples", "8"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4 and all("discriminator AUC" in line for line in lines)
    assert module.main([str(pretrained.parent.parent)]) == 2, "a run directory is not a stage directory"
    rows = module.layer_spreads(pretrained.parent, None, 8, 0)  # type: ignore[attr-defined]
    objective, _ = module.load_objective(pretrained.parent, None)  # type: ignore[attr-defined]
    assert [r[0] for r in rows] == ["embeddings"] + [f"layer {i}" for i in range(len(objective.discriminator.layers))]
    assert all(0.01 < r[1] <= 1.0 for r in rows), rows  # a freshly pre-trained toy model has not collapsed
    assert rows[0][2] is None and all(r[2] > 0 and r[3] > 0 for r in rows[1:]), rows
    capsys.readouterr()
    assert module.main([str(pretrained.parent), "--examples", "8", "--layers"]) == 0
    assert capsys.readouterr().out.count("\nlayer ") == len(rows) - 1


def test_probe_context_tool_trains_detectors_that_can_learn(pretrained: Path, capsys: pytest.CaptureFixture) -> None:
    """tools/probe_context.py is the control docs/results.md's stalled-discriminator finding rests
    on, so its noise and labels must be right: the width-5 convolution (which reads neighbours
    directly) must learn to detect unigram replacements well above chance. Labels misaligned with
    the replaced positions, or noise drawn from the wrong distribution, would keep it near 50."""
    module = _tool("probe_context")
    stage = pretrained.parent
    assert module.main([str(stage), "--steps", "1", "--detectors", "xfer,torch-post,torch-pre"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == ["xfer", "torch-post", "torch-pre"]
    curve = list(module.train_detector(stage, "conv", steps=150, batch_size=16, lr=3e-3, every=150, seed=0))
    assert curve[-1][0] == 150 and curve[-1][1] > 65.0, curve  # 73.6 here; ~50 if labels or noise were wrong
    for bad in (["--detectors", "xfer,lstm"], ["--detectors", ","], ["--init-std", "0"], ["--steps", "0"]):
        with pytest.raises(SystemExit):
            module.main([str(stage), *bad])
    assert module.main([str(stage.parent)]) == 2, "a run directory is not a stage directory"


def test_probe_context_agreement_noise_flips_verbs_a_local_detector_can_catch(pretrained: Path) -> None:
    """`--noise agreement` must flip present-tense verbs and label exactly those: the width-5
    convolution sees subject and verb together in most toy clauses, so it must get well above 50."""
    module = _tool("probe_context")
    curve = list(
        module.train_detector(pretrained.parent, "conv", 150, 16, 3e-3, 150, 0, noise="agreement")  # type: ignore[attr-defined]
    )
    assert curve[-1].step == 150 and curve[-1].auc > 80.0, curve  # 99.4 here; ~50 if labels missed the flips
    with pytest.raises(SystemExit):
        module.main([str(pretrained.parent), "--noise", "shuffled"])  # type: ignore[attr-defined]


def test_probe_agreement_counts_the_generators_replacements_at_verbs(
    pretrained: Path, capsys: pytest.CaptureFixture
) -> None:
    module = _tool("probe_agreement")
    assert module.main([str(pretrained.parent), "--examples", "32", "--sentences", "40"]) == 0  # type: ignore[attr-defined]
    out = capsys.readouterr().out
    assert "agreement error" in out and "no attractor" in out, out
    objective, tokenizer = _tool("probe_detection").load_objective(pretrained.parent, None)  # type: ignore[attr-defined]
    numbers, flips = module.present_forms(tokenizer)  # type: ignore[attr-defined]
    singular, plural = (numbers == 1).nonzero().squeeze(1), (numbers == 2).nonzero().squeeze(1)
    assert len(singular) == len(plural) > 0
    assert torch.equal(numbers[flips[singular]], torch.full_like(singular, 2)), "a flip must change the number"
    from probe_detection import examples_table  # type: ignore[import-not-found]

    counts = module.generator_replacements(objective, examples_table(pretrained.parent), numbers, 32, 0)  # type: ignore[attr-defined]
    assert counts.examples == 32 and counts.masked_verbs > 0
    assert counts.agreement_errors + counts.same_number + counts.other <= min(counts.masked_verbs, counts.replaced)
    assert module.main([str(pretrained.parent.parent)]) == 2, "a run directory is not a stage directory"  # type: ignore[attr-defined]


def test_probe_agreement_zero_shot_splits_verbs_by_attractor() -> None:
    """A detector that compares each verb with the nearest noun before it is right exactly when no
    noun of the other number intervenes: near 100 without an attractor, far below 50 with one. Pairs
    that flipped the wrong word, swapped labels or a wrong attractor split would break this."""
    module = _tool("probe_agreement")
    from xfer.core.toy.lexicon import ToyLexicon
    from xfer.transformer.tokenization import WordPieceTokenizer

    lexicon = ToyLexicon()
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted({w.lower() for w in lexicon.vocabulary()})]
    tokenizer = WordPieceTokenizer.from_vocab({w: i for i, w in enumerate(words)})
    numbers, _ = module.present_forms(tokenizer)  # type: ignore[attr-defined]
    noun_number = torch.zeros(len(words), dtype=torch.long)
    for i, word in enumerate(words):
        for info in lexicon.analyses(word) or lexicon.analyses(word.capitalize()):
            if info.tag in ("NN", "NNS", "NNP", "PRP"):
                noun_number[i] = 1 if info.number == "sg" else 2

    def nearest_noun(ids: torch.Tensor, attention: torch.Tensor) -> torch.Tensor:
        logits = torch.zeros(ids.shape)
        for row in range(ids.shape[0]):
            last = 0
            for t, token in enumerate(ids[row].tolist()):
                if numbers[token] and last and numbers[token] != last:
                    logits[row, t] = 1.0
                last = int(noun_number[token]) or last
        return logits

    pairs = module.agreement_pairs(tokenizer, 300)  # type: ignore[attr-defined]
    for pair in pairs:
        changed = [i for i, (a, b) in enumerate(zip(pair.original, pair.flipped, strict=True)) if a != b]
        assert changed == [pair.position]
    split = module.zero_shot(nearest_noun, pairs, tokenizer.pad_id)  # type: ignore[attr-defined]
    assert split["no attractor"][0] > 90.0 and split["attractor"][0] < 30.0, split  # 97.4 / 16.2 on 800 sentences
    assert split["no attractor"][1] > 0 and split["attractor"][1] > 0


@pytest.mark.parametrize(
    ("encoder", "wanted"),
    [
        ("{hidden_size: 101}", r"encoder\.hidden_size: must be a multiple of num_heads \(2\), got 101"),
        ("{num_heads: 0}", r"encoder\.num_heads: must be positive, got 0"),
        ("{max_position_embeddings: 16}", r"encoder\.max_position_embeddings: 16 positions do not cover max_length 32"),
        ("{type_vocab_size: 1}", r"encoder\.type_vocab_size: must be at least 2 \(two-segment examples"),
    ],
)
def test_encoder_overrides_the_encoder_refuses_are_recipe_errors(tmp_path: Path, encoder: str, wanted: str) -> None:
    """They passed `xfer validate` and `xfer run` failed with a traceback building the model (or an
    IndexError at the first step)."""
    path = write_recipe(tmp_path, RECIPE)
    with pytest.raises(RecipeError, match=wanted):
        load_recipe(path, [f"stages.fit.encoder={encoder}"], host())
    one_segment = ["stages.fit.encoder={type_vocab_size: 1}", "stages.fit.single_segment_prob=1.0"]
    assert load_recipe(path, one_segment, host()).stages["fit"].config.encoder["type_vocab_size"] == 1


def _tokenizer_folder(path: Path, lines: list[str]) -> Path:
    path.mkdir(parents=True)
    (path / "vocab.txt").write_text("\n".join(lines) + "\n")
    return path


def test_another_vocabulary_than_the_init_checkpoints_is_refused_before_training(
    pretrained: Path, tmp_path: Path
) -> None:
    """A tokenizer of the same size but other words was accepted (only sizes were compared): the
    output paired the checkpoint's embeddings with the new vocab.txt, so every id meant another word."""
    own = (pretrained / "tokenizer" / "vocab.txt").read_text().splitlines()
    swapped = [*own[:20], own[21], own[20], *own[22:]]
    _tokenizer_folder(tmp_path / "other", swapped)
    _tokenizer_folder(tmp_path / "prefix", own[:150])
    corpus = pretrained.parent.parent / "corpus/outputs/text/toy.txt"
    text = f"""
stages:
  more:
    kind: electra.pretrain
    corpus: {{files: {corpus}}}
    init: {pretrained / "discriminator"}
    tokenizer: other
    max_length: 32
    train: {{steps: 1, batch_size: 8, warmup_steps: 0}}
"""
    recipe = load_recipe(write_recipe(tmp_path, text), host=host())
    with pytest.raises(RecipeError) as caught:
        check_data(recipe, host())
    assert [str(d) for d in caught.value.diagnostics] == [
        f"{tmp_path / 'other/vocab.txt'}:21: token id 20 is {own[21]!r} here but {own[20]!r} in the init checkpoint's "
        f"vocabulary ({pretrained / 'discriminator/vocab.txt'}:21): the checkpoint was trained with another vocabulary, "
        "so its embeddings would stand for other words; use the checkpoint's own tokenizer (leave out `tokenizer:`) "
        "(stage 'more')"
    ]
    for fits in ("prefix", str(pretrained / "tokenizer")):
        check_data(
            load_recipe(write_recipe(tmp_path, text.replace("tokenizer: other", f"tokenizer: {fits}")), host=host())
        )
    hf = text.replace(str(pretrained / "discriminator"), str(pretrained / "discriminator" / "hf"))
    with pytest.raises(
        RecipeError, match=r"token id 20 is .* in the init checkpoint's vocabulary \(.*/hf/vocab.txt:21\)"
    ):
        check_data(load_recipe(write_recipe(tmp_path, hf), host=host()))


def test_an_init_generator_trained_with_another_vocabulary_is_refused_before_training(
    pretrained: Path, tmp_path: Path
) -> None:
    """Only `init:`'s vocabulary was compared with the tokenizer: a generator trained with other ids
    loaded without a word, its output bias standing for other tokens."""
    generator = tmp_path / "generator"
    shutil.copytree(pretrained / "generator", generator)
    own = (generator / "vocab.txt").read_text().splitlines()
    (generator / "vocab.txt").write_text("\n".join([*own[:20], own[21], own[20], *own[22:]]) + "\n")
    text = _continued(pretrained, f"init: {pretrained / 'discriminator'}", f"init_generator: {generator}")
    recipe = load_recipe(write_recipe(tmp_path, text), host=host())
    wanted = f"token id 20 is {own[20]!r} here but {own[21]!r} in the init_generator checkpoint's vocabulary"
    with pytest.raises(RecipeError, match=wanted):
        check_data(recipe, host())
    with pytest.raises(UserError, match=wanted):  # the stage itself, run without pre-flight
        run_recipe(recipe, tmp_path / "run", host=host(), log=lambda *a: None)


def test_encoder_overrides_the_tokenizer_contradicts_are_refused_before_training(tmp_path: Path) -> None:
    """`vocab_size: 10` under a 100-token tokenizer was an IndexError at the first step;
    `pad_token_id: 5` went silently into the exported HF config."""
    (tmp_path / "text.txt").write_text("the dog runs .\n" * 20)
    _tokenizer_folder(tmp_path / "tok", ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *map(str, range(95))])
    text = """
stages:
  fit:
    kind: electra.pretrain
    corpus: {files: text.txt}
    tokenizer: tok
    model: tiny
    max_length: 32
    encoder: {vocab_size: 10, pad_token_id: 5}
    train: {steps: 1, batch_size: 8, warmup_steps: 0}
"""
    with pytest.raises(RecipeError) as caught:
        check_data(load_recipe(write_recipe(tmp_path, text), host=host()), host())
    messages = "\n".join(str(d) for d in caught.value.diagnostics)
    assert (
        f"encoder.vocab_size 10 is less than the 100 tokens of the tokenizer ({tmp_path / 'tok/vocab.txt'})" in messages
    )
    assert "encoder.pad_token_id 5 is not the tokenizer's [PAD] id, 0" in messages


def test_warmup_longer_than_the_training_is_refused(tmp_path: Path) -> None:
    """The lr never reached its peak (a recipe run with `train.steps=100` kept its warmup of 300)."""
    path = write_recipe(tmp_path, RECIPE)
    with pytest.raises(RecipeError, match=r"train\.warmup_steps: 20 is more than train\.steps \(8\)"):
        load_recipe(path, ["stages.fit.train.warmup_steps=20"], host())
    with pytest.raises(RecipeError, match=r"train\.warmup_steps: 2 is more than the budget's 1 steps"):
        load_recipe(path, ["stages.fit.budget={steps: 1}"], host())
    # the constant schedule has no warmup: a stage default's warmup_steps above the budget is no problem there
    load_recipe(
        path,
        ["stages.fit.budget={steps: 1}", "stages.fit.train.steps=null", "stages.fit.train.schedule=constant"],
        host(),
    )
    # steps bought by a budget (or epochs) are known only when training starts: refused then, before step 1
    overrides = [
        "stages.fit.budget={tokens: 1000}",
        "stages.fit.train.steps=null",
        "stages.fit.train.warmup_steps=8",  # < 8 x 32 tokens a step
    ]
    with pytest.raises(UserError, match=r"train\.warmup_steps 8 is more than the [1-7] steps this stage trains"):
        run_recipe_file(path, tmp_path / "run", host(), overrides)
    assert not (tmp_path / "run/fit/checkpoints").exists()


# --- the corpus the examples are built from, and what the report says about it -------------------

FILE_RECIPE = f"""
name: lines
seed: 1
stages:
  fit:
    kind: electra.pretrain
    corpus: {{files: corpus.txt}}
    tokenizer: vocab
    model: tiny
    encoder: {TINY}
    max_length: 32
    export_hf: false
    train: {{steps: 2, batch_size: 4, warmup_steps: 1, log_every: 1, checkpoint_every: 100}}
"""


def _file_corpus(folder: Path, joined: bool) -> Path:
    """A corpus.txt (documents of 2-6 sentences; `joined`: one line per document) and a vocab/ for it."""
    import random

    from xfer.transformer.tokenization import WordPieceTokenizer

    rng = random.Random(0)
    words = ["the", "a", "dog", "cat", "saw", "big", "small", "ran", "home", "near", "tree", "river", "old"]
    documents = [
        [" ".join(rng.choices(words, k=rng.randint(4, 12))) + " ." for _ in range(rng.randint(2, 6))] for _ in range(80)
    ]
    text = "\n\n".join((" ".join(d) if joined else "\n".join(d)) for d in documents) + "\n"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "corpus.txt").write_text(text)
    WordPieceTokenizer.train([folder / "corpus.txt"], vocab_size=60).save(folder / "vocab")
    return write_recipe(folder, FILE_RECIPE)


def test_report_gives_the_data_and_warns_about_lines_longer_than_an_example(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """A corpus with a document per line loses most of its text to ELECTRA's truncation: say so
    (stderr and report.md), and give the examples and real tokens trained on."""
    run_recipe_file(_file_corpus(tmp_path, joined=True), tmp_path / "run", host())
    report = (tmp_path / "run/fit/report.md").read_text()
    (manifest_path,) = (tmp_path / "run/fit/data").glob("electra-examples-*/manifest.json")
    manifest = json.loads(manifest_path.read_text())
    stats, packing = manifest["statistics"], manifest["packing"]
    assert f"## Data\n\n{stats['examples']} packed examples, {stats['tokens']} real tokens" in report
    assert f"from {packing['lines']} lines of {packing['tokens']} tokens" in report
    assert packing["long_lines"] > 0
    warning = f"{packing['long_lines']} of the corpus's {packing['lines']} lines"
    assert f"## Warning\n\n{warning}" in report and "one sentence per line" in report
    assert f"warning: {warning}" in capsys.readouterr().err


def test_a_corpus_edited_after_the_run_fingerprinted_it_is_refused(tmp_path: Path, monkeypatch) -> None:
    """The runner signs the corpus into stage.json before the stage builds its examples; an edit in
    between would train on the new text under the old text's fingerprint (a later run on the old
    text would then skip the stage as done)."""
    from xfer.electra import data

    recipe = _file_corpus(tmp_path, joined=False)
    real = data.build_examples

    def edit_then_build(*args, **kwargs):
        with open(tmp_path / "corpus.txt", "a") as handle:
            handle.write("the big dog ran home .\n")
        return real(*args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(data, "build_examples", edit_then_build)
        with pytest.raises(UserError, match=r"corpus.txt: changed after this run fingerprinted it"):
            run_recipe_file(recipe, tmp_path / "run", host())
    state = json.loads((tmp_path / "run/fit/stage.json").read_text())
    assert state["status"] == "failed" and "changed after this run fingerprinted it" in state["error"]
    run_recipe_file(recipe, tmp_path / "run", host())  # re-fingerprinted on the new text: reuses its examples
    assert json.loads((tmp_path / "run/fit/stage.json").read_text())["status"] == "completed"
    assert len(list((tmp_path / "run/fit/data").glob("electra-examples-*"))) == 1


def test_the_streaming_shuffle_buffer_reaches_the_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`corpus.shuffle_buffer` was never passed on: every stream shuffled in windows of 10,000."""
    from xfer.electra import data

    seen: list[int] = []
    real = data.PretrainBatches.__init__

    def spy(self, *args, shuffle_buffer: int = 10_000, **kwargs) -> None:
        seen.append(shuffle_buffer)
        real(self, *args, shuffle_buffer=shuffle_buffer, **kwargs)

    monkeypatch.setattr(data.PretrainBatches, "__init__", spy)
    path = write_recipe(tmp_path, RECIPE)
    streaming = [
        "stages.fit.corpus={files: corpus.text, streaming: true, shuffle_buffer: 7}",
        "stages.fit.train.steps=2",
    ]
    run_recipe_file(path, tmp_path / "run", host(), streaming)
    assert seen == [7]


def test_a_stage_made_vocabulary_other_than_the_init_checkpoints_is_refused_before_training(
    pretrained: Path, tmp_path: Path
) -> None:
    """When the tokenizer is an earlier stage's output it does not exist at pre-flight: the stage
    compares it before training (a different vocabulary of the same size used to pass)."""
    text = f"""
stages:
  corpus: {{kind: toy.corpus, sentences: 300, seed: 9}}
  vocab: {{kind: transformer.vocab, files: corpus.text, size: 180, min_frequency: 1}}
  more:
    kind: electra.pretrain
    corpus: {{files: corpus.text}}
    init: {pretrained / "discriminator"}
    tokenizer: vocab.tokenizer
    max_length: 32
    train: {{steps: 1, batch_size: 8, warmup_steps: 0}}
"""
    with pytest.raises(UserError, match=r"vocab\.txt:\d+: token id \d+ is .* in the init checkpoint's vocabulary"):
        run_recipe_file(write_recipe(tmp_path, text), tmp_path / "run", host())
    assert not (tmp_path / "run/more/checkpoints").exists(), "refused before the first step"


def test_finetune_refuses_a_stage_made_vocabulary_other_than_its_init_checkpoints(
    pretrained: Path, tmp_path: Path
) -> None:
    """The same check in transformer.finetune, whose pre-flight cannot see a `vocab.tokenizer` either."""
    text = f"""
stages:
  corpus: {{kind: toy.corpus, sentences: 300, seed: 9}}
  vocab: {{kind: transformer.vocab, files: corpus.text, size: 180, min_frequency: 1}}
  tune:
    kind: transformer.finetune
    init: {pretrained / "discriminator"}
    tokenizer: vocab.tokenizer
    max_length: 32
    tasks: [{{name: toy/agreement, train_size: 16, dev_size: 8}}]
"""
    with pytest.raises(UserError, match=r"vocab\.txt:\d+: token id \d+ is .* in the init checkpoint's vocabulary"):
        run_recipe_file(write_recipe(tmp_path, text), tmp_path / "run", host())
    assert not (tmp_path / "run/tune/trials").exists(), "refused before the first trial"


@pytest.mark.parametrize("init", ["generator", "generator/hf", "discriminator"])
def test_finetune_from_a_generator_says_so(
    pretrained: Path, tmp_path: Path, init: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`init: pretrain.generator` (for `pretrain.discriminator`) fine-tuned ELECTRA's small noise
    network without a word. It is allowed (an experiment may want it) but said, on stderr and in the
    report; the discriminator, the thesis's choice, gets no such warning."""
    text = f"""
stages:
  tune:
    kind: transformer.finetune
    init: {pretrained / init}
    max_length: 32
    tasks: [{{name: toy/agreement, train_size: 16, dev_size: 8}}]
    train: {{steps: 1, batch_size: 8}}
"""
    run_recipe_file(write_recipe(tmp_path, text), tmp_path / "run", host())
    report = (tmp_path / "run/tune/report.md").read_text()
    stderr = capsys.readouterr().err
    if init == "discriminator":
        assert "is the generator" not in stderr + report
        return
    said = f"init: {pretrained / init} is the generator of an electra.rtd pre-training"
    assert said in stderr and said in report
    assert "Fine-tuning goes on as asked" in report
    if init == "generator":
        assert f"the discriminator is {pretrained / 'discriminator'}" in stderr


def test_finetune_past_the_pretraining_length_says_so(
    pretrained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ELECTRA packs examples of exactly its max_length (32 here): fine-tuning with 64 reads position
    embeddings 32-63, which pre-training never trained. Said on stderr and in the report."""
    text = f"""
stages:
  tune:
    kind: transformer.finetune
    init: {pretrained / "discriminator"}
    max_length: 64
    tasks: [{{name: toy/agreement, train_size: 16, dev_size: 8}}]
    train: {{steps: 1, batch_size: 8}}
"""
    run_recipe_file(write_recipe(tmp_path, text), tmp_path / "run", host())
    said = f"max_length 64 is more than the 32 tokens per example {pretrained / 'discriminator'} was pre-trained on"
    assert said in capsys.readouterr().err and said in (tmp_path / "run/tune/report.md").read_text()
    run_recipe_file(write_recipe(tmp_path, text.replace("max_length: 64", "max_length: 32")), tmp_path / "r2", host())
    assert "was pre-trained on" not in capsys.readouterr().err


def test_finetune_of_a_pair_task_on_a_single_segment_checkpoint_is_a_clear_error(tmp_path: Path) -> None:
    """An encoder with one token type (`single_segment_prob: 1.0`, `type_vocab_size: 1`) given a pair
    task (RTE: two texts) failed with an IndexError traceback in the first training step."""
    text = RECIPE.replace("    encoder: {", "    single_segment_prob: 1.0\n    encoder: {type_vocab_size: 1, ").replace(
        "    train: {steps: 8,", "    train: {steps: 2,"
    )
    rte = tmp_path / "RTE"
    rte.mkdir()
    rows = "".join(
        f"{i}\tthe cat sat .\ta dog runs .\t{'entailment' if i % 2 else 'not_entailment'}\n" for i in range(8)
    )
    for split in ("train", "dev"):
        (rte / f"{split}.tsv").write_text("index\tsentence1\tsentence2\tlabel\n" + rows)
    text += f"""  tune:
    kind: transformer.finetune
    init: fit.discriminator
    max_length: 32
    tasks: [{{name: glue/rte, data_dir: {rte}}}]
    train: {{steps: 1, batch_size: 4}}
"""
    with pytest.raises(UserError, match=r"glue/rte: its inputs use token type 1 \(a pair of texts\) but the init "):
        run_recipe_file(write_recipe(tmp_path, text), tmp_path / "run", host())
    assert not (tmp_path / "run/tune/trials").exists(), "refused before the first trial"


def test_finetune_refuses_a_stage_made_init_with_fewer_positions_than_its_max_length(tmp_path: Path) -> None:
    """The stage re-ran pre-flight's checkpoint checks only with `tokenizer:` set; `init:` alone from
    an earlier stage (whose files pre-flight cannot read) crashed in the first trial with a bare
    ValueError (sequence length exceeds max_position_embeddings)."""
    text = RECIPE.replace("    encoder: {", "    encoder: {max_position_embeddings: 32, ").replace(
        "    train: {steps: 8,", "    train: {steps: 2,"
    )
    text += """  tune:
    kind: transformer.finetune
    init: fit.discriminator
    max_length: 64
    tasks: [{name: toy/agreement, train_size: 16, dev_size: 8}]
"""
    with pytest.raises(UserError, match=r"discriminator: the checkpoint covers 32 positions but max_length is 64"):
        run_recipe_file(write_recipe(tmp_path, text), tmp_path / "run", host())
    assert not (tmp_path / "run/tune/trials").exists(), "refused before the first trial"


def test_a_generator_deeper_than_the_discriminator_or_zero_layers_deep_is_a_recipe_error(tmp_path: Path) -> None:
    """`generator: {layers: 2}` built a generator twice as deep as the discriminator (larger than it,
    which `size` above 1 already refused), and `layers: 0.01` one layer deep without a word."""
    from xfer.electra.config import GeneratorConfig
    from xfer.electra.model import generator_encoder_config
    from xfer.transformer.presets import preset

    path = write_recipe(tmp_path, RECIPE)

    def problems(layers: str) -> list[str]:
        override = f"stages.fit.objective={{name: electra.rtd, generator: {{layers: {layers}}}}}"
        with pytest.raises(RecipeError) as caught:
            load_recipe(path, [override], host())
        return [d.message for d in caught.value.diagnostics]

    assert problems("2") == ["stages.fit.objective.generator.layers: must be at most 1, got 2.0"]
    [shallow] = problems("0.01")
    assert shallow.startswith("stages.fit.objective.generator.layers: 0.01 x the ") and "rounds to 0" in shallow
    small = ["stages.fit.model=electra-small", "stages.fit.encoder={}"]  # 12 layers: 1/12 gives one
    fine = load_recipe(path, [*small, "stages.fit.objective={name: electra.rtd, generator: {layers: 0.0834}}"], host())
    assert fine.stages["fit"].config.objective.config.generator.layers == 0.0834
    with pytest.raises(UserError, match=r"objective\.generator\.layers: 0\.1 x the 2 layers .* rounds to 0"):
        generator_encoder_config(preset("tiny", num_layers=2), GeneratorConfig(layers=0.1))
    assert generator_encoder_config(preset("tiny", num_layers=2), GeneratorConfig(layers=0.5)).num_layers == 1


def test_a_generator_narrower_than_one_unit_is_a_recipe_error_at_size(tmp_path: Path) -> None:
    """`generator: {size: 0.01}` of a 64-wide discriminator rounded to 0 units and was silently built
    1 unit wide; now the recipe is refused at `size` with what the multiplier yields."""
    from xfer.electra.config import GeneratorConfig
    from xfer.electra.model import generator_encoder_config
    from xfer.transformer.presets import preset

    text = RECIPE.replace("objective: {name: electra.rtd}", "objective: {name: electra.rtd, generator: {size: 0.01}}")
    path = write_recipe(tmp_path, text)
    line = next(i for i, row in enumerate(text.splitlines(), 1) if "size: 0.01" in row)
    col = text.splitlines()[line - 1].index("size: 0.01") + 1
    with pytest.raises(RecipeError) as caught:
        load_recipe(path, host=host())
    assert [str(d) for d in caught.value.diagnostics] == [
        f"{path.resolve()}:{line}:{col}: stages.fit.objective.generator.size: 0.01 x the widths of this "
        "discriminator (tiny with encoder overrides: hidden 64, FFN 128) gives a generator 0.64 units wide with an "
        "FFN of 1.28: narrower than 1 unit; give at least 1/64 = 0.0156"
    ]
    two_tower = "stages.fit.objective={name: electric.nce, generator: {size: 0.01}}"
    with pytest.raises(RecipeError, match=r"objective\.generator\.size: 0\.01 x the widths"):
        load_recipe(path, [two_tower], host())
    unigram = "stages.fit.objective={name: electra.rtd, generator: {kind: unigram, size: 0.01}}"
    load_recipe(path, [unigram], host())  # no network to size
    with pytest.raises(UserError, match=r"objective\.generator\.size: 0\.01 x the widths of this discriminator"):
        generator_encoder_config(preset("tiny", hidden_size=64, num_heads=2), GeneratorConfig(size=0.01))
    # The thesis's sweep of ELECTRA-Small generators builds as before: 1/8 has one head of 32 units.
    small = ["stages.fit.model=electra-small", "stages.fit.encoder={}"]
    built = {}
    for size in (0.125, 0.25, 0.5, 1.0):
        recipe = load_recipe(path, [*small, f"stages.fit.objective.generator.size={size}"], host())
        generator = recipe.stages["fit"].config.objective.config.generator
        gen = generator_encoder_config(preset("electra-small"), generator)
        built[size] = (gen.hidden_size, gen.num_heads, gen.intermediate_size)
    assert built == {0.125: (32, 1, 128), 0.25: (64, 1, 256), 0.5: (128, 2, 512), 1.0: (256, 4, 1024)}
    load_recipe(path, [*small, "stages.fit.objective.generator.size=0.01"], host())  # 2.56 units: small, but a size


def _generator_shape_problems(init: Path, hf_config: dict, **generator: float) -> list[str]:
    """Pre-flight's generator check of an electra.rtd stage with `generator` options against an
    init checkpoint whose config.json is `hf_config`."""
    from types import SimpleNamespace

    from xfer.core.config import ObjectiveRef
    from xfer.electra.checks import _generator_shape
    from xfer.electra.config import GeneratorConfig, RTDConfig

    (init / "config.json").write_text(json.dumps(hf_config))
    config = SimpleNamespace(
        objective=ObjectiveRef("electra.rtd", RTDConfig(generator=GeneratorConfig(**generator))), encoder={}
    )
    return [str(p) for p in _generator_shape(config, init)]


def test_a_generator_narrower_than_one_unit_of_the_init_checkpoint_is_refused_before_training(tmp_path: Path) -> None:
    widths = {"hidden_size": 64, "intermediate_size": 128}
    assert _generator_shape_problems(tmp_path, widths, size=0.01) == [
        f"objective.generator.size: 0.01 x the widths of this discriminator (the init checkpoint {tmp_path}: "
        "hidden 64, FFN 128) gives a generator 0.64 units wide with an FFN of 1.28: narrower than 1 unit; "
        "give at least 1/64 = 0.0156"
    ]
    assert _generator_shape_problems(tmp_path, widths, size=0.25) == []


@pytest.mark.parametrize("depth_key", ["num_hidden_layers", "num_layers"])  # an HF config.json's name, xfer's
def test_generator_layers_that_give_no_layer_for_the_init_checkpoint_are_refused_before_training(
    tmp_path: Path, depth_key: str
) -> None:
    """Found by the stage after the corpus was packed, before: validate said ok."""
    sizes = {"hidden_size": 64, "intermediate_size": 128, depth_key: 2}
    assert _generator_shape_problems(tmp_path, sizes, layers=0.1) == [
        f"objective.generator.layers: 0.1 x the 2 layers of this discriminator (the init checkpoint {tmp_path}) "
        "gives 0.2 layers, which rounds to 0; give at least 1/2 = 0.5"
    ]
    assert _generator_shape_problems(tmp_path, sizes, layers=0.5) == []


def test_on_collapse_stop_ends_the_stage_at_the_collapse_and_keeps_its_checkpoints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`on_collapse: stop`: once the probe has read a collapsed encoder for 3 logs, the stage fails
    with the collapse message instead of training to the end (and fine-tuning after it); the
    default only warns and trains on. The probe is replaced by a scripted one: a real collapse
    takes thousands of steps."""
    import xfer.electra.stage as stage

    spreads = {"value": 0.5}
    monkeypatch.setattr(stage, "_spread_probe", lambda encoder, tokenizer: lambda: spreads["value"])
    path = write_recipe(tmp_path, RECIPE)
    log_every = ["stages.fit.train.log_every=1", "stages.fit.train.checkpoint_every=2"]

    def trained_steps(run: str) -> list[int]:
        lines = (tmp_path / run / "fit/metrics.jsonl").read_text().splitlines()
        return [m["step"] for m in map(json.loads, lines) if m["split"] == "train"]

    spreads["value"] = 1e-5  # collapsed from the first log on: logs 1, 2, 3 -> stop at step 3
    with pytest.raises(UserError, match=r"on_collapse: stop\) at step 3: the encoder's representations collapsed"):
        run_recipe_file(path, tmp_path / "stop", host(), [*log_every, "stages.fit.on_collapse=stop"])
    assert trained_steps("stop") == [1, 2, 3]
    assert (tmp_path / "stop/fit/checkpoints").is_dir() and json.loads((tmp_path / "stop/fit/stage.json").read_text())[
        "status"
    ] != "completed"

    run_recipe_file(path, tmp_path / "warn", host(), log_every)  # the default: warn, train on
    assert trained_steps("warn") == list(range(1, 9))

    spreads["value"] = 0.5  # healthy: `stop` changes nothing
    run_recipe_file(path, tmp_path / "healthy", host(), [*log_every, "stages.fit.on_collapse=stop"])
    assert trained_steps("healthy") == list(range(1, 9))


def test_a_stage_stopped_at_a_collapse_stops_again_when_re_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The re-run resumes from the last checkpoint and watches on from the logs before it. The watch
    used to start empty, so it needed 3 new collapsed logs: a collapse found in the last checkpoint
    interval let the re-run finish as "completed" with the collapsed encoder (and its fine-tuning
    stages ran on it), and an earlier one stopped at another step than the first run."""
    import xfer.electra.stage as stage

    spreads = [0.5] * 5 + [1e-5] * 3  # steps 1-5 healthy, collapsed from step 6: stop at step 8, the last
    monkeypatch.setattr(stage, "_spread_probe", lambda encoder, tokenizer: lambda: spreads.pop(0) if spreads else 1e-5)
    path = write_recipe(tmp_path, RECIPE)
    overrides = ["stages.fit.train.log_every=1", "stages.fit.train.checkpoint_every=2", "stages.fit.on_collapse=stop"]
    stopped = r"on_collapse: stop\) at step 8: the encoder's representations collapsed: since step 6"
    with pytest.raises(UserError, match=stopped):
        run_recipe_file(path, tmp_path / "run", host(), overrides)
    with pytest.raises(UserError, match=stopped):  # resumed from step 6: logs 7 and 8, after 6's
        run_recipe_file(path, tmp_path / "run", host(), overrides)
    assert json.loads((tmp_path / "run/fit/stage.json").read_text())["status"] == "failed"


def test_on_collapse_is_checked_and_its_default_leaves_fingerprints_alone(tmp_path: Path) -> None:
    path = write_recipe(tmp_path, RECIPE)
    with pytest.raises(RecipeError, match="on_collapse"):
        load_recipe(path, ["stages.fit.on_collapse=halt"], host())
    default = load_recipe(path, host=host()).stages["fit"]
    stop = load_recipe(path, ["stages.fit.on_collapse=stop"], host()).stages["fit"]
    assert "on_collapse" not in default.resolved(signing=True)  # runs from before the knob stay fresh
    assert stop.resolved(signing=True)["on_collapse"] == "stop"


class HeavyRTD(RTDObjective):
    """A plugin objective built on electra.rtd: another registered name, the same config class."""


@dataclass
class AllMaskConfig:
    """A plugin objective's config class of its own (so xfer.electra.flops has no formula for it)."""

    mask_prob: float = 0.15
    mask: float = 1.0
    random: float = 0.0


class AllMaskMLM(MLMObjective):
    """An MLM without random or kept tokens, configured by `AllMaskConfig`."""


class WrappedMLM(nn.Module):
    """A plugin objective that wraps MLMObjective instead of subclassing it."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__()
        self.inner = MLMObjective(*args, **kwargs)

    def forward(self, batch: dict) -> Any:
        return self.inner(batch)


class HalfDone(PretrainingObjective):
    """A plugin's own pre-training objective that defines `forward` but not `exports`/`main_encoder`."""

    def forward(self, batch: dict) -> Any:
        raise AssertionError("never trained")


class MineObjectives:
    @staticmethod
    @hookimpl
    def xfer_objectives():
        return [
            ComponentSpec("objective", "mine/heavy-rtd", f"{__name__}:HeavyRTD", "1", RTDConfig),
            ComponentSpec("objective", "mine/all-mask", f"{__name__}:AllMaskMLM", "1", AllMaskConfig),
            ComponentSpec("objective", "mine/wrapped", f"{__name__}:WrappedMLM", "1", MLMConfig),
            ComponentSpec("objective", "mine/half-done", f"{__name__}:HalfDone", "1", MLMConfig),
        ]


def test_plugin_objectives_pretrain_to_budgets_and_score_as_what_they_are_built_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A third-party objective failed in every electra.pretrain run: the FLOP formula was looked up
    by registered name (`no FLOP formula for objective 'mine/heavy-rtd'`, a ValueError traceback),
    even for a subclass of RTDObjective with RTD's config and a budget in steps. And `xfer score`
    said its checkpoint did not record an objective. Now one built on a built-in objective is costed
    and scored as that one; one of its own kind trains to steps or tokens, uncounted, and a FLOP
    budget for it is refused before training."""
    from xfer.core import cli
    from xfer.core.plugins import set_default_host
    from xfer.core.runs.preflight import PreflightError

    plugin_host = host()
    plugin_host.add_object(MineObjectives, "mine")
    path = write_recipe(tmp_path, RECIPE)
    heavy = [
        "stages.fit.objective={name: mine/heavy-rtd, disc_weight: 20}",
        "stages.fit.budget={flops: 3e8}",
        "stages.fit.train.steps=null",
    ]
    run_recipe_file(path, tmp_path / "heavy", plugin_host, [*heavy, "stages.fit.train.checkpoint_every=100"])
    disc = tmp_path / "heavy/fit/outputs/discriminator"
    meta = json.loads((disc / "xfer_model.json").read_text())
    assert meta["objective"] == "mine/heavy-rtd" and meta["objective_family"] == "electra.rtd"
    assert meta["training_steps"] == int(3e8 // meta["flops_per_step"]) >= 1
    (tmp_path / "lines.txt").write_text("the dog runs .\n")
    set_default_host(plugin_host)
    try:
        assert cli.main(["score", str(disc), str(tmp_path / "lines.txt")]) == 0
        assert '"method": "mlm"' in capsys.readouterr().out  # its generator: a masked LM, as electra.rtd's
        own = ["stages.fit.objective=mine/all-mask"]
        assert cli.main(["flops", str(path), *own]) == 0
        assert "no FLOP formula for this objective" in capsys.readouterr().out
    finally:
        set_default_host(None)
    run_recipe_file(
        path, tmp_path / "own", plugin_host, [*own, "stages.fit.budget={tokens: 500}", "stages.fit.train.steps=null"]
    )
    report = (tmp_path / "own/fit/report.md").read_text()
    assert "FLOPs not counted" in report
    recipe = load_recipe(path, [*own, "stages.fit.budget={flops: 1e12}", "stages.fit.train.steps=null"], plugin_host)
    with pytest.raises(PreflightError, match="objective 'mine/all-mask' has no FLOP formula"):
        check_data(recipe, plugin_host)


@pytest.mark.parametrize("name", ["transformer.sequence", "mine/wrapped", "mine/half-done"])
def test_an_objective_that_is_not_a_pretraining_objective_is_refused_before_training(tmp_path: Path, name: str) -> None:
    """A fine-tuning objective validated and then crashed in its constructor (a bare TypeError); a
    plugin class wrapping MLMObjective trained the whole budget, then failed writing its outputs
    (AttributeError: no `family`). Both are refused in pre-flight, and by the stage itself when it
    runs without one (`run_recipe` from Python)."""
    from xfer.core.runs.preflight import PreflightError

    plugin_host = host()
    plugin_host.add_object(MineObjectives, "mine")
    path = write_recipe(tmp_path, RECIPE)
    recipe = load_recipe(path, [f"stages.fit.objective={name}"], plugin_host)
    expected = f"objective '{name}' \\((SequenceObjective|WrappedMLM)\\) is not a pre-training objective"
    if name == "mine/half-done":  # trained the whole budget, then NotImplementedError writing its outputs
        expected = f"objective '{name}' \\(HalfDone\\) does not define exports, main_encoder: a subclass of"
    with pytest.raises(PreflightError, match=expected):
        check_data(recipe, plugin_host)
    with pytest.raises(UserError, match=expected):
        run_recipe(recipe, tmp_path / "run", host=plugin_host, log=lambda *a: None)
    assert not list((tmp_path / "run").glob("fit/checkpoints/step-*"))


def test_epochs_count_steps_as_the_trainer_does_without_float_noise() -> None:
    """1.1 epochs of 50 batches is 55.00000000000001 in binary floats: a bare ceil planned a 56th step
    (the original ELECTRA code, like the shared trainer, trains 55)."""
    from xfer.core.trainer import epoch_steps
    from xfer.electra.stage import steps_for_epochs

    assert steps_for_epochs(1.1, 400, 8) == epoch_steps(1.1, 50) == 55
    assert steps_for_epochs(0.01, 10, 8) == 1 and steps_for_epochs(2.5, 401, 8) == 128


def test_continued_pretraining_records_the_longest_length_its_positions_were_trained_on(
    pretrained: Path, tmp_path: Path
) -> None:
    """Continuing a 32-token pre-training at 16 recorded max_length 16: scoring then windowed at 16,
    and fine-tuning at 32 warned of untrained positions that the first pre-training had trained."""
    text = _continued(pretrained, f"init: {pretrained / 'discriminator'}", max_length=16)
    run_recipe_file(write_recipe(tmp_path, text), tmp_path / "run", host())
    for output in ("discriminator", "generator"):
        meta = json.loads((tmp_path / "run/more/outputs" / output / "xfer_model.json").read_text())
        assert meta["max_length"] == 32
