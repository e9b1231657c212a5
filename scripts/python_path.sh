#!/usr/bin/env bash
# make python: puts the Python package (python/) and the built extension (BUILD/python/) on
# Debian's /usr/bin/python3 path with a .pth file in its site directory, so that
# `import tessera` works from any folder (docs/python.md).
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SITE=$(/usr/bin/python3 -c 'import site; print(site.getsitepackages()[0])')
mkdir -p "$SITE"
printf '%s\n%s\n' "$ROOT/python" "$BUILD/python" > "$SITE/tessera.pth"
/usr/bin/python3 -c 'import tessera, _tessera; print("import tessera: ok (" + tessera.__file__ + ")")'
echo "wrote $SITE/tessera.pth"
