/// `SKError.Code` names by raw value (0–20), for `storekitctl fail-next CODE` and messages.
public enum StoreKitErrorNames {
    public static let names = [
        "unknown", "clientInvalid", "paymentCancelled", "paymentInvalid", "paymentNotAllowed",
        "storeProductNotAvailable", "cloudServicePermissionDenied", "cloudServiceNetworkConnectionFailed",
        "cloudServiceRevoked", "privacyAcknowledgementRequired", "unauthorizedRequestData",
        "invalidOfferIdentifier", "invalidSignature", "missingOfferParams", "invalidOfferPrice",
        "overlayCancelled", "overlayInvalidConfiguration", "overlayTimeout", "ineligibleForOffer",
        "unsupportedPlatform", "overlayPresentedInBackgroundScene",
    ]

    public static func name(of code: Int32) -> String {
        names.indices.contains(Int(code)) ? names[Int(code)] : "code \(code)"
    }

    /// The raw value of a code given by number (`2`) or name (`paymentCancelled`, any case).
    public static func code(_ text: String) -> Int32? {
        if let number = Int32(text) { return names.indices.contains(Int(number)) ? number : nil }
        return names.firstIndex { $0.lowercased() == text.lowercased() }.map { Int32($0) }
    }
}
