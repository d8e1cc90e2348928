# Writes the seed-ahp-* inputs of the host_sequence corpus (AHP connections; see
# fuzz/README.md). Run from the repository root: python3 fuzz/seed_ahp_corpus.py
import json, struct, sys, os
OPEN,EOF,REQUEST,BODY,RAW,DRAIN,TIMER,ANSWER,DRAIN_ALL,ROUND_TRIP,ADVANCE=0,1,2,4,5,8,11,13,16,17,10
class Seq:
    def __init__(s, config, seed=0): s.b=bytearray([config, seed])
    def open(s, b): s.b += bytes([OPEN, b]); return s
    def body(s, conn, obj):
        t = obj if isinstance(obj, (bytes, bytearray)) else json.dumps(obj, separators=(',',':')).encode()
        assert len(t) < 4096
        s.b += bytes([BODY, conn]) + struct.pack('<H', len(t)) + t; return s
    def req(s, conn, id, method, params): return s.body(conn, {"jsonrpc":"2.0","id":id,"method":method,"params":params})
    def note(s, conn, method, params): return s.body(conn, {"jsonrpc":"2.0","method":method,"params":params})
    def rt(s, conn): s.b += bytes([ROUND_TRIP, conn]); return s
    def answer(s, conn, which, variant=0): s.b += bytes([ANSWER, conn, which, variant, 0]); return s
    def eof(s, conn): s.b += bytes([EOF, conn]); return s
    def timer(s): s.b += bytes([TIMER]); return s
    def advance(s, ms): s.b += bytes([ADVANCE]) + struct.pack('<H', ms); return s
    def raw(s, conn, data): s.b += bytes([RAW, conn, len(data)]) + data; return s
    def drain_all(s): s.b += bytes([DRAIN_ALL]); return s

def init(q, c, client, subs): return q.req(c, 1000+c, "initialize", {"channel":"ahp-root://","protocolVersions":["1.0.0"],"clientId":client,"initialSubscriptions":subs})
def dispatch(q, c, ch, seq, action): return q.note(c, "dispatchAction", {"channel":ch,"clientSeq":seq,"action":action})
def turn(t, text): return {"type":"chat/turnStarted","turnId":t,"startedAt":"2026-12-04T00:00:00Z","message":{"text":text,"origin":{"kind":"user"}}}

out = sys.argv[1] if len(sys.argv) > 1 else "fuzz/corpus/host_sequence"
seeds = {}

# 1: a turn with a client tool, confirmed by another AHP client; the other client's result rejected.
q = Seq(0x84, 1)
q.open(0x40).open(0x41).open(0x02)  # c0 AHP client 0, c1 AHP client 1, c2 Copilot
init(q,0,"ahp-a",["ahp-root://"]).rt(0)
q.req(0,1,"createSession",{"channel":"ahp-session:/s1","workingDirectories":["file:///proj"]}).rt(0)
q.req(0,2,"subscribe",{"channel":"ahp-session:/s1"}).req(0,3,"subscribe",{"channel":"ahp-chat:/s1"}).rt(0)
init(q,1,"ahp-b",["ahp-root://","ahp-chat:/s1","ahp-session:/s1"]).rt(1)
dispatch(q,0,"ahp-session:/s1",1,{"type":"session/activeClientSet","activeClient":{"clientId":"ahp-a","tools":[{"name":"get_weather","description":"Get weather","inputSchema":{"type":"object"}}]}}).rt(0)
dispatch(q,0,"ahp-chat:/s1",2,turn("t1","weather?")).rt(0).rt(1)
q.answer(1,0,0).rt(1).rt(0)       # c1 confirms the permission (ask 0)
q.answer(1,1,0).rt(1).rt(0)       # c1 tries to complete c0's tool call: rejected
q.answer(0,1,0).rt(0).rt(1)       # c0 completes it
q.req(2,1,"session.resume",{"sessionId":"s1","streaming":True}).rt(2)
q.req(2,2,"session.send",{"sessionId":"s1","prompt":"hello"}).rt(2).rt(0).rt(1)
seeds["seed-ahp-client-tool-confirmed-by-another"] = q

