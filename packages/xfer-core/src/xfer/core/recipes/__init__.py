"""Recipes: YAML with source positions (`yamlsrc`), typed schemas built from the
components' config dataclasses (`schema`), and the validated, ordered recipe (`recipe`).

Internal to xfer-core: plugins never import from here; the `xfer` CLI and the runner do.
"""
