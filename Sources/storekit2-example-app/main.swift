import OpenStoreKit

// A StoreKit 2 app: an async main, a listener task for the life of the process, no run loop.
exit(await ExampleApp.run(Array(CommandLine.arguments.dropFirst())))
