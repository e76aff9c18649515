"""The adversarial corpus: one named attack per ``@attack`` function (see corpus.py)."""
