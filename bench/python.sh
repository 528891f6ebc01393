#!/usr/bin/env bash
# dpc from PyTorch as a user brings a model (issue 65): bench/python_torch.py trains torchvision's
# resnet18 and HuggingFace's GPT-2 (tiny) from DataLoaders through dpc.compile, puts the weights back
# into the modules and compares them bit for bit with the executable's; it prints the seconds of each
# phase and PyTorch eager's step beside dpc's. PY: a Python with torch, torchvision, transformers and
# onnxscript; without it, a venv under bench/out/venv is made from PyPI (about 5 GB).
set -eu
cd "$(dirname "$0")/.."
make -s all
out=bench/out/python
mkdir -p "$out"
PY=${PY:-}
if [ -z "$PY" ]; then
	if [ ! -x bench/out/venv/bin/python ]; then
		python3 -m venv bench/out/venv
		bench/out/venv/bin/pip install -q torch torchvision transformers onnxscript "onnx==1.23.2"
	fi
	PY=bench/out/venv/bin/python
fi
PYTHONPATH="$PWD/python" DPC="$PWD/bin/dpc" DPC_TARGET="${DPC_TARGET:-cpu}" "$PY" bench/python_torch.py "$out"
