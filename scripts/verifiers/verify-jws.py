#!/usr/bin/python3
"""Verifies a compact JWS the way a server without storekitd's code would: the x5c chain with
`openssl verify -x509_strict` against the root given, Apple's marker extensions with
python3-cryptography, and the ES256 signature with PyJWT. Prints the payload (JSON) on success;
exits 1 with the reason otherwise.

usage: verify-jws.py ROOT.pem < JWS
"""
import base64
import json
import os
import subprocess
import sys
import tempfile

import jwt
from cryptography import x509
from cryptography.hazmat.primitives import serialization

LEAF_MARKER = x509.ObjectIdentifier("1.2.840.113635.100.6.11.1")
INTERMEDIATE_MARKER = x509.ObjectIdentifier("1.2.840.113635.100.6.2.1")


def fail(reason):
    print(reason, file=sys.stderr)
    sys.exit(1)


def main():
    root_path = sys.argv[1]
    token = sys.stdin.read().strip()
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError as error:
        fail(f"bad header: {error}")
    if header.get("alg") != "ES256":
        fail("alg is not ES256")
    chain = [x509.load_der_x509_certificate(base64.b64decode(c)) for c in header.get("x5c", [])]
    if len(chain) != 3:
        fail("x5c does not hold three certificates")
    leaf, intermediate, _ = chain
    for certificate, marker, name in ((leaf, LEAF_MARKER, "leaf"), (intermediate, INTERMEDIATE_MARKER, "intermediate")):
        try:
            certificate.extensions.get_extension_for_oid(marker)
        except x509.ExtensionNotFound:
            fail(f"the {name} lacks Apple's marker extension")
    with tempfile.TemporaryDirectory() as directory:
        paths = {}
        for name, certificate in (("leaf", leaf), ("intermediate", intermediate)):
            paths[name] = os.path.join(directory, name + ".pem")
            with open(paths[name], "wb") as file:
                file.write(certificate.public_bytes(serialization.Encoding.PEM))
        result = subprocess.run(
            ["openssl", "verify", "-x509_strict", "-CAfile", root_path, "-untrusted", paths["intermediate"], paths["leaf"]],
            capture_output=True, text=True)
        if result.returncode != 0:
            fail("chain: " + (result.stdout + result.stderr).strip())
    try:
        payload = jwt.decode(token, key=leaf.public_key(), algorithms=["ES256"],
                             options={"verify_exp": False, "verify_aud": False})
    except jwt.PyJWTError as error:
        fail(f"signature: {error}")
    print(json.dumps(payload, sort_keys=True))


main()
