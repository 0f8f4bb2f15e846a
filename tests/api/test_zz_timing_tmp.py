import time
from tests.support import Api

def test_timing(api: Api) -> None:
    t = time.monotonic()
    for i in range(50):
        r = api.post("/api/sessions", {})
        assert r.status == 201, r.body
    print(api.transport, "create", (time.monotonic() - t) / 50)
    t = time.monotonic()
    sids = [s["id"] for s in api.get("/api/sessions").body["sessions"]]
    for sid in sids[:20]:
        r = api.patch(f"/api/sessions/{sid}", {"status": "archived"})
        assert r.status == 200
    print(api.transport, "patch", (time.monotonic() - t) / 20)
    r = api.post("/api/sessions", [1])
    print(r.status, r.body)
    r = api.post("/api/sessions", "x")
    print(r.status, r.body)
    r = api.request("POST", "/api/sessions")
    print(r.status, r.body)
    r = api.get("/api/sessions", query={"status": "archived", "cursor": "eyJ2IjoxLCJrIjoiMjAyNi0wMS0wMVQwMDowMDowMC4wMDAwMDArMDA6MDAjYWJjIn0"})
    print(r.status, r.body)
