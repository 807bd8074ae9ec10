#!/usr/bin/env python3
"""Verifies signed data with Apple's own App Store Server Library (PyPI: app-store-server-library),
given only storekitd's root certificate in place of Apple's: the chain, Apple's marker
extensions, the signature, the bundle id and the environment (Sandbox: the library skips all
verification for Xcode data, so storekitd's Sandbox environment is the one it can check).
Prints the decoded payload; exits 1 with the reason when the library refuses it.

usage: verify-apple-library.py ROOT.der BUNDLE_ID transaction|renewal|app-transaction < JWS
"""
import sys

from appstoreserverlibrary.models.Environment import Environment
from appstoreserverlibrary.signed_data_verifier import SignedDataVerifier, VerificationException

root_path, bundle_id, kind = sys.argv[1:4]
with open(root_path, "rb") as file:
    root = file.read()
verifier = SignedDataVerifier([root], False, Environment.SANDBOX, bundle_id, None)
jws = sys.stdin.read().strip()
try:
    if kind == "transaction":
        payload = verifier.verify_and_decode_signed_transaction(jws)
    elif kind == "renewal":
        payload = verifier.verify_and_decode_renewal_info(jws)
    else:
        payload = verifier.verify_and_decode_app_transaction(jws)
except VerificationException as error:
    print(f"refused: {error.status.name}", file=sys.stderr)
    sys.exit(1)
print(payload)