# 2: reconnect with replay after a dropped connection; a second turn while the first runs.
q = Seq(0x84, 2)
q.open(0x40).open(0x41)
init(q,0,"ahp-a",["ahp-root://"]).rt(0)
q.req(0,1,"createSession",{"channel":"ahp-session:/s0"}).rt(0)
q.req(0,2,"subscribe",{"channel":"ahp-chat:/s0"}).rt(0)
init(q,1,"ahp-b",["ahp-chat:/s0"]).rt(1)
dispatch(q,0,"ahp-chat:/s0",1,turn("t1","slow down")).rt(0)
dispatch(q,1,"ahp-chat:/s0",1,turn("t2","hello")).rt(1)
q.eof(0)
q.advance(300).rt(1)
q.open(0x40)  # c2: client 0 again
q.req(2,1,"reconnect",{"channel":"ahp-root://","clientId":"ahp-a","lastSeenServerSeq":3,"subscriptions":["ahp-chat:/s0","ahp-session:/gone"]}).rt(2)
q.advance(300).rt(2).rt(1)
q.req(2,2,"reconnect",{"channel":"ahp-root://","clientId":"ahp-a","lastSeenServerSeq":0,"subscriptions":["ahp-chat:/s0"]}).rt(2)
dispatch(q,2,"ahp-chat:/s0",2,{"type":"chat/turnCancelled","turnId":"t9","duration":0}).rt(2)
seeds["seed-ahp-reconnect-replay"] = q

# 3: bad input: junk frames, unknown channels, methods and actions, actions before initialize, raw bytes.
q = Seq(0x94, 3)   # 700-byte frame limit
q.open(0x40).open(0x41)
q.req(0,1,"subscribe",{"channel":"ahp-root://"}).rt(0)
dispatch(q,0,"ahp-chat:/s0",1,turn("t0","hello")).rt(0)
q.body(0,b'{"jsonrpc":"2.0","id":2,"method":').rt(0)
init(q,1,"ahp-b",["ahp-root://"]).rt(1)
q.req(1,1,"subscribe",{"channel":"ahp-terminal:/x"}).req(1,2,"subscribe",{"channel":"ahp-chat:/nope"}).rt(1)
q.req(1,3,"resourceRead",{"uri":"file:///etc/passwd"}).req(1,4,"createChat",{"channel":"ahp-session:/s0"}).rt(1)
q.req(1,5,"createSession",{"channel":"ahp-chat:/s0"}).req(1,6,"createSession",{"channel":"ahp-session:/s0","provider":"other"}).rt(1)
q.req(1,7,"createSession",{"channel":"ahp-session:/s0"}).rt(1)
dispatch(q,1,"ahp-root://",1,turn("t0","hello"))
dispatch(q,1,"ahp-chat:/nope",2,turn("t0","hello"))
dispatch(q,1,"ahp-chat:/s0",3,{"type":"chat/draftChanged","draft":"x"})
dispatch(q,1,"ahp-session:/s0",4,turn("t0","hello"))
q.note(1,"dispatchAction",[1,2]).note(1,"dispatchAction",{"channel":"ahp-chat:/s0"})
dispatch(q,1,"ahp-session:/s0",5,{"type":"session/activeClientSet","activeClient":{"clientId":"someone-else","tools":[]}})
dispatch(q,1,"ahp-session:/s0",6,{"type":"session/configChanged","config":{"model":"gpt"}}).rt(1)
q.body(1, json.dumps({"jsonrpc":"2.0","id":8,"method":"ping","params":{"pad":"x"*800}}).encode()).rt(1)
q.open(0x42)
init(q,2,"ahp-c",["ahp-chat:/s0"]).rt(2)
q.raw(2,b'Content-Length: 5\r\n\r\n{"a":').rt(2)
seeds["seed-ahp-bad-input"] = q

# 4: Copilot session seen by an AHP client; disposeSession by AHP while a Copilot client is attached; a slow AHP reader under a small budget.
q = Seq(0x82, 4)   # budget 1.5 KiB
q.open(0x00).open(0x40)
q.req(0,1,"session.create",{"sessionId":"s2","streaming":True,"requestPermission":True}).rt(0)
init(q,1,"ahp-a",["ahp-root://","ahp-chat:/s2","ahp-session:/s2"]).rt(1)
q.req(0,2,"session.send",{"sessionId":"s2","prompt":"both please"}).rt(0)
q.req(0,3,"session.send",{"sessionId":"s2","prompt":"title"}).rt(0)
for _ in range(6): q.timer()
q.rt(1)
q.req(1,1,"disposeSession",{"channel":"ahp-session:/s2"}).rt(1).rt(0)
q.req(1,2,"listSessions",{"channel":"ahp-root://"}).rt(1)
seeds["seed-ahp-slow-reader"] = q
q2 = Seq(0x84, 4)
q2.b += q.b[2:]
seeds["seed-ahp-copilot-session-disposed"] = q2

os.makedirs(out, exist_ok=True)
for name, q in seeds.items():
    open(os.path.join(out, name), 'wb').write(bytes(q.b))
    print(name, len(q.b))
