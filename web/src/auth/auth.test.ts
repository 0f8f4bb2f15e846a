import { createHash } from "node:crypto";
import { afterEach, describe, expect, it, vi } from "vitest";
import { authorizeUrl, codeChallenge, completeSignIn, logoutUrl } from "./cognito";
import { LOCAL_DEFAULT, loadConfig, parseConfig } from "./config";
import { localSignIn } from "./local";
import { clearCredentials, credentialsFor, loadCredentials, saveCredentials } from "./storage";

const AWS = {
  mode: "aws" as const,
  apiBase: "",
  cognitoDomain: "https://oa-dev.auth.us-east-1.amazoncognito.com",
  clientId: "client123",
  redirectUri: "https://d111.cloudfront.net/",
};

function jwt(claims: Record<string, unknown>): string {
  const part = (value: object) =>
    btoa(JSON.stringify(value)).replace(/=+$/, "").replace(/\+/g, "-").replace(/\//g, "_");
  return `${part({ alg: "none" })}.${part(claims)}.sig`;
}

afterEach(() => {
  vi.unstubAllGlobals();
  sessionStorage.clear();
  localStorage.clear();
});

describe("config.json", () => {
  it("defaults to local mode when the file is missing (the SPA fallback answers HTML)", async () => {
    vi.stubGlobal(
      "fetch",
      vi.fn(async () => new Response("<!doctype html>", { headers: { "content-type": "text/html" } })),
    );
    await expect(loadConfig("/config.json")).resolves.toEqual(LOCAL_DEFAULT);
  });

  it("reads aws mode and adds https:// to a bare Cognito domain", () => {
    const config = parseConfig({
      ...AWS,
      cognitoDomain: "oa-dev.auth.us-east-1.amazoncognito.com",
      apiBase: "https://api.example/",
    });
    expect(config).toEqual({ ...AWS, apiBase: "https://api.example" });
  });

  it("refuses aws mode without its Cognito values", () => {
    expect(() => parseConfig({ mode: "aws", cognitoDomain: "x" })).toThrow('"clientId"');
    expect(() => parseConfig({ mode: "gcp" })).toThrow("unknown mode");
  });
});

describe("Cognito hosted UI with PKCE", () => {
  it("derives the S256 challenge (base64url of the SHA-256)", async () => {
    const verifier = "dBjftJeZ4CVP-mJ92Z3l3hDjW2Uqcoz9CXY8MNnQ3Sc";
    expect(await codeChallenge(verifier)).toBe(createHash("sha256").update(verifier).digest("base64url"));
  });

  it("sends the browser to /oauth2/authorize with the code flow and a challenge", async () => {
    const url = new URL(await authorizeUrl(AWS));
    expect(url.origin + url.pathname).toBe(`${AWS.cognitoDomain}/oauth2/authorize`);
    const query = Object.fromEntries(url.searchParams);
    expect(query).toMatchObject({
      response_type: "code",
      client_id: "client123",
      redirect_uri: AWS.redirectUri,
      scope: "openid email profile",
      code_challenge_method: "S256",
    });
    const pending = JSON.parse(sessionStorage.getItem("openagents.pkce")!) as {
      verifier: string;
      state: string;
    };
    expect(query.state).toBe(pending.state);
    expect(query.code_challenge).toBe(await codeChallenge(pending.verifier));
  });

  it("exchanges the code with the verifier and keeps the ID token", async () => {
    const authorize = new URL(await authorizeUrl(AWS));
    const idToken = jwt({ name: "Alice Example", exp: 4_000_000_000 });
    const fetch = vi.fn<typeof globalThis.fetch>(async () =>
      Response.json({ id_token: idToken, access_token: "a" }),
    );
    vi.stubGlobal("fetch", fetch);
    const callback = new URL(`${AWS.redirectUri}?code=xyz&state=${authorize.searchParams.get("state")}`);
    const credentials = await completeSignIn(AWS, callback);
    expect(credentials).toEqual({ token: idToken, user: "Alice Example", expiresAt: 4_000_000_000_000 });
    const [url, init] = fetch.mock.calls[0]!;
    expect(url).toBe(`${AWS.cognitoDomain}/oauth2/token`);
    const body = new URLSearchParams(String(init?.body));
    expect(Object.fromEntries(body)).toMatchObject({
      grant_type: "authorization_code",
      code: "xyz",
      client_id: "client123",
    });
    expect(await codeChallenge(body.get("code_verifier")!)).toBe(
      authorize.searchParams.get("code_challenge"),
    );
  });

  it("refuses a callback whose state this browser did not send", async () => {
    await authorizeUrl(AWS);
    await expect(completeSignIn(AWS, new URL(`${AWS.redirectUri}?code=xyz&state=forged`))).rejects.toThrow(
      "does not match",
    );
  });

  it("ignores a URL that is not a callback, and reports a hosted UI error", async () => {
    await expect(completeSignIn(AWS, new URL(AWS.redirectUri))).resolves.toBeNull();
    const denied = new URL(`${AWS.redirectUri}?error=access_denied&error_description=Nope`);
    await expect(completeSignIn(AWS, denied)).rejects.toThrow("Nope");
  });

  it("signs out through /logout back to the app", () => {
    expect(logoutUrl(AWS)).toBe(
      `${AWS.cognitoDomain}/logout?client_id=client123&logout_uri=https%3A%2F%2Fd111.cloudfront.net%2F`,
    );
  });
});

describe("local sign-in and stored credentials", () => {
  it("mints a token through /api/local/token", async () => {
    const token = jwt({ username: "alice", name: "Alice Smith", exp: 4_000_000_000 });
    const fetch = vi.fn<typeof globalThis.fetch>(async () => Response.json({ token, user: "alice" }));
    vi.stubGlobal("fetch", fetch);
    await expect(localSignIn("", "alice", "Alice Smith")).resolves.toMatchObject({
      token,
      user: "Alice Smith",
    });
    expect(fetch.mock.calls[0]![0]).toBe("/api/local/token");
    expect(JSON.parse(String(fetch.mock.calls[0]![1]?.body))).toEqual({ user: "alice", name: "Alice Smith" });
  });

  it("explains a server without local sign-in", async () => {
    vi.stubGlobal(
      "fetch",
      vi.fn(async () => Response.json({ error: "Not Found" }, { status: 404 })),
    );
    await expect(localSignIn("", "alice")).rejects.toThrow("no local sign-in");
  });

  it("keeps credentials until shortly before they expire", () => {
    const credentials = credentialsFor(jwt({ "cognito:username": "bob", exp: 2_000 }), "x");
    expect(credentials.user).toBe("bob");
    saveCredentials(credentials);
    expect(loadCredentials(1_000_000)).toEqual(credentials);
    expect(loadCredentials(1_990_000)).toBeNull();
    clearCredentials();
    expect(loadCredentials(0)).toBeNull();
  });
});
