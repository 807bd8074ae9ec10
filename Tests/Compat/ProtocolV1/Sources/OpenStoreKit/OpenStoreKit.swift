// `import OpenStoreKit` makes Foundation visible, as `import StoreKit` does on Apple platforms.
@_exported import Foundation
