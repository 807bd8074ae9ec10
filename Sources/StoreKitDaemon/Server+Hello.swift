import CPosix
import StoreKitEngine
import StoreKitPosix
import StoreKitWire
#if canImport(Glibc)
import Glibc
#endif

// The hello exchange: protocol version, the app a client acts as, and `Executable=`.

extension Server {
    func hello(_ session: Session, version: UInt16, app: String) {
        guard session.app == nil else {
            refuse(session, .malformedRequest, "hello sent twice", id: .protocolError)
            return
        }
        var served = ProtocolVersion.served
        #if STOREKIT_TEST_HOOKS
        if let cap = testHooks?.servedUpTo { served = served.lowerBound...cap }
        #endif
        guard served.contains(version) else {
            refuse(session, .unsupportedVersion,
                   "protocol version \(version) is not supported (this storekitd serves \(served.lowerBound) to \(served.upperBound))",
                   id: .protocolError)
            return
        }
        session.version = version
        switch session.kind {
        case .control:
            session.app = ""
        case .client:
            guard let registration = configuration.app(app), engine.isRegistered(app: app) else {
                refuse(session, .unknownApp, "app \(app) is not registered")
                return
            }
            if let executable = registration.executable {
                switch checkExecutable(of: session.peer.pid, socket: session.fd, registered: executable) {
                case .matches:
                    break
                case .differs(let path):
                    refuse(session, .permissionDenied,
                           "pid \(session.peer.pid) runs \(path) (another file than \(executable)), so it may not act as \(app)")
                    return
                case .unknown(let reason):
                    refuse(session, .permissionDenied, "\(reason), so it may not act as \(app) (Executable=\(executable))")
                    return
                }
            }
            session.app = app
            keepInFDStore(session)
        }
        session.enqueue(.welcome(version: session.version, uid: session.peer.uid,
                                 storefrontCountryCode: engine.storefront,
                                 storefrontID: Storefronts.identifier(for: engine.storefront),
                                 hostedContent: configuration.app(app)?.hostedContent.map(\.record) ?? []))
        queueForSending(session)
    }
}
