#!/usr/bin/env bash
# Prints the interpreter `make` builds the test venv with: the newest CPython 3.13+ at hand, else
# `python3`.
#
# Why: the suite runs under coverage, and coverage's sys.monitoring core (Python 3.12+, PEP 669)
# costs a fraction of the C tracer's. On the 2-core machine the same 274 tests took 88 s under
# 3.11's tracer and 67 s under 3.13's sys.monitoring, with the same lines counted
# (docs/performance.md, "The test suite's time"). 3.12 is not taken: its sys.monitoring measured
# slower than 3.11's tracer there. k3kit itself supports 3.11+; mypy checks the code as 3.11.
#
# Looked for: `python3.14`/`python3.13` on PATH, then pyenv's installed versions (a machine may
# have them installed without enabling them, so the shims refuse to run them). A candidate is
# taken only if it runs, is CPython 3.13+ and has the standard modules the suite uses (a source
# build without a library's headers silently lacks sqlite3, ssl or lzma).
set -u

fits() {
    "$1" - <<'EOF' >/dev/null 2>&1
import platform, sys
assert platform.python_implementation() == "CPython" and sys.version_info >= (3, 13)
import bz2, ctypes, ensurepip, lzma, sqlite3, ssl, venv, zlib  # noqa: F401
EOF
}

candidates=()
for name in python3.14 python3.13; do
    path=$(command -v "$name" 2>/dev/null) && candidates+=("$path")
done
root=$(pyenv root 2>/dev/null || echo "${PYENV_ROOT:-$HOME/.pyenv}")
if [ -n "$root" ]; then
    # Newest first; a free-threaded build (3.13.0t) is another interpreter, not this one.
    found=()
    for path in "$root"/versions/3.1[3-9].[0-9]*/bin/python3; do
        case $path in */*t/bin/python3) ;; *) [ -x "$path" ] && found+=("$path") ;; esac
    done
    if [ ${#found[@]} -gt 0 ]; then
        while IFS= read -r path; do candidates+=("$path"); done < <(printf '%s\n' "${found[@]}" | sort -rV)
    fi
fi
for path in "${candidates[@]}"; do
    if fits "$path"; then
        echo "$path"
        exit 0
    fi
done
echo python3
