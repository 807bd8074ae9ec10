/// Reads what `WireWriter` wrote; every read checks bounds and throws `WireError` instead of trapping.
public struct WireReader {
    public let bytes: [UInt8]
    public private(set) var offset: Int
    private let end: Int

    public init(_ bytes: [UInt8], offset: Int = 0, end: Int? = nil) {
        self.bytes = bytes
        self.offset = offset
        self.end = end ?? bytes.count
    }

    public var remaining: Int { end - offset }

    private mutating func take(_ count: Int) throws(WireError) -> Int {
        guard count >= 0, count <= end - offset else { throw WireError(.truncated) }
        let start = offset
        offset += count
        return start
    }

    public mutating func u8() throws(WireError) -> UInt8 {
        bytes[try take(1)]
    }

    public mutating func bool() throws(WireError) -> Bool {
        switch try u8() {
        case 0: return false
        case 1: return true
        case let other: throw WireError(.invalidValue("boolean byte \(other)"))
        }
    }

    public mutating func u16() throws(WireError) -> UInt16 {
        let at = try take(2)
        return UInt16(bytes[at]) | UInt16(bytes[at + 1]) << 8
    }

    public mutating func u32() throws(WireError) -> UInt32 {
        let at = try take(4)
        var value: UInt32 = 0
        for index in 0..<4 { value |= UInt32(bytes[at + index]) << (8 * index) }
        return value
    }

    public mutating func u64() throws(WireError) -> UInt64 {
        let at = try take(8)
        var value: UInt64 = 0
        for index in 0..<8 { value |= UInt64(bytes[at + index]) << (8 * index) }
        return value
    }

    public mutating func i32() throws(WireError) -> Int32 { Int32(bitPattern: try u32()) }
    public mutating func i64() throws(WireError) -> Int64 { Int64(bitPattern: try u64()) }

    public mutating func string() throws(WireError) -> String {
        let count = Int(try u32())
        let at = try take(count)
        guard let value = String(validating: bytes[at..<(at + count)], as: UTF8.self) else {
            throw WireError(.invalidUTF8)
        }
        return value
    }

    private mutating func present() throws(WireError) -> Bool {
        switch try u8() {
        case 0: return false
        case 1: return true
        case let other: throw WireError(.invalidValue("optional marker \(other)"))
        }
    }

    public mutating func optionalString() throws(WireError) -> String? { try present() ? try string() : nil }
    public mutating func optionalI64() throws(WireError) -> Int64? { try present() ? try i64() : nil }
    public mutating func optionalU64() throws(WireError) -> UInt64? { try present() ? try u64() : nil }
    public mutating func optionalI32() throws(WireError) -> Int32? { try present() ? try i32() : nil }

    public mutating func blob() throws(WireError) -> [UInt8] {
        let count = Int(try u32())
        let at = try take(count)
        return Array(bytes[at..<(at + count)])
    }

    /// A list count, checked against the bytes left so that an absurd count cannot allocate.
    public mutating func count(minimumElementSize: Int) throws(WireError) -> Int {
        let count = Int(try u32())
        guard count <= remaining / max(minimumElementSize, 1) else { throw WireError(.truncated) }
        return count
    }

    public mutating func stringList() throws(WireError) -> [String] {
        let count = try count(minimumElementSize: 4)
        var values: [String] = []
        values.reserveCapacity(count)
        for _ in 0..<count { values.append(try string()) }
        return values
    }

    public func expectEnd() throws(WireError) {
        if offset != end { throw WireError(.trailingBytes(end - offset)) }
    }
}
