#!/usr/bin/env bash
# Runs one case of tests/server/server_test.py against build/snapkv with a Python that has the
# official `openai` package (cases openai and nginx): a virtual environment under the build
# directory, made (pip install openai) on first use. Usage: run_server_test.sh BUILD_DIR CASE
set -euo pipefail
build="$1"; case_="$2"
here="$(cd "$(dirname "$0")" && pwd)"
venv="$build/venv-server/openai"
py=python3
if [[ "$case_" == openai || ( "$case_" == nginx && -x "$(command -v nginx || echo /usr/sbin/nginx)" ) ]]; then
  if ! "$venv/bin/python" -c "import openai" 2>/dev/null; then
    # One test may make it while another waits: a lock keeps two pip runs apart.
    mkdir -p "$build/venv-server"
    (
      flock 9
      if ! "$venv/bin/python" -c "import openai" 2>/dev/null; then
        python3 -m venv "$venv"
        "$venv/bin/pip" install -q --disable-pip-version-check openai
      fi
    ) 9>"$build/venv-server/.lock"
  fi
  py="$venv/bin/python"
fi
# Servers and CLI runs use one thread each; OpenMP threads sleep instead of spinning.
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
exec "$py" "$here/server_test.py" --bin "$build/snapkv" --case "$case_"
