"""How a head maps to a HF `transformers` task class: the `hf` attribute of a registered head.

A head class declares `hf = HFHeadMap(...)` (or None: not exportable) so that
`xfer.transformer.hf` can export it and recognise it on import without knowing the head:

    class DiscriminatorHead(nn.Module):
        kind = "electra.discriminator_head"      # = its registered model component name
        hf = HFHeadMap(
            architectures={"electra": "ElectraForPreTraining"},
            tensors={"dense": "discriminator_predictions.dense", "out": "discriminator_predictions.dense_prediction"},
            config_from_hf=lambda state, hf_config, encoder_config: {"hidden": encoder_config.hidden_size},
        )

`tensors` renames parameter prefixes: the head's `dense.weight` is HF's
`discriminator_predictions.dense.weight`. HF names are full state-dict names (BERT's pooler is
`bert.pooler.dense`); on import the `electra.` / `bert.` prefix is optional, as it is for the
encoder. Every head tensor must be covered on export; on import every prefix must match at least
one tensor, and the head is rebuilt from `config_from_hf` and loaded strictly, so a shape or
name mismatch is a CheckpointError. Heads whose mapping depends on the base model or whose
config needs checking subclass `HFHeadMap` and override the hooks (see the built-in maps below).

This module knows neither `heads` nor `hf` (both import it), only tensors and configs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from torch import Tensor, nn

from xfer.core.errors import CheckpointError


@dataclass(frozen=True)
class HFHeadMap:
    """A head's HF equivalent: class name per base model type, tensor renames, config fields.

    architectures: HF model_type ("electra", "bert") -> HF class name, e.g.
        {"electra": "ElectraForPreTraining"}; the head exports only onto these base models, and
        a checkpoint whose `architectures[0]` is one of these classes imports as this head.
    tensors: head parameter prefix -> HF name prefix (full HF names).
    config_from_hf(state, hf_config, encoder_config) -> head constructor kwargs, from the head
        tensors (xfer names), the checkpoint's config.json and the encoder config (import; without
        it the head cannot be imported).
    config_to_hf(head) -> extra config.json fields on export (labels, dropout, ...).
    """

    architectures: Mapping[str, str]
    tensors: Mapping[str, str] = field(default_factory=dict)
    config_from_hf: Callable[[dict[str, Tensor], dict[str, Any], Any], dict[str, Any]] | None = None
    config_to_hf: Callable[[nn.Module], dict[str, Any]] | None = None

    # --- hooks (override in subclasses when they depend on the base model) -------------------

    def architecture(self, model_type: str) -> str | None:
        """The HF class for this head on a `model_type` base, or None if there is none."""
        return self.architectures.get(model_type)

    def tensor_map(self, model_type: str) -> Mapping[str, str]:
        """Head parameter prefix -> HF name prefix for a `model_type` base."""
        return self.tensors

    def check_export(self, head: nn.Module, model_type: str) -> None:
        """Raise ValueError (saying what to do instead) if this head instance has no HF form."""

    def export_config(self, head: nn.Module, model_type: str) -> dict[str, Any]:
        """Extra config.json fields for this head."""
        return self.config_to_hf(head) if self.config_to_hf is not None else {}

    def import_config(
        self, state: dict[str, Tensor], hf_config: dict[str, Any], encoder_config: Any, model_type: str, source: str
    ) -> dict[str, Any]:
        """Head constructor kwargs for the tensors `state` (xfer names) of a HF checkpoint."""
        if self.config_from_hf is None:
            raise CheckpointError(
                f"{source}: the head for {hf_config.get('architectures')} declares no `config_from_hf`, "
                "so it can be exported but not imported"
            )
        try:
            return self.config_from_hf(state, hf_config, encoder_config)
        except ValueError as e:  # the head refuses this checkpoint; the error names the file here
            raise CheckpointError(f"{source}: {e}") from None

    # --- used by xfer.transformer.hf -----------------------------------------------------------

    def to_hf(self, head: nn.Module, model_type: str) -> tuple[dict[str, Tensor], dict[str, Any]]:
        """Head tensors under their HF names, and the extra config.json fields."""
        self.check_export(head, model_type)
        mapping = self.tensor_map(model_type)
        prefixes = sorted(mapping, key=len, reverse=True)
        out: dict[str, Tensor] = {}
        for key, t in head.state_dict().items():
            prefix = next((p for p in prefixes if key == p or key.startswith(p + ".")), None)
            if prefix is None:
                raise ValueError(
                    f"{type(head).__name__} tensor {key!r} has no HF name: its `hf` map covers only "
                    f"{', '.join(sorted(mapping)) or 'nothing'}"
                )
            out[mapping[prefix] + key[len(prefix) :]] = t
        return out, self.export_config(head, model_type)

    def from_hf(
        self,
        arch: str,
        model_type: str,
        tensors: Mapping[str, Tensor],
        hf_config: dict[str, Any],
        encoder_config: Any,
        source: str,
    ) -> tuple[dict[str, Any], dict[str, Tensor], set[str]]:
        """Pick this head's tensors out of `tensors` (HF names without the model prefix):
        (head config, head state dict in xfer names, the HF names consumed)."""
        mapping = self.tensor_map(model_type)
        strip = model_type + "."
        state: dict[str, Tensor] = {}
        consumed: set[str] = set()
        for xfer_prefix, hf_prefix in sorted(mapping.items(), key=lambda kv: len(kv[1]), reverse=True):
            bare = hf_prefix[len(strip) :] if hf_prefix.startswith(strip) else hf_prefix
            found = [n for n in tensors if n not in consumed and (n == bare or n.startswith(bare + "."))]
            if not found:
                raise CheckpointError(
                    f"{source}: architecture {arch} but its head tensors ({', '.join(mapping.values())}) are missing"
                )
            for n in found:
                state[xfer_prefix + n[len(bare) :]] = tensors[n]
                consumed.add(n)
        return self.import_config(state, hf_config, encoder_config, model_type, source), state, consumed


def labels(n: int) -> dict[str, Any]:
    """HF's default `id2label` / `label2id` for n outputs (callers override with real labels)."""
    return {"id2label": {str(i): f"LABEL_{i}" for i in range(n)}, "label2id": {f"LABEL_{i}": i for i in range(n)}}


