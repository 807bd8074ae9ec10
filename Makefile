# storekitd — the two commands first: `make run` and `make test`. Both install missing Debian
# packages (needs root or sudo), build, and go.
PREFIX ?= /usr/local
DESTDIR ?=
SWIFT ?= swift
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# Build and runtime libraries, plus the real components the tests run (journald, socket
# activation, dbus-daemon with python3-dbusmock, redis for the benchmark peer).
APT_PACKAGES := libsqlite3-dev libsystemd-dev sqlite3 systemd dbus-daemon python3-dbusmock redis-server util-linux
CONFIG ?= config/storekitd.conf
# Fuzzing: a bounded run per target inside `make test`, a long one with `make fuzz`.
TEST_FUZZ_SECONDS ?= 15
FUZZ_SECONDS ?= 600

.PHONY: all deps build run test bench install install-files clean fuzz torture test-sanitize

all: build

deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then echo "Installing:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing >/dev/null; fi

build: deps
	$(SWIFT) build

# Starts storekitd in the foreground on the sample config; Ctrl-C stops it cleanly.
run: build
	exec .build/debug/storekitd --config $(CONFIG)

test: deps
	$(SWIFT) build --build-tests
	scripts/fuzz.sh $(TEST_FUZZ_SECONDS)
	$(SWIFT) test --skip-build

fuzz: deps
	scripts/fuzz.sh $(FUZZ_SECONDS)

# The whole suite once under AddressSanitizer and once under ThreadSanitizer.
test-sanitize: deps
	scripts/test-sanitize.sh

bench: deps
	$(SWIFT) build -c release --product storekitd-bench
	$(SWIFT) build -c release --product storekitd
	.build/release/storekitd-bench

# `make install` builds in release mode; `install-files` only copies (BUILD_DIR selects the build).
BUILD_DIR ?= .build/release
install: deps
	$(SWIFT) build -c release
	$(MAKE) install-files BUILD_DIR=.build/release

# Many cycles of: clients buying and finishing, kill -9 at a random moment, restart, check.
torture: deps
	$(SWIFT) build --build-tests
	STOREKIT_TORTURE_CYCLES=$${STOREKIT_TORTURE_CYCLES:-300} $(SWIFT) test --skip-build --filter NothingLostTortureTests

install-files:
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)/etc/storekitd/apps.d $(DESTDIR)/etc/storekitd/catalog \
	  $(DESTDIR)$(PREFIX)/lib/systemd/system $(DESTDIR)$(PREFIX)/lib/systemd/catalog
	install -m 0755 $(BUILD_DIR)/storekitd $(BUILD_DIR)/storekitctl $(BUILD_DIR)/storekit-example-app $(DESTDIR)$(PREFIX)/bin/
	install -m 0644 config/storekitd.conf $(DESTDIR)/etc/storekitd/storekitd.conf
	install -m 0644 config/apps.d/*.conf $(DESTDIR)/etc/storekitd/apps.d/
	install -m 0644 config/catalog/*.storekit $(DESTDIR)/etc/storekitd/catalog/
	for f in systemd/*.service systemd/*.socket; do [ -e "$$f" ] && sed 's|/usr/bin/|$(PREFIX)/bin/|g' $$f > $(DESTDIR)$(PREFIX)/lib/systemd/system/$$(basename $$f); done; true
	[ ! -e systemd/storekitd.catalog ] || install -m 0644 systemd/storekitd.catalog $(DESTDIR)$(PREFIX)/lib/systemd/catalog/

clean:
	rm -rf .build
