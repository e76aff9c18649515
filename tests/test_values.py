"""The one parser per kind of value (``k3kit._values``), and the attacks it stops, each tried the
way its author would: through the CLI or a signed document, with the actual bytes.

- a timestamp with non-ASCII digits (Arabic-Indic, fullwidth) once matched ``\\d`` and sorted
  after every ASCII year, so a root written to expire in 2020 never expired;
- ``--amount 2^63`` overflowed the ledger's BIGINT and ``--valid-from 9999-12-31T23:59:59Z``
  overflowed ``datetime``: both were exit 70;
- ``SOURCE_DATE_EPOCH=²`` passed ``isdigit()`` and crashed ``int()``.
"""

from __future__ import annotations

import json
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from k3kit._canonical import dumps
from k3kit._values import (
    add_days,
    ascii_decimal,
    ascii_int,
    canonical_timestamp,
    compile_pattern,
    format_timestamp,
    normalise_timestamp,
    parse_timestamp,
    pattern_matches,
)
from tests.conftest import ROOT, GoldenKit, KeyFiles, run_k3kit
from tests.launchkit import hand_signed
from tests.ledgerkit import sign_licence
from tests.trustkit import keypair, raw_root, root_v1

ARABIC_2020 = "\u0662\u0660\u0662\u0660"  # ٢٠٢٠
PREFLIGHT = ROOT / "tests" / "data" / "preflight"
FULLWIDTH_2020 = "\uff12\uff10\uff12\uff10"  # ２０２０


@pytest.mark.parametrize(
    "text",
    [
        f"{ARABIC_2020}-01-01T00:00:00Z",
        f"{FULLWIDTH_2020}-01-01T00:00:00Z",
        "2020-01-01T00:00:0\u0665Z",  # one Arabic-Indic digit in the seconds
        "2020-02-30T00:00:00Z",  # no such day
        "2020-01-01T24:00:00Z",
        "2016-12-31T23:59:60Z",  # leap second: datetime cannot hold it
        "2020-01-01 00:00:00Z",
        "2020-01-01T00:00:00",  # no zone
        "2020-01-01T00:00:00+24:00",
        "",
        "2020-01-01T00:00:00Z\n",
    ],
)
def test_timestamp_parser_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        parse_timestamp(text)


def test_timestamp_parser_reads_rfc3339_to_aware_utc() -> None:
    assert parse_timestamp("2026-01-31T13:00:00+01:00") == datetime(2026, 1, 31, 12, tzinfo=UTC)
    assert parse_timestamp("2026-01-31t12:00:00.5z").microsecond == 500000
    assert normalise_timestamp("2026-01-31T07:00:00-05:00") == "2026-01-31T12:00:00Z"
    assert canonical_timestamp("2026-01-31T12:00:00Z") == "2026-01-31T12:00:00Z"
    with pytest.raises(ValueError):
        canonical_timestamp("2026-01-31T13:00:00+01:00")  # a signed document has one spelling
    with pytest.raises(ValueError):
        add_days("9999-12-31T23:59:59Z", 1)


def test_ascii_int_refuses_other_digits_and_ranges() -> None:
    assert ascii_int("250000", lo=1, hi=10**15) == 250000
    for text in ("\uff11\uff10", "\u0661", "²", "1_000", "+5", " 5", "5 ", "0x10", str(2**63)):
        with pytest.raises(ValueError):
            ascii_int(text, lo=1, hi=10**15)


def test_pattern_helper_bounds_length_and_errors() -> None:
    assert pattern_matches(compile_pattern("NVIDIA H200.*"), "NVIDIA H200 141GB HBM3e")
    assert pattern_matches(compile_pattern("H200"), "NVIDIA H200")  # "contains"
    assert not pattern_matches(compile_pattern("H200"), "NVIDIA H200", whole=True)
    # the subject is cut to 256 characters: a match beyond cannot be found (or cost anything)
    assert not pattern_matches(compile_pattern("H200"), "x" * 300 + "H200")
    for bad in ("(", "a" * 257, "", "[z-a]", "(?P<x>a)(?P<x>b)", "(a+)+$", "(a|aa)*", r"(a)\1"):
        with pytest.raises(ValueError):
            compile_pattern(bad)


