import StoreKitCtl
import StoreKitDaemon
#if canImport(Glibc)
import Glibc
#endif

// One binary, two commands: called as storekitctl (the package installs storekitctl as a link to
// storekitd) it is the administration tool, so the package carries one copy of the Swift runtime
// and FoundationEssentials instead of two.
if let name = CommandLine.arguments.first?.split(separator: "/").last, name == "storekitctl" {
    exit(StoreKitCtl.main(Array(CommandLine.arguments.dropFirst())))
}
exit(Daemon.main(CommandLine.arguments))
