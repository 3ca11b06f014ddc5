#!/usr/bin/env bash
# setup_peers.sh: today's PyTorch as the peer of the benchmarks and peer tests, in the project's
# own virtual environment .venv-peers (git-ignored; never the system Python):
#   torch        the newest on PyPI. PyPI has no CPU-only x86_64 wheel (those live on PyTorch's
#                own index, which our machines cannot reach), so the CUDA wheel comes with its
#                nvidia-* / cuda-* packages: about 4-5 GB on disk. Its share/cmake/Torch is the
#                LibTorch that ember-bench-wordlm's C++ peer and ember-bench-autograd build against.
#   tensorboard  the peer reader of ember's event files.
#   torchft      only where it installs beside that torch (pip's resolver may not downgrade torch).
# Idempotent: a second run installs nothing new and prints the same versions. Not part of CI's
# default run (scripts/test.sh): the wheels are large. Without this environment, every peer
# benchmark line and peer test skips with a one-line reason and the Debian python3 (torch 1.13)
# stays the fallback peer.
# EMBER_PEERS_VENV=DIR puts the environment elsewhere; EMBER_PEERS_PYTHON picks the interpreter
# that creates it (default Debian's /usr/bin/python3).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="${EMBER_PEERS_VENV:-$root/.venv-peers}"
base_python="${EMBER_PEERS_PYTHON:-/usr/bin/python3}"
if [ ! -x "$venv/bin/python" ]; then
  "$base_python" -m venv "$venv" || {
    echo "setup_peers.sh: '$base_python -m venv' failed (Debian: apt-get install python3-venv)" >&2
    exit 1
  }
fi
py="$venv/bin/python"
pip_install() { "$py" -m pip install --disable-pip-version-check -q "$@"; }
# -I: isolated, so the working directory is not on sys.path (from the repository root, `import
# tensorboard` would find ember's own tensorboard/ folder as a namespace package).
installed() { "$py" -I -c "import $1" >/dev/null 2>&1; }

installed torch || pip_install torch
installed tensorboard || pip_install tensorboard
if ! installed torchft; then
  # The resolver must keep the torch just installed; if torchft asks for another, skip it.
  # (The pin drops the local label: "2.15.0+cu132" is what PyPI calls 2.15.0.)
  torch_version="$("$py" -c 'import torch; print(torch.__version__)')"
  torch_pin="torch==${torch_version%%+*}"
  if ! pip_install torchft "$torch_pin"; then
    echo "setup_peers.sh: torchft does not install beside $torch_pin; left out" >&2
  fi
fi

"$py" -I - <<'EOF'
import importlib, importlib.metadata
import torch
print(f"peer_python {__import__('sys').executable}")
for name in ("torch", "tensorboard", "torchft"):
    try:
        mod = importlib.import_module(name)
        print(f"{name} {getattr(mod, '__version__', None) or importlib.metadata.version(name)}")
    except Exception as e:  # a peer that does not import is reported, not fatal
        print(f"{name} absent ({type(e).__name__})")
print(f"torch_cmake_prefix {torch.utils.cmake_prefix_path}")
print(f"torch_cxx11_abi {int(torch._C._GLIBCXX_USE_CXX11_ABI)}")
EOF
