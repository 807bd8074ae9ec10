import Glibc
import StoreKitCtl

// storekitctl: parse → send one control command → print → exit 0 / 1 (failure) / 64 (usage).
// The package installs storekitctl as a link to storekitd, which runs this same code when called
// by that name (Sources/storekitd/main.swift); this executable is the development build's.
exit(StoreKitCtl.main(Array(CommandLine.arguments.dropFirst())))
