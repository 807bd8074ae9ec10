// libFuzzer target `client-message`: ClientMessage.decode on arbitrary frame bodies.
//
// Built by scripts/fuzz.sh together with Sources/StoreKitWire/*.swift into one module, so it sees
// the codec's internals. Properties checked on every input:
//   - decode never traps (a trap, an ASan report or an allocation over -malloc_limit_mb is a crash);
//   - whatever decodes re-encodes to exactly the input bytes (the encoding is canonical: booleans
//     and optional markers are 0/1, strings are validated UTF-8, trailing bytes are rejected),
//     and the re-encoded bytes decode to an equal message.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzClientMessage(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let body = Array(UnsafeBufferPointer(start: data, count: size))
    let message: ClientMessage
    do {
        message = try ClientMessage.decode(body)
    } catch {
        _ = error.description
        return 0
    }
    _ = message.requestID
    let encoded = message.encode()
    guard encoded == body else {
        fatalError("ClientMessage round trip changed the bytes: \(body) decoded to \(message), re-encoded as \(encoded)")
    }
    guard (try? ClientMessage.decode(encoded)) == message else {
        fatalError("ClientMessage \(message) does not decode from its own encoding \(encoded)")
    }
    return 0
}
