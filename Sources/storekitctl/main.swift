import FoundationEssentials
import Glibc

// storekitctl: parse → send one control command → print → exit 0 / 1 (failure) / 64 (usage).
exit(StoreKitCtl.main(Array(CommandLine.arguments.dropFirst())))
