#!/bin/sh
# Installs Apple's App Store Server Library from PyPI into a virtual environment for the tests
# (.build/verifiers). Without network access this fails quietly and the tests that need it say
# they were skipped, and why.
set -u
venv="${1:-.build/verifiers}"
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import appstoreserverlibrary" 2>/dev/null; then exit 0; fi
python3 -m venv "$venv" >/dev/null 2>&1 || { echo "verifiers: python3 -m venv failed (python3-venv missing?)"; exit 0; }
"$venv/bin/pip" install --quiet --disable-pip-version-check app-store-server-library >/dev/null 2>&1 \
  || echo "verifiers: could not install app-store-server-library from PyPI; its tests will be skipped"
exit 0
