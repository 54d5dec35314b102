"""Other products' memory, brought in by the owner's ``bxctl import`` (issue 17): `archives` (their
conversations as archives under ``imports/``) and `entries` (their memory files' entries, held back by
the identity-write rule)."""
