"""The adversarial corpus: one named attack per module-level ``@attack`` function (see corpus.py)."""
