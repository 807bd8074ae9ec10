// libFuzzer target `server-message`: ServerMessage.decode on arbitrary frame bodies (what the
// client library and storekitctl run on every byte the daemon sends).
//
// Built by scripts/fuzz.sh together with Sources/StoreKitWire/*.swift into one module. Properties:
//   - decode never traps (a trap, an ASan report or an allocation over -malloc_limit_mb is a crash;
//     list counts are bounded by the bytes left before anything is reserved);
//   - whatever decodes re-encodes to exactly the input bytes and decodes again to an equal message.
// (The `-o json` rendering of decoded records is the separate target `record-json`.)

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzServerMessage(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let body = Array(UnsafeBufferPointer(start: data, count: size))
    let message: ServerMessage
    do {
        message = try ServerMessage.decode(body)
    } catch {
        _ = error.description
        return 0
    }
    let encoded = message.encode()
    guard encoded == body else {
        fatalError("ServerMessage round trip changed the bytes: \(body) decoded to \(message), re-encoded as \(encoded)")
    }
    guard (try? ServerMessage.decode(encoded)) == message else {
        fatalError("ServerMessage \(message) does not decode from its own encoding \(encoded)")
    }
    return 0
}
