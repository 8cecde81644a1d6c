"""A local identity provider for the end-user tests (tests/e2e/end_user_jwts.rs).

Signs JWTs with PyJWT and `cryptography` keys it makes at start, and serves
their JWKS over HTTP on 127.0.0.1, as Auth0, Clerk or Keycloak would. Prints
its port on the first line of stdout, then serves until killed.

  GET  /jwks    the JWKS (each request counted: GET /fetches)
  POST /rotate  adds a new RSA key, `rsa2`, to the JWKS
  POST /sign    {"kid", "alg", "claims"} -> the token (text); "alg": "none"
                makes an unsigned one; "alg": "HS256" with "kid": "rsa1"
                signs with the RSA public key's PEM as the HMAC secret (the
                key-confusion attack a verifier must refuse)
"""

import base64
import hashlib
import hmac
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

KEYS = {
    "rsa1": ("RS256", rsa.generate_private_key(public_exponent=65537, key_size=2048)),
    "ec1": ("ES256", ec.generate_private_key(ec.SECP256R1())),
}
PUBLISHED = ["rsa1", "ec1"]
FETCHES = 0
LOCK = threading.Lock()


def jwk(kid):
    alg, key = KEYS[kid]
    algorithm = jwt.get_algorithm_by_name(alg)
    out = json.loads(algorithm.to_jwk(key.public_key()))
    out.update({"kid": kid, "alg": alg, "use": "sig"})
    return out


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def sign(request):
    kid, alg, claims = request["kid"], request["alg"], request["claims"]
    if alg == "none":
        header = b64(json.dumps({"alg": "none", "typ": "JWT", "kid": kid}).encode())
        return f"{header}.{b64(json.dumps(claims).encode())}."
    if alg == "HS256":
        public = KEYS[kid][1].public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        header = b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": kid}).encode())
        body = f"{header}.{b64(json.dumps(claims).encode())}"
        tag = hmac.new(public, body.encode(), hashlib.sha256).digest()
        return f"{body}.{b64(tag)}"
    return jwt.encode(claims, KEYS[kid][1], algorithm=alg, headers={"kid": kid})


class Handler(BaseHTTPRequestHandler):
    def reply(self, status, body, content_type="application/json"):
        data = body.encode()
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        global FETCHES
        if self.path == "/jwks":
            with LOCK:
                FETCHES += 1
                keys = [jwk(kid) for kid in PUBLISHED]
            self.reply(200, json.dumps({"keys": keys}))
        elif self.path == "/fetches":
            self.reply(200, str(FETCHES), "text/plain")
        else:
            self.reply(404, "{}")

    def do_POST(self):
        length = int(self.headers.get("content-length", "0"))
        request = json.loads(self.rfile.read(length) or b"{}")
        if self.path == "/rotate":
            with LOCK:
                KEYS["rsa2"] = ("RS256", rsa.generate_private_key(public_exponent=65537, key_size=2048))
                PUBLISHED.append("rsa2")
            self.reply(200, "{}")
        elif self.path == "/sign":
            self.reply(200, sign(request), "text/plain")
        else:
            self.reply(404, "{}")

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
sys.stdout.close()
server.serve_forever()
