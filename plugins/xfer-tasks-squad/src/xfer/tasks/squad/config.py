"""Config dataclass of the SQuAD tasks (cheap to import: the recipe validator imports it)."""

# `knob(...)` returns a `dataclasses.field`, which RUF009 cannot know.

from dataclasses import dataclass

from xfer.core.config import ExistingPath, knob


@dataclass
class SquadConfig:
    """Files of a SQuAD task, in the official JSON format (train-v1.1.json, dev-v2.0.json, ...)."""

    train_file: ExistingPath | None = knob(None, "Training file (SQuAD JSON).", required=True)
    dev_file: ExistingPath | None = knob(
        None, "Development file (SQuAD JSON); its questions have several gold answers."
    )
    test_file: ExistingPath | None = knob(None, "Test file (SQuAD JSON), if you have one.")
    max_examples: int | None = knob(
        None, "Keep only the FIRST N questions of each split (file order), for quick runs. None keeps all."
    )

    def __post_init__(self) -> None:
        """Raises ValueError, which the recipe validator reports at the task's YAML position."""
        value = self.max_examples
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(f"max_examples must be a positive integer or null, not {value!r}")
