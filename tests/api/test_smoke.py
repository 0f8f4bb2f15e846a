from tests.support import Api


def test_create_then_get(api: Api) -> None:
    created = api.post("/api/sessions", {"title": "Hello"})
    assert created.status == 201, created.body
    sid = created.body["session"]["id"]
    got = api.get(f"/api/sessions/{sid}")
    assert got.status == 200
    assert got.body["session"]["title"] == "Hello"
    assert api.get(f"/api/sessions/{sid}", user="bob").status == 404
