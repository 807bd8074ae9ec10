# storekitd — the two commands first: `make run` and `make test`. Both install missing Debian
# packages (needs root or sudo), build, and go.
PREFIX ?= /usr/local
DESTDIR ?=
SWIFT ?= swift
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# Debian packages, by purpose. `make build`/`make run`/`make install` need only the first two
# lists; `make test` also installs the real components the tests run (journald, socket activation,
# dbus-daemon with python3-dbusmock, redis for the benchmark peer, PostgreSQL 15 for the PostgreSQL
# ledger's tests, which start their own server in a temporary directory); `make deb` and
# `make test-system` add the packaging tools and a container to boot a real systemd in.
BUILD_PACKAGES := libsqlite3-dev libsystemd-dev libssl-dev libpq-dev pkgconf
RUNTIME_PACKAGES := procps
TEST_PACKAGES := groff-base sqlite3 gcc libc6-dev systemd dbus-daemon python3-dbusmock redis-server util-linux openssl python3-jwt python3-cryptography python3-venv \
	postgresql-15
DEB_PACKAGES := debhelper dpkg-dev lintian dh-python python3
SYSTEM_TEST_PACKAGES := debootstrap systemd-container
APT_PACKAGES := $(BUILD_PACKAGES) $(RUNTIME_PACKAGES)
CONFIG ?= config/storekitd.conf
# Fuzzing: a bounded run per target inside `make test`, a long one with `make fuzz`.
TEST_FUZZ_SECONDS ?= 15
FUZZ_SECONDS ?= 600

.PHONY: all swift-check deps test-deps deb-deps build run test bench install install-files clean fuzz torture torture-power test-sanitize \
	deb lint-deb test-system

all: build

# Installs the missing ones of PACKAGES (default: what building and running need).
PACKAGES = $(APT_PACKAGES)
deps:
	@missing=""; for p in $(PACKAGES); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then echo "Installing:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing >/dev/null; fi

test-deps:
	@$(MAKE) --no-print-directory deps PACKAGES="$(APT_PACKAGES) $(TEST_PACKAGES)"
	@scripts/verifiers/setup.sh .build/verifiers

deb-deps:
	@$(MAKE) --no-print-directory deps PACKAGES="$(APT_PACKAGES) $(DEB_PACKAGES)"

# One line instead of "swift: command not found" halfway through: Debian does not package Swift.
swift-check:
	@command -v $(SWIFT) >/dev/null 2>&1 || { echo "make: '$(SWIFT)' not found: install the Swift 6 toolchain for Debian 12 (the Linux tarball from swift.org), put its usr/bin on PATH or run make SWIFT=/path/to/swift (README, 'First, on a fresh Debian 12')" >&2; exit 1; }

build: swift-check deps
	$(SWIFT) build

# Starts storekitd in the foreground on the sample config; Ctrl-C stops it cleanly.
run: build
	exec .build/debug/storekitd --config $(CONFIG)

# The wire codec's libFuzzer targets, then requests through the engine and the store
# (storekitd-fuzz: seeded random inputs here, coverage-guided libFuzzer with `make fuzz`).
test: swift-check test-deps
	$(SWIFT) build --build-tests
	scripts/fuzz.sh $(TEST_FUZZ_SECONDS)
	$(SWIFT) build --product storekitd-fuzz
	SWIFT_BACKTRACE=enable=no .build/debug/storekitd-fuzz --seconds $(TEST_FUZZ_SECONDS)
	$(MAKE) libstorekit
	$(SWIFT) test --skip-build

fuzz: swift-check test-deps
	scripts/fuzz.sh $(FUZZ_SECONDS)
	scripts/fuzz-requests.sh $(FUZZ_SECONDS)

# The whole suite once under AddressSanitizer and once under ThreadSanitizer.
test-sanitize: swift-check test-deps
	scripts/test-sanitize.sh

# BENCH_FLAGS passes flags to storekitd-bench, e.g. `make bench BENCH_FLAGS="--only postgres"`.
BENCH_FLAGS ?=
bench: swift-check test-deps
	$(SWIFT) build -c release --product storekitd-bench
	$(SWIFT) build -c release --product storekitd
	.build/release/storekitd-bench $(BENCH_FLAGS)

# `make install` builds in release mode; `install-files` only copies (BUILD_DIR selects the build).
BUILD_DIR ?= .build/release
install: swift-check deps
	$(SWIFT) build -c release
	$(MAKE) install-files BUILD_DIR=.build/release
	@if [ -z "$(DESTDIR)" ] && [ -d /run/systemd/system ]; then \
	  systemd-sysusers storekitd.conf; journalctl --update-catalog; systemctl daemon-reload; \
	  echo "Installed. Start with: systemctl enable --now storekitd.socket"; fi

# 1,000 cycles of: clients buying and finishing, kill -9 at a random moment, restart, check; the verdict
# is kept in .build/torture-verdict.txt (STOREKIT_TORTURE_SEED=N replays a run's printed seed).
torture: swift-check test-deps
	$(SWIFT) build --build-tests
	STOREKIT_TORTURE_CYCLES=$${STOREKIT_TORTURE_CYCLES:-1000} $(SWIFT) test --skip-build --filter NothingLostTortureTests/killNineUnderLoadLosesNothing
	@cat .build/torture-verdict.txt

# 10,000 crash states a power cut can leave, built from a real daemon's recorded writes and syncs,
# each opened by the real daemon and checked (docs/powercut.md); the verdict is kept in
# .build/powercut-verdict.txt (POWERCUT_SEED=N replays a run's printed seed).
torture-power: swift-check test-deps
	$(SWIFT) build --build-tests
	POWERCUT_STATES=$${POWERCUT_STATES:-10000} $(SWIFT) test --skip-build --filter PowerCutTests
	@cat .build/powercut-verdict.txt

