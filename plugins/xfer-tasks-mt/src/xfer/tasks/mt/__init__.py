"""Translation tasks for xfer (parallel text, sacrebleu BLEU).

Importing this package is cheap; the task class lives in `xfer.tasks.mt.tasks`.
"""
