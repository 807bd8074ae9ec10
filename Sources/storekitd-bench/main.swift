import StoreKitConnection
import StoreKitWire
let c = try! WireConnection(path: "/tmp/skd/run/storekitd.sock")
print(try! c.hello(app: "com.example.game"))
try! c.send(.subscribe(requestID: 7))
for _ in 0..<2 { print(try! c.receive()) }
