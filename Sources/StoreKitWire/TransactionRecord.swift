/// One transaction as the daemon stores it and sends it to clients.
public struct TransactionRecord: Sendable, Equatable {
    public var id: UInt64
    public var originalID: UInt64?
    public var uid: UInt32
    public var app: String
    public var productID: String
    public var quantity: Int32
    public var state: TransactionState
    /// Per-(uid, app) monotonic sequence number of the last change.
    public var sequence: UInt64
    /// Milliseconds since 1970 on the store's (virtual) clock.
    public var date: Int64
    public var finished: Bool
    /// `SKError.Code` raw value for `failed` transactions.
    public var errorCode: Int32?
    public var errorMessage: String?
    public var revocationDate: Int64?
    public var revocationReason: Int32?
    public var applicationUsername: String?
    public var expiresDate: Int64?
    /// The compact JWS (ES256, `x5c` chain to storekitd's root) of this transaction as Apple's
    /// `JWSTransaction`; set by the daemon on `purchased` and `restored` transactions it sends.
    public var jwsRepresentation: String?

    public init(
        id: UInt64, originalID: UInt64? = nil, uid: UInt32, app: String, productID: String,
        quantity: Int32, state: TransactionState, sequence: UInt64, date: Int64, finished: Bool = false,
        errorCode: Int32? = nil, errorMessage: String? = nil, revocationDate: Int64? = nil,
        revocationReason: Int32? = nil, applicationUsername: String? = nil, expiresDate: Int64? = nil,
        jwsRepresentation: String? = nil
    ) {
        self.id = id
        self.originalID = originalID
        self.uid = uid
        self.app = app
        self.productID = productID
        self.quantity = quantity
        self.state = state
        self.sequence = sequence
        self.date = date
        self.finished = finished
        self.errorCode = errorCode
        self.errorMessage = errorMessage
        self.revocationDate = revocationDate
        self.revocationReason = revocationReason
        self.applicationUsername = applicationUsername
        self.expiresDate = expiresDate
        self.jwsRepresentation = jwsRepresentation
    }
}

extension TransactionRecord {
    /// Version 1 of the protocol ends the record at `expires_date`: no `jws_representation`.
    public func encode(into writer: inout WireWriter, version: UInt16 = ProtocolVersion.current) {
        writer.u64(id)
        writer.optionalU64(originalID)
        writer.u32(uid)
        writer.string(app)
        writer.string(productID)
        writer.i32(quantity)
        writer.u8(state.rawValue)
        writer.u64(sequence)
        writer.i64(date)
        writer.bool(finished)
        writer.optionalI32(errorCode)
        writer.optionalString(errorMessage)
        writer.optionalI64(revocationDate)
        writer.optionalI32(revocationReason)
        writer.optionalString(applicationUsername)
        writer.optionalI64(expiresDate)
        if version >= 2 { writer.optionalString(jwsRepresentation) }
    }

    /// The bytes `encode(into:)` writes.
    public var encodedSize: Int {
        func optional(_ text: String?) -> Int { text.map { 4 + $0.utf8.count } ?? 0 }
        return Self.minimumEncodedSize + app.utf8.count + productID.utf8.count
            + (originalID == nil ? 0 : 8) + (errorCode == nil ? 0 : 4) + optional(errorMessage)
            + (revocationDate == nil ? 0 : 8) + (revocationReason == nil ? 0 : 4) + optional(applicationUsername)
            + (expiresDate == nil ? 0 : 8) + optional(jwsRepresentation)
    }

    /// Smallest possible encoding, used to bound list counts before allocating.
    static let minimumEncodedSize = 8 + 1 + 4 + 4 + 4 + 4 + 1 + 8 + 8 + 1 + 7

    static func minimumEncodedSize(version: UInt16) -> Int { version >= 2 ? minimumEncodedSize : minimumEncodedSize - 1 }

    public static func decode(from reader: inout WireReader, version: UInt16 = ProtocolVersion.current) throws(WireError) -> TransactionRecord {
        let id = try reader.u64()
        let originalID = try reader.optionalU64()
        let uid = try reader.u32()
        let app = try reader.string()
        let productID = try reader.string()
        let quantity = try reader.i32()
        let rawState = try reader.u8()
        guard let state = TransactionState(rawValue: rawState) else {
            throw WireError(.invalidValue("transaction state \(rawState)"))
        }
        return TransactionRecord(
            id: id, originalID: originalID, uid: uid, app: app, productID: productID, quantity: quantity,
            state: state, sequence: try reader.u64(), date: try reader.i64(), finished: try reader.bool(),
            errorCode: try reader.optionalI32(), errorMessage: try reader.optionalString(),
            revocationDate: try reader.optionalI64(), revocationReason: try reader.optionalI32(),
            applicationUsername: try reader.optionalString(), expiresDate: try reader.optionalI64(),
            jwsRepresentation: version >= 2 ? try reader.optionalString() : nil)
    }
}
