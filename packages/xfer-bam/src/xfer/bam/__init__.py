"""xfer BAM: born-again multi-task networks (Clark et al., 2019; thesis chapter 3).

Modules, model first:

- `model`       the network: a shared encoder and each task's fine-tuning objective (its head)
- `objective`   the BAM loss ℓ(λ·gold + (1−λ)·teacher, student) and the λ schedules
- `data`        teacher outputs attached to examples, mixed multi-task batches, task sampling source
- `sampling`    task probabilities ∝ |D|^α (and proportional, uniform, temperature)
- `cache`       the content-addressed store of teacher predictions (safetensors)
- `evaluation`  multi-task evaluation, per-example dev predictions, teacher outputs
- `weights`     `init:` resolution (checkpoints, BAM models) and model directories
- `stage`       the `bam.teachers` and `bam.student` stages
- `stats`, `compare`, `compare_cli`   `xfer compare`: paired bootstrap + Holm-Bonferroni
- `config`      torch-free stage configs; `plugin` registration only
"""