def test_root_written_to_expire_in_2020_with_arabic_digits_is_refused(
    golden: GoldenKit, tmp_path: Path
) -> None:
    """The root-key holder (or whoever tricked them) signs a root whose expiry, in Arabic-Indic
    digits, sorted after every ASCII date: it never expired. Now it does not even parse."""
    root_key = keypair(tmp_path / "keys", "root")
    body = root_v1([root_key], [golden.key]).to_dict()
    body["expires"] = f"{ARABIC_2020}-01-01T00:00:00Z"
    root = tmp_path / "1.root.json"
    root.write_bytes(raw_root(body, [root_key]))
    proc = run_k3kit(
        "verify", golden.kit, "--root", root, "--state-dir", tmp_path / "state", "--json"
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "ROOT_MALFORMED" in proc.stdout
    assert "VERIFIED" not in proc.stdout


def _purchase(tmp: Path, key: KeyFiles, *extra: str) -> tuple[int, dict[str, object]]:
    db = str(tmp / "ledger.sqlite")
    if not Path(db).exists():
        assert run_k3kit("ledger", "init", "--db", db).returncode == 0
    lic, terms = sign_licence(tmp, key)
    args = ["--payment", "pay-1", "--currency", "EUR", "--package", "kimi-k3-b300x8"]
    done = run_k3kit(
        "ledger", "purchase", "--db", db, "--licence", lic, "--terms", terms, *args, *extra,
        "--json",
    )  # fmt: skip
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, json.loads(done.stdout)


@pytest.mark.parametrize(
    "extra",
    [
        ("--amount", str(2**63)),
        ("--amount", str(10**15 + 1)),
        ("--amount", "\uff11\uff10\uff10"),  # fullwidth 100
        ("--amount", "1_000"),
        ("--amount", "100", "--valid-from", "9999-12-31T23:59:59Z"),
        ("--amount", "100", "--valid-from", f"{ARABIC_2020}-01-01T00:00:00Z"),
        ("--amount", "100", "--term-days", "\u0663\u0666\u0665"),  # ٣٦٥
    ],
)
def test_ledger_purchase_out_of_range_values_are_input_errors(
    tmp_path: Path, signing_key: KeyFiles, extra: tuple[str, ...]
) -> None:
    rc, out = _purchase(tmp_path, signing_key, *extra)
    assert rc == 3, out
    assert out["error"]["code"] == "BAD_INPUT"  # type: ignore[index]


def test_ledger_purchase_accepts_an_offset_and_stores_utc(
    tmp_path: Path, signing_key: KeyFiles
) -> None:
    rc, out = _purchase(
        tmp_path, signing_key, "--amount", "250000", "--valid-from", "2026-01-01T01:00:00+01:00"
    )
    assert rc == 0, out
    assert out["valid_from"] == "2026-01-01T00:00:00Z"
    assert out["valid_until"] == "2027-01-01T00:00:00Z"


def test_ledger_purchase_of_a_term_from_year_999_is_stored_with_four_digit_years(
    tmp_path: Path, signing_key: KeyFiles
) -> None:
    """A valid RFC 3339 instant before year 1000 was written back as ``999-...`` (strftime's
    unpadded %Y), refused by the same parser, and reported as a timestamp the user never typed."""
    rc, out = _purchase(
        tmp_path, signing_key, "--amount", "250000", "--valid-from", "0999-06-01T00:00:00Z"
    )
    assert rc == 0, out
    assert out["valid_from"] == "0999-06-01T00:00:00Z"
    assert out["valid_until"] == "1000-06-01T00:00:00Z"  # 1000 is no leap year


@pytest.mark.parametrize("year", [1, 9, 99, 999, 1000, 2026, 9999])
def test_every_instant_the_parser_reads_is_written_back_in_the_form_it_accepts(year: int) -> None:
    text = f"{year:04d}-02-28T23:59:59Z"
    assert format_timestamp(parse_timestamp(text)) == text
    assert canonical_timestamp(normalise_timestamp(text)) == text


@pytest.mark.parametrize("epoch", ["\u00b2", "\u0661\u0662", str(10**20)])
def test_source_date_epoch_with_a_superscript_digit_falls_back_to_the_clock(
    tmp_path: Path, epoch: str
) -> None:
    """'²' passed isdigit() and crashed int() (exit 70); 10^20 overflowed gmtime."""
    env = {**os.environ, "SOURCE_DATE_EPOCH": epoch}
    done = run_k3kit("ledger", "init", "--db", tmp_path / "l.sqlite", "--json", env=env)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("pattern", ["(", "(B+)+$", "(a|ab)*c", "x" * 101, "(.)\\1"])
def test_preflight_with_a_hostile_gpu_pattern_in_kit_json_is_an_input_error(
    golden: GoldenKit, tmp_path: Path, pattern: str
) -> None:
    """The publisher signs a pattern that does not compile or backtracks exponentially (preflight
    judges only a kit that verified); it was exit 70 (or a hang)."""
    kit = tmp_path / "kit"
    shutil.copytree(golden.kit, kit)

    def hostile(data: bytes) -> bytes:
        doc = json.loads(data)
        doc["hardware"]["gpu_name_pattern"] = pattern
        return dumps(doc)

    hand_signed(kit, golden.key, "kit.json", hostile)
    proc = run_k3kit(
        "preflight", kit, "--trust", golden.key.public, "--profile", "interactive", "--json",
        "--nvidia-smi-xml", PREFLIGHT / "b300x8.synthetic.xml",
        "--os-facts", PREFLIGHT / "node-os.synthetic.json",
    )  # fmt: skip
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 1, proc.stdout + proc.stderr
    refused = [
        c for c in json.loads(proc.stdout)["checks"] if c.get("code") == "KIT_INFO_MALFORMED"
    ]
    assert refused and "gpu_name_pattern" in refused[0]["detail"], proc.stdout


def test_preflight_requirements_refuse_a_pattern_that_slipped_past_the_model() -> None:
    """Defence in depth: preflight compiles through the same helper, with its own code."""
    from k3kit.errors import InputError
    from k3kit.preflight._checks import Requirements

    fields = dict.fromkeys(Requirements._fields)
    req = Requirements(**{**fields, "gpu_name_pattern": "(a+)+$"})  # type: ignore[arg-type]
    with pytest.raises(InputError) as info:
        _ = req.gpu_pattern
    assert info.value.code == "PATTERN_REFUSED"


@pytest.mark.parametrize(
    "argv",
    [
        ("accept", "kit", "--tolerance", "nan"),  # nan passed click.FloatRange(0, 100)
        ("accept", "kit", "--tolerance", "\uff11\uff10"),  # fullwidth 10
        ("accept", "kit", "--requests", "1_000"),
        ("root", "create", "-o", "r.json", "--root-threshold", "\u0661"),  # Arabic-Indic 1
    ],
)
def test_cli_numbers_are_ascii_and_finite(tmp_path: Path, argv: tuple[str, ...]) -> None:
    done = run_k3kit(*argv, "--json", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "digits 0-9" in done.stderr


def test_ascii_decimal_refuses_nan_and_exponents() -> None:
    assert ascii_decimal("2.5", lo=0, hi=100) == 2.5
    for text in ("nan", "inf", "1e3", "1_0", "\uff11", "-1", "101"):
        with pytest.raises(ValueError):
            ascii_decimal(text, lo=0, hi=100)


@pytest.mark.parametrize("text", ["\uff12\uff13\uff10\uff10", "2_300", " 2300", "NaN"])
def test_a_measured_figure_written_with_other_digits_is_refused(text: str) -> None:
    """Decimal() reads '２３００' and '2_300' as 2300: a second spelling of one signed price."""
    from pydantic import ValidationError

    from k3kit.models.package import Price

    with pytest.raises(ValidationError):
        Price.model_validate({"currency": "USD", "amount": text, "maintenance_per_month": "1"})
    assert str(Price.model_validate({"currency": "USD", "amount": "7.4E+3",
                                     "maintenance_per_month": "1"}).amount) == "7.4E+3"  # fmt: skip


@pytest.mark.parametrize("spelling", ["２", "1_0", "-1", "0", "99999999999999999999"])
def test_channel_thresholds_take_ascii_digits_only(tmp_path: Path, spelling: str) -> None:
    """`channel init --root-threshold` and `channel rotate --threshold` were click's own int,
    which reads `２` and `1_0` as 2 and 10: every other count on the command line takes ASCII
    digits within a range (cli._shared.Whole). Refused as a usage error, nothing written."""
    repo = tmp_path / "repo"
    init = run_k3kit("channel", "init", "--repo", repo, "--root-threshold", spelling)
    assert init.returncode == 2 and "--root-threshold" in init.stderr, init.stderr
    assert not repo.exists()
    rotate = run_k3kit("channel", "rotate", "--repo", repo, "--role", "targets",
                       "--threshold", spelling, "--key", "x")  # fmt: skip
    assert rotate.returncode == 2 and "--threshold" in rotate.stderr, rotate.stderr
    assert not repo.exists()


def test_is_lower_hex_is_the_hex_pattern_read_whole() -> None:
    """The one lower-case-hex test (commits, digests, keys, signatures) against the patterns it
    replaced, read whole: every string of up to 3 characters from an alphabet with the near
    misses (upper case, a space, a newline, a non-ASCII digit), at each length asked for."""
    import itertools
    import re

    from k3kit._values import is_lower_hex

    alphabet = ("0", "9", "a", "f", "g", "A", "F", " ", "\n", "\u0661")
    for digits in (1, 2, 3):
        pattern = re.compile(rf"^[0-9a-f]{{{digits}}}$")
        for length in (0, 1, 2, 3, 4):
            for chars in itertools.product(alphabet, repeat=length):
                text = "".join(chars)
                assert is_lower_hex(text, digits) == bool(pattern.fullmatch(text)), text
    assert is_lower_hex("ab" * 32, 64) and not is_lower_hex("ab" * 32 + "\n", 64)
    assert not is_lower_hex(None, 40) and not is_lower_hex(b"ab", 2)
