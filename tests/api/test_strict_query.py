"""An unknown query parameter is refused with 400 naming it, as an unknown body field is: a typo
(``?curser=``) is never silently ignored. Declared parameters, a dependency's included, pass."""

from __future__ import annotations

from tests.api.test_sessions import SESSIONS, assert_error, create
from tests.support import Api


def test_an_unknown_query_parameter_is_refused_by_name(api: Api) -> None:
    assert_error(api.get(SESSIONS, query={"curser": "x"}), 400, "invalid_input", "curser")
    assert_error(api.get("/api/models", query={"debug": "1"}), 400, "invalid_input", "debug")


def test_declared_query_parameters_pass(api: Api) -> None:
    session = create(api, {"title": "strict"})
    listed = api.get(SESSIONS, query={"limit": "5"})
    assert listed.status == 200, listed.body
    assert [s["id"] for s in listed.body["sessions"]] == [session["id"]]
    chats = api.get(f"{SESSIONS}/{session['id']}/chats")
    assert chats.status == 200, chats.body
    chat = chats.body["chats"][0]["id"]
    messages = api.get(f"{SESSIONS}/{session['id']}/chats/{chat}/messages", query={"limit": "5"})
    assert messages.status == 200, messages.body
    refused = api.get(f"{SESSIONS}/{session['id']}/chats", query={"limit": "5"})  # not declared
    assert_error(refused, 400, "invalid_input", "limit")
