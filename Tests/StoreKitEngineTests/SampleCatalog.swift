import StoreKitTestSupport

/// The sample catalogue (`config/catalog/example.storekit`) the engine tests sell, and its products.
enum SampleCatalog {
    static let path = Paths.sampleConfig + "/catalog/example.storekit"

    static let coins = "com.example.game.coins100"
    static let levelPack = "com.example.game.level_pack"
    static let monthly = "com.example.game.premium.monthly"
    static let yearly = "com.example.game.premium.yearly"
    static let seasonPass = "com.example.game.season_pass"
}
