import StoreKitDaemon
#if canImport(Glibc)
import Glibc
#endif

exit(Daemon.main(CommandLine.arguments))
