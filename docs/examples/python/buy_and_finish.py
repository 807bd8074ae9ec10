#!/usr/bin/python3
"""buy_and_finish.py APP PRODUCT — buys PRODUCT as APP through storekitd, waits until the
purchase is purchased, checks its signed transaction (JWS) against storekitd's published root
certificate, finishes it and prints its transaction id. Any failure is said on stderr, with a
non-zero exit status.

Needs the python3-storekit package (the `storekit` module over libstorekit0) and a running
storekitd. The daemon's socket is $STOREKITD_SOCKET or the default; the root certificate
$STOREKIT_ROOT_CERTIFICATE or where storekitd publishes it.
"""

import sys

import storekit


def main(argv):
    if len(argv) != 3 or argv[1].startswith("-"):
        print(f"usage: {argv[0]} APP PRODUCT", file=sys.stderr)
        return 2
    app, product = argv[1], argv[2]
    try:
        with storekit.Connection(app) as connection:
            # Waits for the transaction to leave `purchasing`; a refused, failed or deferred
            # payment raises PaymentError.
            transaction = connection.buy(product, timeout=60)
            if transaction.jws is None:
                raise storekit.VerificationError(storekit.ErrorCode.INVALID_ENCODING,
                                                 f"transaction {transaction.transaction_identifier} carries no JWS")
            # Verify before delivering and finishing, as StoreKit's documentation asks.
            payload = connection.verify_jws(transaction.jws)
            if payload.get("transactionId") != transaction.transaction_identifier or payload.get("productId") != product:
                raise storekit.VerificationError(
                    storekit.ErrorCode.INVALID_SIGNATURE,
                    f"the signed transaction names {payload.get('transactionId')} of {payload.get('productId')}, "
                    f"not {transaction.transaction_identifier} of {product}")
            # ... deliver the content here ...
            connection.finish_and_wait(transaction)
    except storekit.PaymentError as error:
        print(f"{argv[0]}: the purchase of {product} did not complete: {error}", file=sys.stderr)
        return 1
    except storekit.VerificationError as error:
        print(f"{argv[0]}: the signed transaction did not verify ({error.kind}): {error}", file=sys.stderr)
        return 1
    except storekit.StoreKitError as error:
        print(f"{argv[0]}: {error}", file=sys.stderr)
        return 1
    print(transaction.transaction_identifier)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
