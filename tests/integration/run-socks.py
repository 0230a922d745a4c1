#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
# SOCKS5 (socks5h) through `cordon run --network managed --socks5`: cordon's
# own proxy takes SOCKS5 on the relay's one port, and ALL_PROXY, all_proxy,
# FTP_PROXY and ftp_proxy name socks5h://127.0.0.1:3128. A SOCKS5 client
# written here runs inside the sandbox (the real fence: its own network
# namespace, seccomp's IP-only sockets) against an HTTP upstream on the
# host's loopback, named through the proxy's test resolver
# (CORDON_TEST_PROXY_RESOLVE; the policy still judges every name and
# address, so loopback needs --allow-cidr 127.0.0.0/8). An allowed name is
# served; a denied name, a name no rule allows, IP literals (as addresses
# and as names) and a name that resolves to loopback without a CIDR get
# reply 2 with an audit line naming the rule; BIND and UDP ASSOCIATE get 7;
# curl --socks5-hostname when curl is there. SOCKS5 is off by default (the
# proxy answers it with HTTP 400 and ALL_PROXY is the HTTP URL). Option and
# profile errors are precise. Root and unprivileged (unprivileged.sh runs it
# again as another user). TAP.

import atexit
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from rpcclient import CORDON, Tap  # noqa: E402
from upstream import serve_upstream  # noqa: E402

t = Tap()
WHO = "root" if os.geteuid() == 0 else "unprivileged"
BASE = tempfile.mkdtemp(prefix="cordon-socks.", dir="/var/tmp")
atexit.register(shutil.rmtree, BASE, True)
os.chmod(BASE, 0o755)


HTTP = serve_upstream(with_path=True)
PORT = HTTP.server_address[1]

ENV = dict(os.environ)
ENV.pop("CORDON_TEST_DISABLE", None)
ENV.pop("TMPDIR", None)
if os.environ.get("CD_POLICYDIR"):
    ENV["CORDON_POLICY_PATH"] = os.environ["CD_POLICYDIR"]
ENV["CORDON_TEST_PROXY_RESOLVE"] = ("ok.test=127.0.0.1,www.ok.test=127.0.0.1,"
                                    "denied.test=127.0.0.1,lo.test=127.0.0.1")
RULES = ["--allow-domain", "**.ok.test", "--deny-domain", "www.ok.test",
         "--allow-cidr", "127.0.0.0/8"]
CURL = shutil.which("curl")

# The client inside the sandbox: each case is [label, greeting hex, request hex, then
# "fetch" to send a GET through the tunnel]; prints one JSON object per case.
CLIENT = r'''
import json, os, socket, sys
url = os.environ.get("ALL_PROXY", "")
out = {"ALL_PROXY": url, "all_proxy": os.environ.get("all_proxy"),
       "FTP_PROXY": os.environ.get("FTP_PROXY"), "ftp_proxy": os.environ.get("ftp_proxy"),
       "HTTP_PROXY": os.environ.get("HTTP_PROXY"), "HTTPS_PROXY": os.environ.get("HTTPS_PROXY")}
def recv_n(s, n):
    b = b""
    while len(b) < n:
        d = s.recv(n - len(b))
        if not d:
            break
        b += d
    return b
for label, greet, req, fetch in json.loads(sys.argv[1]):
    try:
        s = socket.create_connection(("127.0.0.1", 3128), timeout=60)
        s.sendall(bytes.fromhex(greet))
        g = recv_n(s, 2)
        r = b""
        if g == b"\x05\x00":
            s.sendall(bytes.fromhex(req))
            r = recv_n(s, 10)
        body = ""
        if fetch and r[:2] == b"\x05\x00":
            s.sendall(b"GET /socks HTTP/1.0\r\nHost: ok.test\r\n\r\n")
            data = b""
            while True:
                d = s.recv(65536)
                if not d:
                    break
                data += d
            body = data.split(b"\r\n\r\n", 1)[-1].decode()
        rest = g + r
        if not g.startswith(b"\x05"):
            rest += s.recv(4096)  # not SOCKS: an HTTP refusal, read it all
        out[label] = {"reply": rest.hex(), "body": body}
        s.close()
    except OSError as e:
        out[label] = {"error": type(e).__name__}
print(json.dumps(out))
'''


def name_req(name, port, cmd=1):
    n = name.encode()
    return (bytes([5, cmd, 0, 3, len(n)]) + n + port.to_bytes(2, "big")).hex()


def addr_req(packed, port, atyp):
    return (bytes([5, 1, 0, atyp]) + packed + port.to_bytes(2, "big")).hex()


GREET = "050100"
CASES = [
    ["allowed", GREET, name_req("ok.test", PORT), True],
    ["denied", GREET, name_req("www.ok.test", PORT), False],
    ["no_rule", GREET, name_req("denied.test", PORT), False],
    ["ipv4", GREET, addr_req(bytes([192, 0, 2, 7]), 80, 1), False],
    ["ipv6", GREET, addr_req(bytes(15) + b"\x01", 80, 4), False],
    ["ip_as_name", GREET, name_req("192.0.2.7", 80), False],
    ["bind", GREET, name_req("ok.test", PORT, cmd=2), False],
    ["udp", GREET, name_req("ok.test", PORT, cmd=3), False],
    ["auth_only", "050102", "", False],
]


