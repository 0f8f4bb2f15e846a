// Runtime configuration: `config.json` next to index.html (written at deploy time). Without one
// the app runs against the same origin in local mode (what `openagents dev` serves).

export type AppConfig =
  | { mode: "local"; apiBase: string }
  | { mode: "aws"; apiBase: string; cognitoDomain: string; clientId: string; redirectUri: string };

export const LOCAL_DEFAULT: AppConfig = { mode: "local", apiBase: "" };

function text(raw: Record<string, unknown>, key: string): string {
  const value = raw[key];
  if (typeof value !== "string" || !value) throw new Error(`config.json: "${key}" is required in aws mode`);
  return value;
}

/** Validates a parsed config.json; the Cognito domain may be given with or without https://. */
export function parseConfig(raw: unknown): AppConfig {
  if (typeof raw !== "object" || raw === null) throw new Error("config.json: not an object");
  const data = raw as Record<string, unknown>;
  const apiBase = typeof data.apiBase === "string" ? data.apiBase.replace(/\/+$/, "") : "";
  if (data.mode === "local" || data.mode === undefined) return { mode: "local", apiBase };
  if (data.mode !== "aws") throw new Error(`config.json: unknown mode ${String(data.mode)}`);
  const domain = text(data, "cognitoDomain").replace(/\/+$/, "");
  return {
    mode: "aws",
    apiBase,
    cognitoDomain: domain.startsWith("https://") ? domain : `https://${domain}`,
    clientId: text(data, "clientId"),
    redirectUri: text(data, "redirectUri"),
  };
}

export async function loadConfig(url = `${import.meta.env.BASE_URL}config.json`): Promise<AppConfig> {
  const response = await fetch(url, { cache: "no-store" });
  // A missing file is the local default; the local server's SPA fallback answers HTML for it.
  if (!response.ok || !response.headers.get("content-type")?.includes("json")) return LOCAL_DEFAULT;
  return parseConfig(await response.json());
}
