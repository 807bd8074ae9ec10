# libstorekit, the C client library (included by the top-level Makefile).
#
#   make libstorekit            .build/libstorekit/libstorekit.so.0.1.0 (soname libstorekit.so.0),
#                               its symlinks and storekit.pc (for PREFIX)
#   make install-libstorekit    the library, the header, storekit.pc and the section 3 man pages
#                               under DESTDIR/PREFIX (lib in PREFIX/lib/MULTIARCH)
#
# CPPFLAGS, CFLAGS and LDFLAGS from the environment come after the library's own (the package build
# passes dpkg-buildflags' hardening flags this way).
#
# Every exported symbol is listed in libstorekit/libstorekit.map (node LIBSTOREKIT_0) and in
# debian/libstorekit0.symbols; LibStoreKitTests checks that both equal the header's functions.

LIBSTOREKIT_VERSION := 0.1.0
LIBSTOREKIT_SONAME := libstorekit.so.0
LIBSTOREKIT_OUT := .build/libstorekit
LIBSTOREKIT_CC ?= gcc
LIBSTOREKIT_CFLAGS := -std=c11 -Wall -Wextra -Werror -fvisibility=hidden -fPIC -O2 -D_GNU_SOURCE \
	-Ilibstorekit/include $(shell pkg-config --cflags libcrypto)
LIBSTOREKIT_LIBS := $(shell pkg-config --libs libcrypto)
LIBSTOREKIT_SOURCES := $(wildcard libstorekit/src/*.c)
LIBSTOREKIT_HEADERS := $(wildcard libstorekit/src/*.h) libstorekit/include/storekit/storekit.h
LIBSTOREKIT_OBJECTS := $(patsubst libstorekit/src/%.c,$(LIBSTOREKIT_OUT)/obj/%.o,$(LIBSTOREKIT_SOURCES))
LIBSTOREKIT_MULTIARCH := $(or $(DEB_HOST_MULTIARCH),$(shell $(LIBSTOREKIT_CC) -print-multiarch 2>/dev/null))
LIBSTOREKIT_LIBDIR := $(PREFIX)/lib$(if $(LIBSTOREKIT_MULTIARCH),/$(LIBSTOREKIT_MULTIARCH))
# The man pages of section 3 are the library's: one per group of functions, and a symbolic link
# to its group's page for every other function name (`man storekit_finish`). Links rather than
# `.so man3/PAGE.3` stubs: those resolve only from a man hierarchy's root, so groff cannot render
# them from the repository (ManPageTests renders every page in man/); dh_installman makes the
# same links of .so stubs anyway.
LIBSTOREKIT_MAN_PAGES := $(wildcard man/*.3)

.PHONY: libstorekit install-libstorekit

libstorekit: $(LIBSTOREKIT_OUT)/libstorekit.so $(LIBSTOREKIT_OUT)/storekit.pc

$(LIBSTOREKIT_OUT)/obj/%.o: libstorekit/src/%.c $(LIBSTOREKIT_HEADERS)
	@mkdir -p $(@D)
	$(LIBSTOREKIT_CC) $(LIBSTOREKIT_CFLAGS) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

$(LIBSTOREKIT_OUT)/libstorekit.so.$(LIBSTOREKIT_VERSION): $(LIBSTOREKIT_OBJECTS) libstorekit/libstorekit.map
	$(LIBSTOREKIT_CC) -shared $(LDFLAGS) -o $@ $(LIBSTOREKIT_OBJECTS) -Wl,-soname,$(LIBSTOREKIT_SONAME) \
	  -Wl,--version-script,libstorekit/libstorekit.map -Wl,--no-undefined -Wl,-z,relro -Wl,-z,now $(LIBSTOREKIT_LIBS)

$(LIBSTOREKIT_OUT)/libstorekit.so: $(LIBSTOREKIT_OUT)/libstorekit.so.$(LIBSTOREKIT_VERSION)
	ln -sf libstorekit.so.$(LIBSTOREKIT_VERSION) $(LIBSTOREKIT_OUT)/$(LIBSTOREKIT_SONAME)
	ln -sf $(LIBSTOREKIT_SONAME) $@

# Regenerated whenever PREFIX may have changed (it is cheap).
.PHONY: $(LIBSTOREKIT_OUT)/storekit.pc
$(LIBSTOREKIT_OUT)/storekit.pc:
	@mkdir -p $(@D)
	@printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$(LIBSTOREKIT_LIBDIR)' 'includedir=$${prefix}/include' '' \
	  'Name: storekit' 'Description: StoreKit payment queue client for storekitd' 'Version: $(LIBSTOREKIT_VERSION)' \
	  'Libs: -L$${libdir} -lstorekit' 'Cflags: -I$${includedir}' > $@

install-libstorekit: libstorekit
	install -d $(DESTDIR)$(LIBSTOREKIT_LIBDIR)/pkgconfig $(DESTDIR)$(PREFIX)/include/storekit $(DESTDIR)$(PREFIX)/share/man/man3
	install -m 0644 $(LIBSTOREKIT_OUT)/libstorekit.so.$(LIBSTOREKIT_VERSION) $(DESTDIR)$(LIBSTOREKIT_LIBDIR)/
	ln -sf libstorekit.so.$(LIBSTOREKIT_VERSION) $(DESTDIR)$(LIBSTOREKIT_LIBDIR)/$(LIBSTOREKIT_SONAME)
	ln -sf $(LIBSTOREKIT_SONAME) $(DESTDIR)$(LIBSTOREKIT_LIBDIR)/libstorekit.so
	install -m 0644 libstorekit/include/storekit/storekit.h $(DESTDIR)$(PREFIX)/include/storekit/
	install -m 0644 $(LIBSTOREKIT_OUT)/storekit.pc $(DESTDIR)$(LIBSTOREKIT_LIBDIR)/pkgconfig/
	for m in $(LIBSTOREKIT_MAN_PAGES); do \
	  if [ -L $$m ]; then ln -sfn "$$(readlink $$m)" $(DESTDIR)$(PREFIX)/share/man/man3/$${m##*/}; \
	  else install -m 0644 $$m $(DESTDIR)$(PREFIX)/share/man/man3/; fi || exit 1; done