def run(args, timeout=120):
    p = subprocess.run([CORDON] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       env=ENV, timeout=timeout, cwd=BASE)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def audit(err, decision, method, target, rule=None):
    pat = r"^cordon: proxy: %s SOCKS5 %s %s address=\S+ rule=\"%s\"" % (
        decision, method, re.escape(target), re.escape(rule) if rule else "[^\"]*")
    return re.search(pat, err, re.M) is not None


def client(extra, cases):
    rc, out, err = run(["run", "--network", "managed"] + extra +
                       ["--", sys.executable, "-c", CLIENT, json.dumps(cases)])
    try:
        res = json.loads(out)
    except ValueError:
        res = {}
    return rc, res, err


# ---- options and refusals

for args, want in ((["--socks5"], "need a managed network"),
                   (["--network", "managed", "--socks5", "--proxy-mode", "limited"],
                    "SOCKS5 carries only tunnels, which proxy mode limited refuses"),
                   (["--network", "managed", "--network-proxy", "unix:/nonexistent/p.sock",
                     "--socks5"], "--network-proxy has its own")):
    rc, out, err = run(["run"] + args + ["--", "true"])
    t.ok(rc == 2 and want in err, "[%s] run %s: a usage error saying so" % (WHO, " ".join(args)),
         err)

PROFILE = os.path.join(BASE, "socks.json")


def profile(net):
    with open(PROFILE, "w") as f:
        f.write('{\n  "version": 1,\n  "type": "managed",\n'
                '  "file_system": {"type": "unrestricted"},\n'
                '  "network": {\n    "mode": "managed",\n' + net + '\n  }\n}\n')
    os.chmod(PROFILE, 0o644)


profile('    "allow_domains": ["ok.test"],\n    "proxy_mode": "limited",\n    "socks5": true')
rc, out, err = run(["run", "--profile", PROFILE, "--", "true"])
t.ok(rc == 125 and (PROFILE + ":9:15: error:") in err and "network.socks5" in err and
     "proxy mode limited" in err,
     "[%s] a profile with socks5 and proxy_mode limited is refused at file:line:col" % WHO, err)
profile('    "allow_domains": ["ok.test"],\n    "socks5": "on"')
rc, out, err = run(["run", "--profile", PROFILE, "--", "true"])
t.ok(rc == 125 and "expected a boolean for \"socks5\", got string" in err,
     "[%s] a profile's socks5 must be a boolean" % WHO, err)
profile('    "allow_domains": ["ok.test"],\n    "proxy_mode": "full",\n    "socks5": true')
rc, out, err = run(["run", "--profile", PROFILE, "--network", "managed", "--proxy-mode",
                    "limited", "--", "true"])
t.ok(rc == 2 and "proxy mode limited" in err,
     "[%s] the profile's socks5 with --proxy-mode limited is refused too" % WHO, err)

rc, out, err = run(["explain", "--network", "managed", "--socks5"] + RULES)
t.ok(rc == 0 and "socks5: on" in out and "ALL_PROXY=socks5h://127.0.0.1:3128" in out and
     "ftp_proxy=socks5h://127.0.0.1:3128" in out and
     "HTTPS_PROXY=http://127.0.0.1:3128" in out,
     "[%s] explain shows SOCKS5 on and the variables that name it" % WHO, err + out)
rc, out, err = run(["explain", "--json", "--network", "managed", "--socks5"] + RULES)
try:
    mn = json.loads(out)["linux"]["managed_network"]
except (ValueError, KeyError, TypeError):
    mn = None
t.ok(mn and mn["own_proxy"]["socks5"] is True and
     mn["env"]["all_proxy"] == "socks5h://127.0.0.1:3128" and
     mn["env"]["HTTP_PROXY"] == "http://127.0.0.1:3128" and mn["relay"] == "127.0.0.1:3128",
     "[%s] explain --json: socks5 true, the variables" % WHO, out[:3000])
rc, out, err = run(["explain", "--network", "managed"] + RULES)
t.ok(rc == 0 and "socks5: off" in out and "ALL_PROXY=http://127.0.0.1:3128" in out,
     "[%s] explain: SOCKS5 off by default" % WHO, err + out)

# ---- SOCKS5 off by default

rc, res, err = client(RULES, [CASES[0]])
off = bytes.fromhex(res.get("allowed", {}).get("reply", ""))
t.ok(rc == 0 and res.get("ALL_PROXY") == "http://127.0.0.1:3128" and
     res.get("FTP_PROXY") == "http://127.0.0.1:3128" and
     off.startswith(b"HTTP/1.1 400") and b"SOCKS5 is not enabled" in off,
     "[%s] without --socks5: ALL_PROXY is the HTTP URL and SOCKS5 is refused" % WHO,
     repr(res) + err)

