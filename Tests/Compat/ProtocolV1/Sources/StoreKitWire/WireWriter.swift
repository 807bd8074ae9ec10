/// Appends little-endian fixed-width integers and length-prefixed strings to a byte array.
///
/// The encoding is documented in docs/protocol.md; every message is built with this type.
public struct WireWriter: Sendable {
    public private(set) var bytes: [UInt8]

    public init(capacity: Int = 128) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    public mutating func u8(_ value: UInt8) { bytes.append(value) }
    public mutating func bool(_ value: Bool) { bytes.append(value ? 1 : 0) }

    public mutating func u16(_ value: UInt16) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    public mutating func u32(_ value: UInt32) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    public mutating func u64(_ value: UInt64) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    public mutating func i32(_ value: Int32) { u32(UInt32(bitPattern: value)) }
    public mutating func i64(_ value: Int64) { u64(UInt64(bitPattern: value)) }

    public mutating func string(_ value: String) {
        var value = value
        value.withUTF8 { utf8 in
            u32(UInt32(utf8.count))
            bytes.append(contentsOf: utf8)
        }
    }

    /// An optional is one presence byte (0 or 1) followed by the value when present.
    public mutating func optionalString(_ value: String?) {
        if let value { u8(1); string(value) } else { u8(0) }
    }

    public mutating func optionalI64(_ value: Int64?) {
        if let value { u8(1); i64(value) } else { u8(0) }
    }

    public mutating func optionalU64(_ value: UInt64?) {
        if let value { u8(1); u64(value) } else { u8(0) }
    }

    public mutating func optionalI32(_ value: Int32?) {
        if let value { u8(1); i32(value) } else { u8(0) }
    }

    public mutating func blob(_ value: [UInt8]) {
        u32(UInt32(value.count))
        bytes.append(contentsOf: value)
    }

    public mutating func stringList(_ values: [String]) {
        u32(UInt32(values.count))
        for value in values { string(value) }
    }
}
