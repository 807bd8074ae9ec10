#!/usr/bin/python3
"""Verifies a compact JWS the way a server without storekitd's code would: the x5c chain with
`openssl verify -x509_strict` against the root given, Apple's marker extensions with
python3-cryptography, and the ES256 signature with PyJWT. Prints the payload (JSON) on success;
exits 1 with the reason otherwise.

usage: verify-jws.py ROOT.pem < JWS
       verify-jws.py --lines ROOT.pem < FILE   (one JWS per line, one payload per line; each
                                                chain is checked with openssl once per leaf)
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


class Refused(Exception):
    pass


def fail(reason):
    raise Refused(reason)


def main():
    lines = sys.argv[1] == "--lines"
    root_path = sys.argv[2] if lines else sys.argv[1]
    tokens = [line.strip() for line in sys.stdin] if lines else [sys.stdin.read().strip()]
    checked = set()
    for number, token in enumerate(tokens, 1):
        try:
            print(json.dumps(verify(token, root_path, checked), sort_keys=True))
        except Refused as refused:
            print((f"line {number}: " if lines else "") + str(refused), file=sys.stderr)
            sys.exit(1)


def verify(token, root_path, checked):
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
    chain_key = (header["x5c"][0], header["x5c"][1])
    with tempfile.TemporaryDirectory() as directory:
        paths = {}
        for name, certificate in (("leaf", leaf), ("intermediate", intermediate)):
            paths[name] = os.path.join(directory, name + ".pem")
            with open(paths[name], "wb") as file:
                file.write(certificate.public_bytes(serialization.Encoding.PEM))
        if chain_key not in checked:
            result = subprocess.run(
                ["openssl", "verify", "-x509_strict", "-CAfile", root_path, "-untrusted", paths["intermediate"], paths["leaf"]],
                capture_output=True, text=True)
            if result.returncode != 0:
                fail("chain: " + (result.stdout + result.stderr).strip())
            checked.add(chain_key)
    try:
        payload = jwt.decode(token, key=leaf.public_key(), algorithms=["ES256"],
                             options={"verify_exp": False, "verify_aud": False})
    except jwt.PyJWTError as error:
        fail(f"signature: {error}")
    return payload


main()
