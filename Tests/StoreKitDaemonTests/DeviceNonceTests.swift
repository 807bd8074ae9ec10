import Foundation
import Testing
@testable import StoreKitDaemon

/// The device verification's nonce: a version-4 UUID, as Apple's, made without opening a file.
@Suite struct DeviceNonceTests {
    @Test func isAVersionFourUUIDWithTheRFCVariant() {
        for _ in 0..<1_000 {
            let text = ProofOfPurchase.randomUUID().uuidString.lowercased()
            let characters = Array(text)
            #expect(characters.count == 36)
            #expect(characters[14] == "4", "version nibble of \(text)")
            #expect("89ab".contains(characters[19]), "variant nibble of \(text)")
            #expect(UUID(uuidString: text) != nil)
        }
    }

    @Test func differsEachTime() {
        let nonces = Set((0..<10_000).map { _ in ProofOfPurchase.randomUUID() })
        #expect(nonces.count == 10_000)
    }

    @Test func verificationMembersCarryTheNonceTheyHashed() throws {
        let members = ProofOfPurchase.verificationMembers(device: Array(repeating: 7, count: 16))
        #expect(members.map(\.0) == ["deviceVerificationNonce", "deviceVerification"])
        guard case .string(let nonce) = members[0].1, case .string(let verification) = members[1].1 else {
            Issue.record("not strings: \(members)")
            return
        }
        #expect(UUID(uuidString: nonce) != nil)
        #expect(Data(base64Encoded: verification)?.count == 48)   // SHA-384
    }
}