def classifier_dropout(hf_config: dict[str, Any], encoder_config: Any) -> float:
    """HF heads use `classifier_dropout`, falling back to the hidden dropout when it is null.

    Anything but null or a number in [0, 1) is a ValueError (transformers' `nn.Dropout` refuses
    it too): `float()` made `"0.1x"` or a list a bare exception out of the import, and took `true`
    as 1.0 (a head whose every input is dropped) and -1 or 1.5 as they were."""
    value = hf_config.get("classifier_dropout")
    if value is None:
        return float(encoder_config.hidden_dropout)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value < 1.0:
        raise ValueError(f"classifier_dropout must be null or a number in [0, 1), got {value!r}")
    return float(value)


def _outputs(state: dict[str, Tensor], name: str, source: str) -> int:
    if name not in state or state[name].dim() != 2:
        raise CheckpointError(f"{source}: head tensor {name!r} is missing or not a matrix")
    return int(state[name].shape[0])


# ----------------------------------------------------------------------------------------------
# The maps of xfer-transformer's own heads (attached in `xfer.transformer.heads`).


@dataclass(frozen=True)
class SequenceHFMap(HFHeadMap):
    """ELECTRA: `classifier.dense/out_proj` (pooler "gelu"); BERT: `bert.pooler.dense` + `classifier` ("tanh")."""

    architectures: Mapping[str, str] = field(
        default_factory=lambda: {
            "electra": "ElectraForSequenceClassification",
            "bert": "BertForSequenceClassification",
        }
    )

    _POOLER: ClassVar[dict[str, str]] = {"electra": "gelu", "bert": "tanh"}

    def tensor_map(self, model_type: str) -> Mapping[str, str]:
        if model_type == "electra":
            return {"dense": "classifier.dense", "out": "classifier.out_proj"}
        return {"dense": "bert.pooler.dense", "out": "classifier"}

    def check_export(self, head: nn.Module, model_type: str) -> None:
        want = self._POOLER[model_type]
        if head.pooler != want:
            raise ValueError(
                f"a SequenceHead with pooler={head.pooler!r} has no HF {model_type} equivalent "
                f"(HF {self.architectures[model_type]} needs pooler={want!r}); export the encoder alone (head=None)"
            )

    def export_config(self, head: nn.Module, model_type: str) -> dict[str, Any]:
        extra = {"classifier_dropout": head.dropout_p, **labels(head.num_outputs)}
        if head.num_outputs == 1:
            extra["problem_type"] = "regression"
        return extra

    def import_config(
        self, state: dict[str, Tensor], hf_config: dict[str, Any], encoder_config: Any, model_type: str, source: str
    ) -> dict[str, Any]:
        return {
            "hidden": encoder_config.hidden_size,
            "num_outputs": _outputs(state, "out.weight", source),
            "dropout": classifier_dropout(hf_config, encoder_config),
            "pooler": self._POOLER[model_type],
            "initializer_range": encoder_config.initializer_range,
        }


