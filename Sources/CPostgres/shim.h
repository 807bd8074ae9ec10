// libpq's header from Debian's libpq-dev (pkg-config libpq: -I/usr/include/postgresql). Its types and
// constants only: the functions are not linked but loaded when needed (StoreKitPostgres/LibPQ.swift).
#include <postgresql/libpq-fe.h>
