import OpenStoreKit

// An app written the way the StoreKit documentation says: one observer added at launch and kept
// for the life of the process; content unlocked (into a ledger) before a transaction is finished.
exit(ExampleApp.main(Array(CommandLine.arguments.dropFirst())))