# The installed layout, the same as the Debian package's: units, sysusers.d entry and catalog under
# $(PREFIX)/lib, the polkit rule where polkitd reads rules (/usr/share for PREFIX=/usr, else /etc),
# man pages, docs, the sample configuration in /etc/storekitd (existing files are kept), and the
# examples in share/doc/storekit-examples/examples as the storekit-examples package has them: the
# model observer unit (a template to copy, not a system unit) and the C and Python examples.
POLKIT_RULES_DIR ?= $(if $(filter /usr,$(PREFIX)),/usr/share/polkit-1/rules.d,/etc/polkit-1/rules.d)
UNITS := storekitd.service storekitd.socket storekitd-control.socket
MAN_PAGES := $(wildcard man/*.[0-9])
EXAMPLES_DIR = $(PREFIX)/share/doc/storekit-examples/examples
install-files:
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)/etc/storekitd/apps.d $(DESTDIR)/etc/storekitd/catalog \
	  $(DESTDIR)$(PREFIX)/lib/systemd/system $(DESTDIR)$(PREFIX)/lib/systemd/catalog $(DESTDIR)$(PREFIX)/lib/sysusers.d \
	  $(DESTDIR)$(POLKIT_RULES_DIR) $(DESTDIR)$(PREFIX)/share/doc/storekitd $(DESTDIR)$(EXAMPLES_DIR)/c $(DESTDIR)$(EXAMPLES_DIR)/python
	install -m 0755 $(BUILD_DIR)/storekitd $(BUILD_DIR)/storekit-example-app $(BUILD_DIR)/storekit2-example-app $(DESTDIR)$(PREFIX)/bin/
	ln -sf storekitd $(DESTDIR)$(PREFIX)/bin/storekitctl
	for f in config/storekitd.conf config/apps.d/*.conf config/catalog/*.storekit $$(find config/content -type f | sort); do \
	  t=$(DESTDIR)/etc/storekitd/$${f#config/}; install -d "$$(dirname "$$t")" && { [ -e "$$t" ] || install -m 0644 "$$f" "$$t"; } || exit 1; done
	for u in $(UNITS); do sed 's|/usr/bin/|$(PREFIX)/bin/|g' systemd/$$u > $(DESTDIR)$(PREFIX)/lib/systemd/system/$$u || exit 1; done
	install -m 0644 systemd/storekitd.sysusers $(DESTDIR)$(PREFIX)/lib/sysusers.d/storekitd.conf
	install -m 0644 systemd/storekitd.catalog $(DESTDIR)$(PREFIX)/lib/systemd/catalog/
	sed 's|/usr/bin/|$(PREFIX)/bin/|g' systemd/storekitd.rules > $(DESTDIR)$(POLKIT_RULES_DIR)/storekitd.rules
	for m in $(MAN_PAGES); do s=$${m##*.}; install -d $(DESTDIR)$(PREFIX)/share/man/man$$s && \
	  install -m 0644 $$m $(DESTDIR)$(PREFIX)/share/man/man$$s/ || exit 1; done
	install -m 0644 README.md docs/*.md $(DESTDIR)$(PREFIX)/share/doc/storekitd/
	for f in docs/examples/*; do [ -f "$$f" ] || continue; sed 's|/usr/bin/|$(PREFIX)/bin/|g' "$$f" > $(DESTDIR)$(EXAMPLES_DIR)/$${f##*/} || exit 1; done
	install -m 0644 docs/examples/c/buy-and-finish.c $(DESTDIR)$(EXAMPLES_DIR)/c/
	install -m 0644 docs/examples/python/buy_and_finish.py $(DESTDIR)$(EXAMPLES_DIR)/python/
	$(MAKE) install-libstorekit
	$(MAKE) install-python

# The Debian packages in dist/ (version from debian/changelog): storekitd, libstorekit0,
# libstorekit-dev, python3-storekit and storekit-examples. The Swift binaries are a release build
# with the Swift runtime linked statically, in its own scratch path (.build-deb).
VERSION := $(shell dpkg-parsechangelog -S Version 2>/dev/null)
ARCH := $(shell dpkg --print-architecture)
DEBS := $(foreach p,storekitd libstorekit0 libstorekit-dev storekit-examples,dist/$(p)_$(VERSION)_$(ARCH).deb) \
	dist/python3-storekit_$(VERSION)_all.deb
deb: deb-deps
	dpkg-checkbuilddeps
	debian/rules clean
	debian/rules binary
	@for d in $(DEBS); do printf '%-60s %6s KiB installed\n' "$$(ls -l $$d | awk '{print $$5, $$9}')" "$$(dpkg-deb -f $$d Installed-Size)"; done

lint-deb: deb
	lintian --info $(DEBS)

# The package installed in a Debian 12 rootfs booted with a real systemd (systemd-nspawn), checked
# as non-root users. Slow (minutes); run by .ci/run, not by `make test`. Skips when not root.
test-system:
	@if [ "$$(id -u)" = 0 ]; then $(MAKE) --no-print-directory deps PACKAGES="$(APT_PACKAGES) $(DEB_PACKAGES) $(SYSTEM_TEST_PACKAGES)" \
	  || echo "test-system: could not install $(DEB_PACKAGES) $(SYSTEM_TEST_PACKAGES)"; fi
	scripts/test-system.sh

include python/python.mk

clean:
	rm -rf .build .build-deb dist debian/build
	[ ! -x debian/rules ] || debian/rules clean

include libstorekit/libstorekit.mk
