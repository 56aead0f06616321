"""Run directories: the stage runner (`runner`), its lock (`runlock`), fingerprints and
output digests (`fingerprint`), stage reports (`report`) and the checks before anything
trains (`preflight`).

Internal to xfer-core: plugins never import from here; the `xfer` CLI does.
"""
