#!/usr/bin/env bash
# Make the OPTIONAL engine venv (.engines/venv, git-ignored) used by scripts/engine_snapshot.py and
# tests/test_engines_parser.py: the vLLM and SGLang wheels WITHOUT their GPU dependencies, the
# CPU torch, and the pure-Python packages their argument parsers import. Several GB; not part of
# `make test` (those tests skip with a reason when this venv is absent).
# Usage: scripts/engine-env.sh [VLLM_VERSION] [SGLANG_VERSION]
set -euo pipefail
vllm="${1:-0.32.0}"
sglang="${2:-0.5.23}"
venv=".engines/venv"
python3 -m venv "$venv"
"$venv/bin/pip" install -q torch==2.13.0 regex cachetools psutil sentencepiece numpy requests tqdm \
  blake3 py-cpuinfo 'transformers>=5.16.1,<5.20' tokenizers safetensors protobuf 'fastapi[standard]' \
  aiohttp openai pydantic prometheus_client pillow prometheus-fastapi-instrumentator tiktoken \
  partial-json-parser jsonschema pyzmq msgspec pyyaml einops cloudpickle watchfiles \
  python-json-logger pybase64 cbor2 ijson setproctitle anthropic opentelemetry-sdk \
  opentelemetry-api lark mistral_common IPython orjson scipy uvloop xxhash zstandard \
  python-multipart interegular packaging distro nvidia-ml-py oss-harmony openai-harmony \
  'llguidance<1.8,>=1.7' xgrammar apache-tvm-ffi
"$venv/bin/pip" install -q --no-deps "vllm==$vllm" "sglang==$sglang"
echo "engine venv ready: $venv (vllm $vllm, sglang $sglang)"
