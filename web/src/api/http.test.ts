import { describe, expect, it, vi } from "vitest";
import { createApi } from "./client";
import { ApiError, createCall, fillPath, parseRetryAfter } from "./http";

function jsonResponse(body: unknown, status = 200, headers: Record<string, string> = {}) {
  return new Response(JSON.stringify(body), {
    status,
    headers: { "content-type": "application/json", ...headers },
  });
}

function client(response: Response, onUnauthorized = vi.fn()) {
  const fetch = vi.fn<typeof globalThis.fetch>(async () => response.clone());
  const api = createApi(
    createCall({ base: "https://app.example", token: () => "tok", onUnauthorized, fetch }),
  );
  return { api, fetch, onUnauthorized };
}

describe("the API client", () => {
  it("sends the bearer token, the query and no body on a GET", async () => {
    const { api, fetch } = client(
      jsonResponse({ sessions: [], archivedCount: 0, nextCursor: null, hasMore: false }),
    );
    await api.listSessions("archived", "abc", 50);
    const [url, init] = fetch.mock.calls[0]!;
    expect(url).toBe("https://app.example/api/sessions?status=archived&cursor=abc&limit=50");
    expect(init?.method).toBe("GET");
    expect(init?.body).toBeUndefined();
    expect((init?.headers as Record<string, string>).authorization).toBe("Bearer tok");
  });

  it("leaves out absent query values and encodes path parameters", async () => {
    const { api, fetch } = client(jsonResponse({ events: [], nextCursor: null }));
    await api.events("a/b c", null);
    expect(fetch.mock.calls[0]![0]).toBe("https://app.example/api/sessions/a%2Fb%20c/events");
  });

  it("posts a user message as {message: {id, role, parts}}", async () => {
    const { api, fetch } = client(jsonResponse({ success: true, status: "inserted" }));
    const message = { id: "m1", role: "user" as const, parts: [{ type: "text", text: "hi" }] };
    await expect(api.postMessage("s1", "c1", message)).resolves.toEqual({
      success: true,
      status: "inserted",
    });
    const [url, init] = fetch.mock.calls[0]!;
    expect(url).toBe("https://app.example/api/sessions/s1/chats/c1/messages");
    expect(init?.method).toBe("POST");
    expect(JSON.parse(String(init?.body))).toEqual({ message });
    expect((init?.headers as Record<string, string>)["content-type"]).toBe("application/json");
  });

  it("uses PUT to resume and POST to pause, both with {sessionId}", async () => {
    const { api, fetch } = client(jsonResponse({ success: true }));
    await api.resume("s1");
    await api.pause("s1");
    expect(fetch.mock.calls.map(([url, init]) => [url, init?.method, init?.body])).toEqual([
      ["https://app.example/api/sandbox/snapshot", "PUT", '{"sessionId":"s1"}'],
      ["https://app.example/api/sandbox/snapshot", "POST", '{"sessionId":"s1"}'],
    ]);
  });

  it("turns an error answer into an ApiError with its code, field and Retry-After", async () => {
    const { api } = client(
      jsonResponse({ error: "Slow down", code: "rate_limited", field: null }, 429, { "retry-after": "42" }),
    );
    const error = await api.createSession({ repoUrl: "acme/app" }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ApiError);
    expect(error).toMatchObject({
      status: 429,
      code: "rate_limited",
      message: "Slow down",
      retryAfter: 42,
      field: null,
    });
  });

  it("keeps the field a validation error names", async () => {
    const { api } = client(
      jsonResponse({ error: "Invalid branch name", code: "invalid_input", field: "branch" }, 400),
    );
    await expect(api.createSession({ branch: "..x" })).rejects.toMatchObject({
      field: "branch",
      code: "invalid_input",
    });
  });

  it("reports a 401 so the app can sign out", async () => {
    const { api, onUnauthorized } = client(
      jsonResponse({ error: "Unauthorized", code: "unauthenticated" }, 401),
    );
    await expect(api.preferences()).rejects.toMatchObject({ status: 401 });
    expect(onUnauthorized).toHaveBeenCalledOnce();
  });

  it("survives an error body that is not JSON", async () => {
    const { api } = client(
      new Response("<html>bad gateway</html>", { status: 502, statusText: "Bad Gateway" }),
    );
    await expect(api.preferences()).rejects.toMatchObject({
      status: 502,
      code: "error",
      message: "Bad Gateway",
    });
  });
});

describe("helpers", () => {
  it("reads Retry-After as seconds or as an HTTP date", () => {
    expect(parseRetryAfter("7")).toBe(7);
    expect(parseRetryAfter(new Date(61_000).toUTCString(), 1_000)).toBe(60);
    expect(parseRetryAfter(null)).toBeNull();
    expect(parseRetryAfter("soon")).toBeNull();
  });

  it("refuses a path with a missing parameter", () => {
    expect(() => fillPath("/api/sessions/{session_id}", {})).toThrow("session_id");
  });
});

describe("types checked against the OpenAPI schema", () => {
  it("rejects unknown paths, methods and bodies at compile time", () => {
    const call = createCall({ base: "", token: () => null, fetch: vi.fn() });
    const never = () => {
      // @ts-expect-error: no such path
      void call("get", "/api/nope");
      // @ts-expect-error: sessions cannot be PUT
      void call("put", "/api/sessions/{session_id}", { params: { session_id: "s" } });
      // @ts-expect-error: the session PATCH takes only title and status
      void call("patch", "/api/sessions/{session_id}", { body: { status: "gone" } });
    };
    expect(never).toBeTypeOf("function");
  });
});