# ---- SOCKS5 on: the cases, one sandboxed run

rc, res, err = client(RULES + ["--socks5"], CASES)
t.ok(rc == 0 and all(res.get(k) == "socks5h://127.0.0.1:3128"
                     for k in ("ALL_PROXY", "all_proxy", "FTP_PROXY", "ftp_proxy")) and
     res.get("HTTP_PROXY") == "http://127.0.0.1:3128" and
     res.get("HTTPS_PROXY") == "http://127.0.0.1:3128",
     "[%s] --socks5: ALL_PROXY, all_proxy, FTP_PROXY, ftp_proxy name socks5h on the relay" % WHO,
     repr(res) + err)


def reply(label):
    return res.get(label, {}).get("reply", "")


t.ok(reply("allowed") == "0500" + "05000001000000000000" and
     res["allowed"]["body"] == "hello from upstream /socks",
     "[%s] an allowed name is reached through SOCKS5" % WHO, repr(res.get("allowed")))
t.ok(audit(err, "allow", "CONNECT", "ok.test:%d" % PORT,
           "allow-domain **.ok.test, allow-cidr 127.0.0.0/8"),
     "[%s] audit: the allowed SOCKS5 connection, with its rule" % WHO, err)
REFUSED = "0500" + "05020001000000000000"
t.ok(reply("denied") == REFUSED and
     audit(err, "deny", "CONNECT", "www.ok.test:%d" % PORT, "deny-domain www.ok.test"),
     "[%s] a denied name: reply 2 (not allowed by ruleset), audited with the rule" % WHO,
     repr(res.get("denied")) + err)
t.ok(reply("no_rule") == REFUSED and
     audit(err, "deny", "CONNECT", "denied.test:%d" % PORT, "no allow-domain pattern matches"),
     "[%s] a name no rule allows: reply 2, audited" % WHO, repr(res.get("no_rule")) + err)
for label, target in (("ipv4", "192.0.2.7:80"), ("ipv6", "::1:80"), ("ip_as_name", "192.0.2.7:80")):
    t.ok(reply(label) == REFUSED and
         audit(err, "deny", "CONNECT", target, "ip-literal (no allow-cidr)"),
         "[%s] an IP literal (%s) outside the CIDRs: reply 2, audited" % (WHO, label),
         repr(res.get(label)) + err)
t.ok(reply("bind") == "0500" + "05070001000000000000" and
     audit(err, "deny", "BIND", "ok.test:%d" % PORT),
     "[%s] BIND: reply 7 (command not supported), audited" % WHO, repr(res.get("bind")) + err)
t.ok(reply("udp") == "0500" + "05070001000000000000" and
     audit(err, "deny", "UDP-ASSOCIATE", "ok.test:%d" % PORT),
     "[%s] UDP ASSOCIATE: reply 7, audited" % WHO, repr(res.get("udp")) + err)
t.ok(reply("auth_only") == "05ff", "[%s] no acceptable method: 0xff" % WHO,
     repr(res.get("auth_only")))

# A name that resolves to loopback, without a CIDR: refused after the proxy's own lookup.
rc, res, err = client(["--allow-domain", "lo.test", "--socks5"],
                      [["lo", GREET, name_req("lo.test", PORT), False]])
t.ok(rc == 0 and reply("lo") == REFUSED and
     re.search(r"^cordon: proxy: deny SOCKS5 CONNECT lo\.test:%d address=127\.0\.0\.1 "
               r"rule=\"address 127\.0\.0\.1: " % PORT, err, re.M),
     "[%s] a name resolving to loopback: reply 2, the address named in the audit" % WHO,
     repr(res) + err)

if CURL:
    rc, out, err = run(["run", "--network", "managed", "--socks5"] + RULES +
                       ["--", "sh", "-c", 'exec "$0" -sS --max-time 60 -x "$ALL_PROXY" "$1"', CURL,
                        "http://ok.test:%d/curl" % PORT])
    t.ok(rc == 0 and out == "hello from upstream /curl" and
         audit(err, "allow", "CONNECT", "ok.test:%d" % PORT),
         "[%s] curl -x \"$ALL_PROXY\" (socks5h) reaches an allowed name" % WHO, err + out)
    rc, out, err = run(["run", "--network", "managed", "--socks5"] + RULES +
                       ["--", CURL, "-s", "--max-time", "60", "--socks5-hostname",
                        "127.0.0.1:3128", "http://www.ok.test:%d/" % PORT])
    # -s: curl's own message would share cordon's stderr with the audit line
    t.ok(rc == 97 and out == "" and audit(err, "deny", "CONNECT", "www.ok.test:%d" % PORT),
         "[%s] curl --socks5-hostname to a denied name fails, audited" % WHO, err + out)
else:
    t.skip("[%s] curl through socks5h" % WHO, "curl is not installed")
    t.skip("[%s] curl --socks5-hostname to a denied name" % WHO, "curl is not installed")

t.done()
