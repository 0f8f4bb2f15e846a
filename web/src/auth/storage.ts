// The signed-in user's bearer token, kept in localStorage until it expires.

export interface Credentials {
  token: string;
  /** Display name: the user name in local mode, the token's name/email claims with Cognito. */
  user: string;
  /** Milliseconds since the epoch (the token's `exp`). */
  expiresAt: number;
}

const KEY = "openagents.credentials";

function tokenClaims(token: string): Record<string, unknown> {
  const payload = token.split(".")[1];
  if (!payload) throw new Error("not a JWT");
  const base64 = payload.replace(/-/g, "+").replace(/_/g, "/");
  const bytes = Uint8Array.from(atob(base64), (char) => char.charCodeAt(0));
  return JSON.parse(new TextDecoder().decode(bytes)) as Record<string, unknown>;
}

export function credentialsFor(token: string, fallbackUser: string): Credentials {
  const claims = tokenClaims(token);
  const name = [claims.name, claims.email, claims["cognito:username"], claims.username].find(
    (value): value is string => typeof value === "string" && value.length > 0,
  );
  const exp = typeof claims.exp === "number" ? claims.exp * 1000 : Date.now() + 3600_000;
  return { token, user: name ?? fallbackUser, expiresAt: exp };
}

export function saveCredentials(credentials: Credentials): void {
  localStorage.setItem(KEY, JSON.stringify(credentials));
}

export function loadCredentials(now = Date.now()): Credentials | null {
  try {
    const stored = JSON.parse(localStorage.getItem(KEY) ?? "null") as Credentials | null;
    return stored && stored.expiresAt > now + 30_000 ? stored : null;
  } catch {
    return null;
  }
}

export function clearCredentials(): void {
  localStorage.removeItem(KEY);
}
