#if canImport(Glibc)
import Glibc
#endif

/// The few ASN.1 DER forms (X.690) the app receipt uses: INTEGER, OCTET STRING, UTF8String,
/// IA5String, SEQUENCE and SET OF, written and read. Encoding only — no cryptography here.
enum DER {
    enum Tag: UInt8 {
        case integer = 0x02, octetString = 0x04, utf8String = 0x0C, ia5String = 0x16, sequence = 0x30, set = 0x31
    }

    static func element(_ tag: Tag, _ content: [UInt8]) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(1 + 9 + content.count)
        bytes.append(tag.rawValue)
        bytes.append(contentsOf: length(content.count))
        bytes.append(contentsOf: content)
        return bytes
    }

    /// An element whose content is `parts` one after the other, copied once.
    static func element(_ tag: Tag, concatenating parts: [[UInt8]]) -> [UInt8] {
        let count = parts.reduce(0) { $0 + $1.count }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(1 + 9 + count)
        bytes.append(tag.rawValue)
        bytes.append(contentsOf: length(count))
        for part in parts { bytes.append(contentsOf: part) }
        return bytes
    }

    static func length(_ count: Int) -> [UInt8] {
        if count < 0x80 { return [UInt8(count)] }
        var bytes: [UInt8] = []
        var remaining = count
        while remaining > 0 {
            bytes.insert(UInt8(remaining & 0xFF), at: 0)
            remaining >>= 8
        }
        return [0x80 | UInt8(bytes.count)] + bytes
    }

    /// Two's complement, big-endian, the fewest bytes.
    static func integer(_ value: Int64) -> [UInt8] {
        var bytes = withUnsafeBytes(of: value.bigEndian, Array.init)
        while bytes.count > 1, (bytes[0] == 0 && bytes[1] & 0x80 == 0) || (bytes[0] == 0xFF && bytes[1] & 0x80 != 0) {
            bytes.removeFirst()
        }
        return element(.integer, bytes)
    }

    static func utf8String(_ value: String) -> [UInt8] { element(.utf8String, Array(value.utf8)) }
    static func ia5String(_ value: String) -> [UInt8] { element(.ia5String, Array(value.utf8)) }
    static func octetString(_ value: [UInt8]) -> [UInt8] { element(.octetString, value) }
    static func sequence(_ elements: [[UInt8]]) -> [UInt8] { element(.sequence, concatenating: elements) }

    /// SET OF: DER orders the elements by their encodings (X.690 11.6: as octet strings, the
    /// shorter one first where one is a prefix of the other).
    static func set(_ elements: [[UInt8]]) -> [UInt8] {
        element(.set, concatenating: elements.sorted(by: precedes))
    }

    /// Byte-wise order with `memcmp`: a receipt's SET holds thousands of elements that share
    /// long prefixes, where a generic element-by-element comparison dominated the encoding.
    static func precedes(_ first: [UInt8], _ second: [UInt8]) -> Bool {
        let common = min(first.count, second.count)
        let order = common == 0 ? 0 : first.withUnsafeBufferPointer { a in
            second.withUnsafeBufferPointer { b in memcmp(a.baseAddress!, b.baseAddress!, common) }
        }
        return order != 0 ? order < 0 : first.count < second.count
    }

    /// Reads DER elements; throws on anything malformed, never reads past the input.
    struct Reader {
        let bytes: [UInt8]
        var offset: Int
        let end: Int

        init(_ bytes: [UInt8]) {
            self.bytes = bytes
            offset = 0
            end = bytes.count
        }

        init(_ bytes: [UInt8], range: Range<Int>) {
            self.bytes = bytes
            offset = range.lowerBound
            end = range.upperBound
        }

        var isAtEnd: Bool { offset >= end }

        /// The next element: its tag and the range of its content.
        mutating func next() throws(SigningError) -> (tag: UInt8, content: Range<Int>) {
            guard end - offset >= 2 else { throw SigningError("DER: truncated element") }
            let tag = bytes[offset]
            var cursor = offset + 1
            let first = Int(bytes[cursor])
            cursor += 1
            var count = first
            if first & 0x80 != 0 {
                let width = first & 0x7F
                guard width >= 1, width <= 4, end - cursor >= width else { throw SigningError("DER: bad length") }
                count = 0
                for _ in 0..<width {
                    count = count << 8 | Int(bytes[cursor])
                    cursor += 1
                }
            }
            guard count <= end - cursor else { throw SigningError("DER: element longer than its container") }
            offset = cursor + count
            return (tag, cursor..<(cursor + count))
        }

        mutating func expect(_ tag: Tag) throws(SigningError) -> Range<Int> {
            let element = try next()
            guard element.tag == tag.rawValue else {
                throw SigningError("DER: expected tag \(tag.rawValue), found \(element.tag)")
            }
            return element.content
        }

        func integer(_ content: Range<Int>) throws(SigningError) -> Int64 {
            guard !content.isEmpty, content.count <= 8 else { throw SigningError("DER: integer of \(content.count) bytes") }
            var value: Int64 = bytes[content.lowerBound] & 0x80 != 0 ? -1 : 0
            for index in content { value = value << 8 | Int64(bytes[index]) }
            return value
        }
    }
}
