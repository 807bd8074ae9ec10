# The Python module `storekit` (python/storekit, over libstorekit through ctypes; stdlib only).
# `make install-python` copies it to Debian's shared dist-packages for PREFIX=/usr (the
# python3-storekit package: dh_python3 byte-compiles at installation), else to the site
# directory of PREFIX that $(PYTHON) reads: PREFIX/lib/python3.X/dist-packages for Debian's
# Python, PREFIX/lib/python3.X/site-packages for others. PYTHON_SITE_DIR= overrides. PYTHON is
# Debian's python3 when there is one (a python3 earlier on PATH, e.g. pyenv's, reads other dirs).
PYTHON ?= $(if $(wildcard /usr/bin/python3),/usr/bin/python3,python3)
PYTHON_SITE_DIR ?= $(if $(filter /usr,$(PREFIX)),$(PREFIX)/lib/python3/dist-packages,$(shell $(PYTHON) -c \
	'import sys, sysconfig; p = sys.argv[1]; v = "%d.%d" % sys.version_info[:2]; print(p + "/lib/python" + v + "/dist-packages" if "deb_system" in sysconfig.get_scheme_names() else sysconfig.get_path("purelib", "posix_prefix", vars={"base": p, "platbase": p}))' \
	'$(PREFIX)'))
PYTHON_MODULE_FILES := $(wildcard python/storekit/*.py)

.PHONY: install-python

install-python:
	@[ -n "$(PYTHON_SITE_DIR)" ] || { echo "install-python: no site directory for PREFIX=$(PREFIX) ($(PYTHON) missing?); set PYTHON_SITE_DIR=" >&2; exit 1; }
	install -d $(DESTDIR)$(PYTHON_SITE_DIR)/storekit
	install -m 0644 $(PYTHON_MODULE_FILES) $(DESTDIR)$(PYTHON_SITE_DIR)/storekit/
