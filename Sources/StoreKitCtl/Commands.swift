import FoundationEssentials
import StoreKitWire

/// `storekitctl status`: the daemon's counters.
struct StatusCommand: Subcommand {
    static let name = "status"
    static let summary = "show the daemon's state (connections, observers, unfinished transactions)"
    static let usage = "Usage: storekitctl status [-o json]\n\nShows the database, connections, observers and unfinished transactions."
    init(_ arguments: inout ArgumentList) throws(UsageError) {}
    var request: (command: ControlCommand, arguments: [String]) { (.status, []) }
    func renderTable(_ json: JSONValue) -> String { renderKeyValues(json) }
}

/// `storekitctl apps`: registered apps.
struct AppsCommand: Subcommand {
    static let name = "apps"
    static let summary = "list registered apps"
    static let usage = "Usage: storekitctl apps [-o json]\n\nLists the apps registered in apps.d with their catalogues."
    init(_ arguments: inout ArgumentList) throws(UsageError) {}
    var request: (command: ControlCommand, arguments: [String]) { (.apps, []) }
    func renderTable(_ json: JSONValue) -> String {
        Table(columns: [("app", "app"), ("products", "products"), ("catalog", "catalog")]).render(json)
    }
}

/// `storekitctl products APP`: the app's catalogue.
struct ProductsCommand: Subcommand {
    static let name = "products"
    static let summary = "list an app's products"
    static let usage = "Usage: storekitctl products APP [-o json]\n\nLists the products of APP's catalogue, with the billing "
        + "plans of subscriptions that have them (with -o json, isDownloadable and the hosted content's version and size)."
    let app: String
    init(_ arguments: inout ArgumentList) throws(UsageError) { app = try arguments.positional("APP") }
    var request: (command: ControlCommand, arguments: [String]) { (.products, ["app=\(app)"]) }
    func renderTable(_ json: JSONValue) -> String {
        Table(columns: [("product", "productIdentifier"), ("type", "type"), ("price", "displayPrice"),
                        ("plans", "plans"), ("title", "localizedTitle")]).render(Self.withPlans(json))
    }

    /// Each product with its billing plans in a line (`plans`): `BILLED_UPFRONT 11.88/P1Y,
    /// MONTHLY 0.5/P1M for P1Y (6.00)`.
    static func withPlans(_ json: JSONValue) -> JSONValue {
        guard case .array(let rows) = json else { return json }
        return .array(rows.map { row in
            guard case .object(var members) = row, case .array(let plans)? = row["billingPlans"] else { return row }
            let text = plans.map { plan in
                let price = "\(Table.text(plan["billingPlanType"])) \(Table.text(plan["displayPrice"]))/\(Table.text(plan["billingPeriod"]))"
                guard plan["billingPeriod"] != plan["commitmentPeriod"] else { return price }
                return price + " for \(Table.text(plan["commitmentPeriod"])) (\(Table.text(plan["commitmentDisplayPrice"])))"
            }
            members.append(("plans", .string(text.joined(separator: ", "))))
            return .object(members)
        })
    }
}

/// `storekitctl content APP PRODUCT`: a product's hosted content.
struct ContentCommand: Subcommand {
    static let name = "content"
    static let summary = "show a product's hosted content (files, sizes, SHA-256)"
    static let usage = """
        Usage: storekitctl content APP PRODUCT [-o json]

        Shows the hosted content of PRODUCT ([HostedContent] in APP's registration) as storekitd
        listed it at its last start or reload: its folder, version, and each file with its size
        and SHA-256, which a buyer's download is checked against.
        """
    let app: String
    let product: String
    init(_ arguments: inout ArgumentList) throws(UsageError) {
        app = try arguments.positional("APP")
        product = try arguments.positional("PRODUCT")
    }
    var request: (command: ControlCommand, arguments: [String]) { (.content, ["app=\(app)", "product=\(product)"]) }
    func renderTable(_ json: JSONValue) -> String {
        guard case .object(let members) = json else { return renderKeyValues(json) }
        let header = members.filter { $0.0 != "files" }
        let files = members.first { $0.0 == "files" }?.1 ?? .array([])
        return renderKeyValues(.object(header)) + "\n"
            + Table(columns: [("file", "path"), ("bytes", "length"), ("sha256", "sha256")]).render(files)
    }
}

/// `storekitctl transactions`: the queue, filtered.
struct TransactionsCommand: Subcommand {
    static let name = "transactions"
    static let summary = "list transactions [--app APP] [--uid N] [--unfinished]"
    static let usage = """
        Usage: storekitctl transactions [--app APP] [--uid N] [--unfinished] [-o json]

        Lists transactions, oldest first. --unfinished shows only those still in the queue.
        """
    var arguments: [String] = []
    init(_ list: inout ArgumentList) throws(UsageError) {
        if let app = try list.option("--app") { arguments.append("app=\(app)") }
        if let uid = try list.number("--uid") { arguments.append("uid=\(uid)") }
        if list.flag("--unfinished") { arguments.append("unfinished=1") }
    }
    var request: (command: ControlCommand, arguments: [String]) { (.transactions, arguments) }
    func renderTable(_ json: JSONValue) -> String {
        Table(columns: [("id", "transactionIdentifier"), ("uid", "uid"), ("app", "app"), ("product", "productIdentifier"),
                        ("state", "state"), ("finished", "finished"), ("seq", "sequence"),
                        ("date", "transactionDate")]).render(json)
    }
}

/// `storekitctl buy APP PRODUCT`: a purchase made outside the app.
struct BuyCommand: Subcommand {
    static let name = "buy"
    static let summary = "buy PRODUCT for APP outside the app [--uid N] [--quantity N]"
    static let usage = """
        Usage: storekitctl buy APP PRODUCT [--uid N] [--quantity N] [-o json]

        Makes a purchase outside the app (as a purchase on another device would): the app's observers
        receive it. --uid defaults to 0.
        """
    var arguments: [String] = []
    init(_ list: inout ArgumentList) throws(UsageError) {
        let uid = try list.number("--uid")
        let quantity = try list.number("--quantity")
        arguments = ["app=\(try list.positional("APP"))", "product=\(try list.positional("PRODUCT"))"]
        if let uid { arguments.append("uid=\(uid)") }
        if let quantity { arguments.append("quantity=\(quantity)") }
    }
    var request: (command: ControlCommand, arguments: [String]) { (.buy, arguments) }
    func renderTable(_ json: JSONValue) -> String { renderKeyValues(json) }
}
