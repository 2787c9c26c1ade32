#!/usr/bin/env python3
"""An HTTP/1.1 server for the http() destination's tests: it answers each request as its
options say and writes one line per request to --log:

    STATUS <TAB> CLIENT-PORT <TAB> METHOD PATH <TAB> HEADERS (hex) <TAB> BODY (hex)

Options: --port N, --log FILE, --answers 503,503 (the statuses of the first requests, then
200), --always STATUS, --refuse TEXT (400 for a body holding TEXT), --close (every answer
closes its connection), --chunked (answers in chunks), --cert/--key (HTTPS). A body sent
with Content-Encoding gzip or deflate is logged decompressed; answers are gzip-compressed when
the request's Accept-Encoding names gzip.
"""
import argparse
import gzip
import http.server
import zlib
import ssl
import threading

p = argparse.ArgumentParser()
p.add_argument("--port", type=int, required=True)
p.add_argument("--log", required=True)
p.add_argument("--answers", default="")
p.add_argument("--always", type=int)
p.add_argument("--refuse")
p.add_argument("--close", action="store_true")
p.add_argument("--chunked", action="store_true")
p.add_argument("--cert")
p.add_argument("--key")
args = p.parse_args()

answers = [int(a) for a in args.answers.split(",") if a]
lock = threading.Lock()
log = open(args.log, "a", buffering=1)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def answer(self):
        n = int(self.headers.get("Content-Length", 0))
        body = self.rfile.read(n)
        encoding = self.headers.get("Content-Encoding", "")
        if encoding == "gzip":
            body = gzip.decompress(body)
        elif encoding == "deflate":
            body = zlib.decompress(body)
        with lock:
            if args.refuse and args.refuse.encode() in body:
                status = 400
            elif answers:
                status = answers.pop(0)
            else:
                status = args.always or 200
            headers = "".join(f"{k}: {v}\n" for k, v in self.headers.items())
            log.write(f"{status}\t{self.client_address[1]}\t{self.command} {self.path}\t"
                      f"{headers.encode().hex()}\t{body.hex()}\n")
        text = b'{"error":"refused"}' if status >= 300 else b'{"ok":true}'
        self.send_response(status)
        if "gzip" in self.headers.get("Accept-Encoding", ""):
            text = gzip.compress(text)
            self.send_header("Content-Encoding", "gzip")
        if args.close:
            self.send_header("Connection", "close")
            self.close_connection = True
        if args.chunked:
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(text), text))
        else:
            self.send_header("Content-Length", str(len(text)))
            self.end_headers()
            self.wfile.write(text)

    do_POST = answer
    do_PUT = answer

    def log_message(self, *a):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
if args.cert:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(args.cert, args.key)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
server.serve_forever()
