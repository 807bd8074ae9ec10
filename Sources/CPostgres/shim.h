// libpq from Debian's libpq-dev (pkg-config libpq: -I/usr/include/postgresql -lpq).
#include <libpq-fe.h>