@dataclass(frozen=True)
class TokenHFMap(HFHeadMap):
    """*ForTokenClassification: `classifier` = `out`."""

    architectures: Mapping[str, str] = field(
        default_factory=lambda: {"electra": "ElectraForTokenClassification", "bert": "BertForTokenClassification"}
    )
    tensors: Mapping[str, str] = field(default_factory=lambda: {"out": "classifier"})

    def export_config(self, head: nn.Module, model_type: str) -> dict[str, Any]:
        return {"classifier_dropout": head.dropout_p, **labels(head.num_tags)}

    def import_config(
        self, state: dict[str, Tensor], hf_config: dict[str, Any], encoder_config: Any, model_type: str, source: str
    ) -> dict[str, Any]:
        return {
            "hidden": encoder_config.hidden_size,
            "num_tags": _outputs(state, "out.weight", source),
            "dropout": classifier_dropout(hf_config, encoder_config),
            "initializer_range": encoder_config.initializer_range,
        }


@dataclass(frozen=True)
class SpanQAHFMap(HFHeadMap):
    """*ForQuestionAnswering: `qa_outputs`, same layout; ELECTRA's joint_end/answerable extras have no HF form."""

    architectures: Mapping[str, str] = field(
        default_factory=lambda: {"electra": "ElectraForQuestionAnswering", "bert": "BertForQuestionAnswering"}
    )
    tensors: Mapping[str, str] = field(default_factory=lambda: {"qa_outputs": "qa_outputs"})

    def check_export(self, head: nn.Module, model_type: str) -> None:
        if head.joint_end or head.answerable:
            raise ValueError("a SpanQAHead with joint_end or answerable has no HF equivalent; export without them")

    def export_config(self, head: nn.Module, model_type: str) -> dict[str, Any]:
        return labels(2)

    def import_config(
        self, state: dict[str, Tensor], hf_config: dict[str, Any], encoder_config: Any, model_type: str, source: str
    ) -> dict[str, Any]:
        if _outputs(state, "qa_outputs.weight", source) != 2:
            raise CheckpointError(
                f"{source}: tensor 'qa_outputs.weight' has shape {tuple(state['qa_outputs.weight'].shape)}, "
                "expected 2 outputs (start, end)"
            )
        return {
            "hidden": encoder_config.hidden_size,
            "initializer_range": encoder_config.initializer_range,
            "layer_norm_eps": encoder_config.layer_norm_eps,
        }
