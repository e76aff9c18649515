"""Golden vectors: regenerating from the fixed inputs and test-only key is byte-identical."""

from __future__ import annotations

from pathlib import Path

from tests.vectors.make_vectors import HERE, OUTPUTS, generate


def test_regenerated_vectors_are_byte_identical(tmp_path: Path) -> None:
    generate(tmp_path)
    for name in OUTPUTS:
        assert (tmp_path / name).read_bytes() == (HERE / "golden" / name).read_bytes(), (
            f"{name} changed: if the format change is intended, run "
            "`python -m tests.vectors.make_vectors` and commit the new vectors"
        )
